package replay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestAReplayServesARetriedCallsFinalAnswer runs a workflow whose read was
// answered 503, then 200 on its retry: the workflow has one step of two
// attempts carrying the final answer, and its replay serves that answer,
// one step, without calling the tool again.
func TestAReplayServesARetriedCallsFinalAnswer(t *testing.T) {
	ctx := context.Background()
	var seen atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"balance":42}`))
	}))
	defer api.Close()
	db := sqlite.NewTestDB(t)
	now := time.Now()
	books := &tool.Tool{ID: "tool_01JDBOOKS00000000000000000", Tenant: "acme", Name: "books", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, Revision: 1, OperationCount: 1,
		IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: api.URL,
		Limits: &tool.Limits{Retries: &tool.RetryLimits{Max: 3, On: []int{503}}, Circuit: &tool.CircuitLimits{Failures: 5}}}
	ops := []tool.Operation{{ID: "getBalance", Kind: tool.Read, HTTP: &tool.HTTPBinding{Method: "GET", Path: "/balance"}}}
	if err := db.CreateTool(ctx, books, ops, nil); err != nil {
		t.Fatal(err)
	}
	def := json.RawMessage(`{"tools": ["books"], "steps": [{"action": "fetch", "call": "books.getBalance"}], "outcome": "'fetched'"}`)
	if err := db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "fetch", Version: "1", Definition: def, Tools: []string{"books"},
		DeployedAt: now}, true, nil); err != nil {
		t.Fatal(err)
	}
	caller := toolcall.New(toolcall.Options{Client: outbound.New(outbound.Options{AllowPrivate: true}), Backoff: time.Millisecond})
	runner := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: caller})
	runCtx, stop := context.WithCancel(ctx)
	go runner.Run(runCtx)
	t.Cleanup(func() { stop(); runner.Close(context.Background()) })
	wf, err := runner.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "fetch", Version: "1", Goal: "g",
		Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}})
	if err != nil {
		t.Fatal(err)
	}
	done, steps, err := runner.Finished(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Outcome != "fetched" || len(steps) != 1 {
		t.Fatalf("workflow %s (%s) with %d steps, want fetched with one step", done.Outcome, done.Error, len(steps))
	}
	if s := steps[0]; s.Attempts != 2 || s.HTTPStatus != 200 || string(s.Result) != `{"balance":42}` {
		t.Fatalf("step: %d attempts, status %d, result %s; want 2 attempts ending 200 with the final answer", s.Attempts, s.HTTPStatus, s.Result)
	}

	svc := &replay.Service{Workflows: db, Versions: db, Programs: runner, Store: db}
	rp, err := svc.Replay(ctx, replay.Request{Tenant: "acme", WorkflowID: wf.ID, Target: "fetch@1", DryRun: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Steps) != 1 || rp.Steps[0].Replay == nil || string(rp.Steps[0].Replay.Result) != `{"balance":42}` {
		t.Fatalf("replay steps %+v, want the one recorded step with the final answer", rp.Steps)
	}
	if rp.ReplayOutcome != "fetched" || seen.Load() != 2 {
		t.Errorf("replay outcome %q, the tool saw %d requests; want fetched and no new request", rp.ReplayOutcome, seen.Load())
	}
}
