package workflow_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestAFailedStepCarriesItsErrorCode runs two workflows against a tool
// that answers 503, whose circuit opens at the first failure: the first
// workflow's step fails upstream_error after the API answered; the
// second's fails circuit_open, never sent.
func TestAFailedStepCarriesItsErrorCode(t *testing.T) {
	db := sqlite.NewTestDB(t)
	ctx := context.Background()
	var seen atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer api.Close()
	now := time.Now()
	books := &tool.Tool{ID: "tool_01JDBOOKS00000000000000000", Tenant: "acme", Name: "books", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, Revision: 1,
		OperationCount: 1, IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: api.URL,
		Limits: &tool.Limits{Retries: &tool.RetryLimits{Max: 0}, Circuit: &tool.CircuitLimits{Failures: 1, OpenFor: "1m"}}}
	ops := []tool.Operation{{ID: "getBalance", Kind: tool.Read, HTTP: &tool.HTTPBinding{Method: "GET", Path: "/balance"}}}
	if err := db.CreateTool(ctx, books, ops, nil); err != nil {
		t.Fatal(err)
	}
	deployOn(t, db, "fetch", `{"tools": ["books"], "steps": [{"action": "fetch", "call": "books.getBalance"}], "outcome": "'fetched'"}`, "books")
	caller := call.New(call.Options{Client: outbound.New(outbound.Options{AllowPrivate: true})})
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: caller, Owner: "replica-a", Lease: time.Minute})
	defer r.Close(ctx)
	for i, want := range []struct {
		code   string
		status int
		sent   bool
	}{{tool.CodeUpstream, 503, true}, {tool.CodeCircuitOpen, 0, false}} {
		wf, err := r.Start(ctx, request("fetch"))
		if err != nil {
			t.Fatal(err)
		}
		done, steps, err := r.Finished(ctx, "acme", wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != workflow.Failed || len(steps) != 1 {
			t.Fatalf("workflow %d: %s with %d steps, want failed with one", i, done.Status, len(steps))
		}
		if s := steps[0]; s.ErrorCode != want.code || s.HTTPStatus != want.status || s.Sent != want.sent {
			t.Errorf("workflow %d: step error_code %q, status %d, sent %v; want %q, %d, %v (error %q)",
				i, s.ErrorCode, s.HTTPStatus, s.Sent, want.code, want.status, want.sent, s.Error)
		}
	}
	if n := seen.Load(); n != 1 {
		t.Errorf("the API saw %d requests, want 1: the open circuit sends nothing", n)
	}
}
