package workflow_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// ledger is a fake tool API: reads answer at once; the write blocks while
// hold is set, until the caller's context ends.
type ledger struct {
	mu    sync.Mutex
	calls []string // operation and Idempotency-Key of each call
	hold  bool
	held  chan struct{}
}

func (l *ledger) Call(ctx context.Context, req call.Request) (call.Result, error) {
	l.mu.Lock()
	l.calls = append(l.calls, req.Operation.ID+" "+req.IdempotencyKey)
	hold := l.hold && req.Operation.Kind == tool.Write
	l.mu.Unlock()
	if hold {
		l.held <- struct{}{}
		<-ctx.Done()
		return call.Result{}, ctx.Err()
	}
	return call.Result{Status: 200, Body: json.RawMessage(`{"amount": 42}`)}, nil
}

func (l *ledger) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// setup stores an idempotent ledger tool and an agent calling its read,
// then its write.
func setup(t *testing.T) *sqlite.DB {
	t.Helper()
	db := sqlite.NewTestDB(t)
	ctx := context.Background()
	now := time.Now()
	lt := &tool.Tool{ID: "tool_01JDLEDGER0000000000000000", Tenant: "acme", Name: "ledger", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, IdempotencySupport: true,
		Revision: 1, OperationCount: 2, IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: "http://ledger.test"}
	ops := []tool.Operation{
		{ID: "getTransaction", Kind: tool.Read, HTTP: &tool.HTTPBinding{Method: "GET", Path: "/t"}},
		{ID: "postEntry", Kind: tool.Write, HTTP: &tool.HTTPBinding{Method: "POST", Path: "/e"}},
	}
	if err := db.CreateTool(ctx, lt, ops, nil); err != nil {
		t.Fatal(err)
	}
	def := json.RawMessage(`{"tools": ["ledger"], "steps": [
		{"action": "fetch", "call": "ledger.getTransaction", "save_as": "txn"},
		{"action": "post", "call": "ledger.postEntry", "args": {"amount": "txn.amount"}}],
		"outcome": "'settled'"}`)
	if err := db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "settle", Definition: def, Tools: []string{"ledger"}, DeployedAt: now}, false, nil); err != nil {
		t.Fatal(err)
	}
	return db
}

func newRunner(db *sqlite.DB, owner string, caller workflow.ToolCaller) *workflow.Runner {
	return workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: caller, Owner: owner, Lease: time.Minute})
}

func TestAnotherRunnerResumesAfterTheLastRecordedStep(t *testing.T) {
	db := setup(t)
	ctx := context.Background()
	api := &ledger{hold: true, held: make(chan struct{}, 1)}
	a := newRunner(db, "replica-a", api)
	wf, err := a.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "settle", Goal: "settle", Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}, MaxToolCalls: 5})
	if err != nil {
		t.Fatal(err)
	}
	<-api.held // step 1 is stored; step 2's write is in flight

	// Replica b follows the workflow through the store while a owns it.
	b := newRunner(db, "replica-b", api)
	var events []string
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		for ev, err := range b.Follow(ctx, "acme", wf.ID, 0) {
			if err != nil {
				t.Error(err)
				return
			}
			var m map[string]any
			json.Unmarshal(ev.Data, &m)
			events = append(events, m["event"].(string)+":"+str(m["action"])+str(m["outcome"]))
		}
	}()

	// a stops without finishing the workflow and releases its lease; b claims it.
	api.mu.Lock()
	api.hold = false
	api.mu.Unlock()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go b.Run(runCtx)
	done, err := b.Wait(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %+v", done)
	}
	key := wf.ID + ".2"
	want := []string{"getTransaction " + wf.ID + ".1", "postEntry " + key, "postEntry " + key}
	if diff := cmp.Diff(want, api.seen()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	<-followed
	if diff := cmp.Diff([]string{"step:fetch", "step:post", "complete:settled"}, events); diff != "" {
		t.Errorf("followed events (-want +got):\n%s", diff)
	}
	steps, err := db.Steps(ctx, wf.ID, 0)
	if err != nil || len(steps) != 2 {
		t.Fatalf("stored steps %+v, %v", steps, err)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func TestFollowAfterAnEventIDAndPastTheEnd(t *testing.T) {
	db := setup(t)
	ctx := context.Background()
	r := newRunner(db, "replica-a", &ledger{})
	wf, err := r.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "settle", Goal: "settle", Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}, MaxToolCalls: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx, "acme", wf.ID); err != nil {
		t.Fatal(err)
	}
	ids := func(after int) []int {
		var out []int
		for ev, err := range r.Follow(ctx, "acme", wf.ID, after) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev.ID)
		}
		return out
	}
	for _, tc := range []struct {
		after int
		want  []int
	}{{0, []int{1, 2, 3}}, {1, []int{2, 3}}, {2, []int{3}}, {3, nil}} {
		if diff := cmp.Diff(tc.want, ids(tc.after)); diff != "" {
			t.Errorf("after %d (-want +got):\n%s", tc.after, diff)
		}
	}
	if _, err := r.Wait(ctx, "globex", wf.ID); err == nil {
		t.Error("another tenant could wait on the workflow")
	}
}

// TestFinishedGivesTheStoredSteps checks that a waiter gets the same
// workflow and steps whether the execution hands them over as it finishes
// or the waiter comes after it and reads them from the store.
func TestFinishedGivesTheStoredSteps(t *testing.T) {
	db := setup(t)
	ctx := context.Background()
	r := newRunner(db, "replica-a", &ledger{})
	start := func() string {
		wf, err := r.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "settle", Goal: "settle", Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}, MaxToolCalls: 5})
		if err != nil {
			t.Fatal(err)
		}
		return wf.ID
	}
	check := func(name string, wf *workflow.Workflow, steps []workflow.Step, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		stored, err := db.Workflow(ctx, "acme", wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wf.Status != workflow.Completed || wf.Outcome != stored.Outcome || wf.Status != stored.Status {
			t.Errorf("%s: workflow %s/%s, stored %s/%s", name, wf.Status, wf.Outcome, stored.Status, stored.Outcome)
		}
		want, err := db.Steps(ctx, wf.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, steps); len(want) != 2 || diff != "" {
			t.Errorf("%s: steps (-stored +given):\n%s", name, diff)
		}
	}

	// Waiting from the start: the end is handed over.
	wf, steps, err := r.Finished(ctx, "acme", start())
	check("handed over", wf, steps, err)

	// Coming after the end: it is read from the store.
	id := start()
	if _, err := r.Wait(ctx, "acme", id); err != nil {
		t.Fatal(err)
	}
	wf, steps, err = r.Finished(ctx, "acme", id)
	check("read back", wf, steps, err)
}
