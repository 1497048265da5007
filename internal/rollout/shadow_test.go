package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/tool"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// chatServer speaks the Chat Completions wire format: a conversation's
// first completion asks for transaction tx-1, the next answers. With hold,
// a request of the target's (its instructions say "carefully") is answered
// only once hold is closed.
func chatServer(t *testing.T, requests *atomic.Int64, hold <-chan struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.NotFound(w, r)
			return
		}
		if hold != nil && strings.Contains(string(req.Messages[0]), "carefully") {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		n := requests.Add(1)
		msg, finish := `{"role": "assistant", "content": "the transaction is fine"}`, "stop"
		if len(req.Messages) == 2 {
			msg, finish = `{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
				"function": {"name": "payments__getTransaction", "arguments": "{\"id\": \"tx-1\"}"}}]}`, "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": "chatcmpl-%d", "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": [{"index": 0, "message": %s, "finish_reason": %q}],
			"usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}`, n, msg, finish)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// newShadowReplica is a replica whose runner asks the chat server through
// the real provider clients, calls the payments tool over HTTP, and whose
// rollouts replay shadows through the replay service, as cmd/agentplane
// wires them.
func newShadowReplica(t *testing.T, url, owner, chatURL string, maxRunning int, modelTimeout time.Duration, counted chan<- string, opts ...func(*rollout.Service)) *replica {
	t.Helper()
	db, err := postgres.Open(t.Context(), url, postgres.WithWriters(2), postgres.WithMaxConns(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	models := model.LookupFunc(func(_ context.Context, tenant, name string) (*model.Model, error) {
		return &model.Model{ID: model.DefaultID, Tenant: tenant, Name: name, Provider: model.OpenAI, BaseURL: chatURL + "/v1",
			Model: "gpt-test", Timeout: modelTimeout, Revision: 1,
			Price: &model.Price{InputPerMTok: 3, OutputPerMTok: 15, Currency: "USD"}}, nil
	})
	out := outbound.New(outbound.Options{AllowPrivate: true})
	policy, _ := secrets.NewPolicy([]string{"env://TOOL_*"}, false)
	resolver, err := secrets.NewResolver(secrets.Options{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	svc := &rollout.Service{Store: db, Versions: db, Workflows: db}
	for _, o := range opts {
		o(svc)
	}
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Owner: owner, Lease: time.Minute, Arms: svc, MaxRunning: maxRunning,
		Models: models, LLM: llm.NewClients(llm.Options{Outbound: out}),
		Caller: toolcall.New(toolcall.Options{Client: out, Secrets: resolver, Timeout: 10 * time.Second})})
	svc.Shadows = &replay.Service{Workflows: db, Versions: db, Programs: r, Runner: r, Store: db, Reader: r, Tools: db,
		Models: replay.RunnerModels{Runner: r}}
	r.OnFinish(func(ctx context.Context, wf *workflow.Workflow) {
		svc.Finished(ctx, wf)
		counted <- wf.ID
	})
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &replica{db: db, runner: r, invoker: &workflow.Invoker{Runner: r, Workflows: db, Now: time.Now}, rollouts: svc}
}

// TestShadowSendsNothing: a shadow rollout on PostgreSQL with two replicas
// replays each finished workflow of the default against the target as a
// dry run with the live model: the tool gets the originals' requests and
// not one more, and the shadow arm reports its runs, tokens and cost.
func TestShadowSendsNothing(t *testing.T) {
	url := postgres.NewTestDatabase(t)
	var toolRequests, chatRequests atomic.Int64
	payments := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toolRequests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": "tx-1", "amount": 42}`)
	}))
	t.Cleanup(payments.Close)
	chat := chatServer(t, &chatRequests, nil)
	counted := make(chan string, 100)
	a := newShadowReplica(t, url, "replica-a", chat.URL, 0, 10*time.Second, counted)
	b := newShadowReplica(t, url, "replica-b", chat.URL, 0, 10*time.Second, counted)
	setUpShadow(t, a, payments.URL)

	ctx := t.Context()

	const n = 4
	shadowCaller := workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"agents:invoke", "tool:*"}}
	for i := range n {
		r := []*replica{a, b}[i%2]
		got, err := r.invoker.Invoke(ctx, workflow.Invocation{StartRequest: workflow.StartRequest{
			Tenant: "acme", Agent: "triage", Goal: "check tx-1", Caller: shadowCaller}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Workflow.AgentVersion != "1" || got.Workflow.Rollout == nil || got.Workflow.Rollout.Arm != workflow.ArmDefault {
			t.Fatalf("a shadow's invocation ran %s on %+v, want the default", got.Workflow.AgentVersion, got.Workflow.Rollout)
		}
		waitCounted(t, counted, got.Workflow.ID)
	}
	a.rollouts.WaitShadows()
	b.rollouts.WaitShadows()
	if got := toolRequests.Load(); got != n {
		t.Errorf("the tool got %d requests, want %d: the originals' only", got, n)
	}
	if got := chatRequests.Load(); got != 4*n {
		t.Errorf("the model got %d requests, want %d: two for each original and each shadow", got, 4*n)
	}
	v, err := b.rollouts.Get(ctx, "acme", "triage")
	if err != nil {
		t.Fatal(err)
	}
	def, shadow := v.Arms[0], v.Arms[1]
	if def.Runs != n || shadow.Arm != rollout.ArmShadow || shadow.Runs != n || shadow.Version != "2" {
		t.Fatalf("arms = %+v", v.Arms)
	}
	// 200 input and 20 output tokens a run at 3 and 15 USD a million.
	want := float64(n) * (200*3 + 20*15) / 1e6
	if shadow.InputTokens != 200*n || shadow.Cost == nil || shadow.Cost.Currency != "USD" || shadow.Cost.Amount < want*0.999 || shadow.Cost.Amount > want*1.001 {
		t.Errorf("shadow arm: %d input tokens, cost %+v; want %d and %v USD", shadow.InputTokens, shadow.Cost, 200*n, want)
	}
	if len(shadow.Checks) != 1 || shadow.Checks[0].Passed != n {
		t.Errorf("shadow checks = %+v, want outcome_unchanged passed %d times", shadow.Checks, n)
	}
	if def.Cost == nil || def.InputTokens != 200*n {
		t.Errorf("default arm: %+v", def)
	}
}

// setUpShadow registers the payments tool at paymentsURL, deploys triage
// 1 (the default) and 2, and starts a shadow of 2 on every workflow.
func setUpShadow(t *testing.T, a *replica, paymentsURL string) {
	t.Helper()
	ctx, now := t.Context(), time.Now()
	pt := &tool.Tool{ID: "tool_01JDPAYMENTS00000000000000", Tenant: "acme", Name: "payments", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, Revision: 1, OperationCount: 1,
		IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: paymentsURL}
	ops := []tool.Operation{{ID: "getTransaction", Kind: tool.Read,
		Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		HTTP:  &tool.HTTPBinding{Method: "GET", Path: "/transactions/{id}", Params: []tool.Param{{Name: "id", In: "path", Required: true}}}}}
	if err := a.db.CreateTool(ctx, pt, ops, nil); err != nil {
		t.Fatal(err)
	}
	for _, purpose := range []string{"You check transactions.", "You check transactions carefully."} {
		def := json.RawMessage(fmt.Sprintf(`{"purpose": %q, "tools": ["payments"],
			"steps": [{"action": "solve", "plan": {"prompt": "goal"}}], "outcome": "'answered'"}`, purpose))
		if err := a.db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "triage", Definition: def, Tools: []string{"payments"},
			DeployedAt: time.Now()}, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := a.rollouts.Put(ctx, "acme", "triage", rollout.Request{Target: "2", Percent: percent(100), Mode: rollout.Shadow,
		Checks: []replay.CheckSpec{{Name: replay.CheckOutcomeUnchanged}}, MinRuns: &[]int{100}[0]}, audit.Actor{Sub: "alice"}, nil); err != nil {
		t.Fatal(err)
	}
}

// heldShadow is a replica with a shadow rollout of triage whose model
// requests are held until close(hold) (done at the test's end at the
// latest), and the invocations it counted.
func heldShadow(t *testing.T, maxRunning int, opts ...func(*rollout.Service)) (a *replica, hold chan struct{}, counted chan string) {
	t.Helper()
	url := postgres.NewTestDatabase(t)
	payments := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": "tx-1", "amount": 42}`)
	}))
	t.Cleanup(payments.Close)
	var chatRequests atomic.Int64
	hold = make(chan struct{})
	chat := chatServer(t, &chatRequests, hold)
	counted = make(chan string, 10)
	// The model's requests are held far past the test's own limit.
	a = newShadowReplica(t, url, "replica-a", chat.URL, maxRunning, 10*time.Minute, counted, opts...)
	setUpShadow(t, a, payments.URL)
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
		a.rollouts.WaitShadows()
	})
	return a, hold, counted
}

// released lets a heldShadow's model answer, waits for its shadow
// replays, and returns the rollout's arms.
func released(t *testing.T, a *replica, hold chan struct{}) []rollout.Arm {
	t.Helper()
	close(hold)
	a.rollouts.WaitShadows()
	v, err := a.rollouts.Get(t.Context(), "acme", "triage")
	if err != nil {
		t.Fatal(err)
	}
	return v.Arms
}

// TestShadowLeavesTheSlot: a shadow's replay waits on the model off the
// execution slot of the workflow it shadows, so a replica running one
// workflow at a time runs the next invocation while the replay waits.
func TestShadowLeavesTheSlot(t *testing.T) {
	// Only a replay off the slot lets the second invocation run.
	a, hold, counted := heldShadow(t, 1)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	caller := workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"agents:invoke", "tool:*"}}
	for i := range 2 {
		got, err := a.invoker.Invoke(ctx, workflow.Invocation{StartRequest: workflow.StartRequest{
			Tenant: "acme", Agent: "triage", Goal: "check tx-1", Caller: caller}})
		if err != nil {
			t.Fatal(err)
		}
		done, _, err := a.runner.Finished(ctx, "acme", got.Workflow.ID)
		if err != nil {
			t.Fatalf("invocation %d while the first one's shadow waits on the model: %v", i+1, err)
		}
		if done.Outcome != "answered" {
			t.Fatalf("invocation %d ended %s %s", i+1, done.Outcome, done.Error)
		}
		waitCounted(t, counted, got.Workflow.ID)
	}
	if arms := released(t, a, hold); arms[0].Runs != 2 || arms[1].Runs != 2 {
		t.Errorf("arms = %+v, want two runs in each", arms)
	}
}

// TestShadowsWaitingAreBounded: while the model holds a replica's shadow
// replays, a finished workflow's replay waits for a place only while
// fewer than MaxShadowsWaiting wait; past them it is not made, so a slow
// model does not pile up a goroutine and a workflow per finished run.
func TestShadowsWaitingAreBounded(t *testing.T) {
	a, hold, counted := heldShadow(t, 4, func(s *rollout.Service) { s.MaxShadows, s.MaxShadowsWaiting = 1, 2 })

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	caller := workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"agents:invoke", "tool:*"}}
	for range 6 {
		got, err := a.invoker.Invoke(ctx, workflow.Invocation{StartRequest: workflow.StartRequest{
			Tenant: "acme", Agent: "triage", Goal: "check tx-1", Caller: caller}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.runner.Finished(ctx, "acme", got.Workflow.ID); err != nil {
			t.Fatal(err)
		}
		waitCounted(t, counted, got.Workflow.ID)
	}
	if arms := released(t, a, hold); arms[0].Runs != 6 || arms[1].Runs != 3 {
		t.Errorf("arms = %+v, want 6 default runs and 3 shadow replays (1 running, 2 waiting)", arms)
	}
}
