package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/store/storetest"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// seedRefund stores the ledger tool and a "refund" agent that reads a
// transaction, asks for approval, then posts the entry.
func seedRefund(t *testing.T, db storetest.Store, approve string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	lt := &tool.Tool{ID: "tool_01JDLEDGER0000000000000000", Tenant: "acme", Name: "ledger", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, IdempotencySupport: true,
		Revision: 1, OperationCount: 2, IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: "http://ledger.test"}
	ops := []tool.Operation{
		{ID: "getTransaction", Kind: tool.Read, HTTP: &tool.HTTPBinding{Method: "GET", Path: "/t", Params: []tool.Param{{Name: "note", In: "query"}}}},
		{ID: "postEntry", Kind: tool.Write, HTTP: &tool.HTTPBinding{Method: "POST", Path: "/e", Body: &tool.Body{ContentType: "application/json"}}},
	}
	if err := db.CreateTool(ctx, lt, ops, nil); err != nil {
		t.Fatal(err)
	}
	def := json.RawMessage(`{"tools": ["ledger"], "steps": [
		{"action": "fetch", "call": "ledger.getTransaction", "save_as": "txn"},
		{"action": "refund_approval", "approve": ` + approve + `},
		{"action": "post", "call": "ledger.postEntry", "args": {"amount": "txn.amount"}}],
		"outcome": "'settled'"}`)
	if err := db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "refund", Definition: def, Tools: []string{"ledger"}, DeployedAt: now}, false, nil); err != nil {
		t.Fatal(err)
	}
}

const refundApproval = `{"reason": "'Refund of ' + string(txn.amount)", "approver_scope": "approve:refunds"}`

func refundRunner(db storetest.Store, owner string, caller workflow.ToolCaller, lease time.Duration) *workflow.Runner {
	return workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: caller, Owner: owner, Lease: lease})
}

func invokeRefund(t *testing.T, r *workflow.Runner) *workflow.Workflow {
	t.Helper()
	ctx := context.Background()
	wf, err := r.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "refund", Goal: "refund txn 7",
		Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, steps, err := r.Finished(wctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.Waiting || len(steps) != 2 || steps[1].Status != agent.StatusWaitingApproval || steps[1].Reason != "Refund of 42" {
		t.Fatalf("invoke answered %s with steps %+v; want waiting at step 2 with its reason", got.Status, steps)
	}
	return got
}

func approver(sub string, scopes ...string) workflow.Caller {
	return workflow.Caller{Sub: sub, Tenant: "acme", Scopes: append([]string{"workflows:approve"}, scopes...)}
}

func TestAnApprovalResumesTheWorkflowOnAnotherRunner(t *testing.T) {
	t.Parallel()
	db := sqlite.NewTestDB(t)
	seedRefund(t, db, refundApproval)
	ctx := context.Background()
	api := &ledger{}
	a := refundRunner(db, "replica-a", api, time.Minute)
	wf := invokeRefund(t, a)
	// Replica a stops: the waiting workflow needs nothing of it.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := refundRunner(db, "replica-b", api, time.Minute)
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
			events = append(events, str(m["action"])+":"+str(m["status"])+str(m["outcome"]))
		}
	}()
	a2, err := b.Decide(ctx, workflow.DecideRequest{Tenant: "acme", WorkflowID: wf.ID, Step: 2, Decision: "approve",
		Comment: "customer verified", Approver: approver("bob", "approve:refunds"), RequestID: "req_bob"})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Status != workflow.ApprovalApproved || a2.DecidedBy != "bob" {
		t.Errorf("decision = %+v", a2)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done, steps, err := b.Finished(wctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %s/%s (%s)", done.Status, done.Outcome, done.Error)
	}
	want := []string{"getTransaction " + wf.ID + ".1", "postEntry " + wf.ID + ".4"}
	if diff := cmp.Diff(want, api.seen()); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	var rec struct {
		Decision  string `json:"decision"`
		DecidedBy string `json:"decided_by"`
		Comment   string `json:"comment"`
	}
	if err := json.Unmarshal(steps[2].Result, &rec); err != nil || rec.DecidedBy != "bob" || rec.Decision != "approve" || rec.Comment != "customer verified" {
		t.Errorf("decision step %+v (%v); want bob's approval recorded", steps[2], err)
	}
	<-followed
	wantEvents := []string{"fetch:ok", "refund_approval:waiting_approval", "refund_approval:approved", "post:ok", ":completedsettled"}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("followed events (-want +got):\n%s", diff)
	}
	recs, err := db.QueryAudit(ctx, "acme", audit.Filter{Action: "workflow.approval"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Actor.Sub != "bob" || recs[0].WorkflowID != wf.ID || recs[0].RequestID != "req_bob" {
		t.Fatalf("approval audit records %+v; want one naming bob", recs)
	}
	if rep, err := audit.Verify(ctx, db, "acme"); err != nil || !rep.OK {
		t.Errorf("audit chain: %+v, %v", rep, err)
	}
}

func TestApprovalRules(t *testing.T) {
	t.Parallel()
	db := sqlite.NewTestDB(t)
	seedRefund(t, db, refundApproval)
	ctx := context.Background()
	api := &ledger{}
	r := refundRunner(db, "replica-a", api, time.Minute)
	wf := invokeRefund(t, r)
	decide := func(who workflow.Caller, step int, decision string) error {
		_, err := r.Decide(ctx, workflow.DecideRequest{Tenant: "acme", WorkflowID: wf.ID, Step: step, Decision: decision, Approver: who})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		code problem.Code
	}{
		{"the invoker", decide(approver("alice", "approve:refunds"), 2, "approve"), problem.InsufficientScope},
		{"without the step's approver_scope", decide(approver("bob"), 2, "approve"), problem.InsufficientScope},
		{"a step that does not wait", decide(approver("bob", "approve:refunds"), 1, "approve"), problem.Conflict},
		{"an unknown decision", decide(approver("bob", "approve:refunds"), 2, "maybe"), problem.ValidationFailed},
	} {
		if !problem.Is(tc.err, tc.code) {
			t.Errorf("%s: err = %v, want %s", tc.name, tc.err, tc.code)
		}
	}
	if err := decide(approver("bob"), 2, "approve"); problem.As(err).Scope != "approve:refunds" {
		t.Errorf("a missing approver_scope is not named: %v", err)
	}
	if err := decide(approver("carol", "approve:refunds"), 2, "deny"); err != nil {
		t.Fatal(err)
	}
	if err := decide(approver("bob", "approve:refunds"), 2, "approve"); !problem.Is(err, problem.Conflict) {
		t.Errorf("a second decision: %v, want a conflict", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done, err := r.Wait(wctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Outcome != agent.OutcomeDenied || done.Status != workflow.Completed {
		t.Errorf("denied workflow ended %s/%s", done.Status, done.Outcome)
	}
	if diff := cmp.Diff([]string{"getTransaction " + wf.ID + ".1"}, api.seen()); diff != "" {
		t.Errorf("a denied refund reached the tool (-want +got):\n%s", diff)
	}
}

func TestCancellingAWaitingWorkflowEndsIt(t *testing.T) {
	t.Parallel()
	db := sqlite.NewTestDB(t)
	seedRefund(t, db, refundApproval)
	ctx := context.Background()
	r := refundRunner(db, "replica-a", &ledger{}, time.Minute)
	wf := invokeRefund(t, r)
	done, err := r.Cancel(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.Cancelled {
		t.Fatalf("cancelled a waiting workflow: %s", done.Status)
	}
	list, err := db.Approvals(ctx, "acme", workflow.ApprovalFilter{Status: workflow.ApprovalPending})
	if err != nil || len(list) != 0 {
		t.Errorf("%d approvals still pending (%v)", len(list), err)
	}
}

// TestATimeoutIsDecidedOnceWithTwoReplicas runs two runners on one
// PostgreSQL database while approvals time out: each workflow ends denied
// exactly once, with one service decision in the audit log.
func TestATimeoutIsDecidedOnceWithTwoReplicas(t *testing.T) {
	t.Parallel()
	url := postgres.NewTestDatabase(t)
	db, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Each replica has a handle of its own, as each process does: the
	// change feed tells a handle only what the others wrote.
	dbB, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbB.Close() })
	seedRefund(t, db, `{"timeout": "1s", "on_timeout": "deny"}`)
	ctx := context.Background()
	api := &ledger{}
	a := refundRunner(db, "replica-a", api, 300*time.Millisecond)
	b := refundRunner(dbB, "replica-b", api, 300*time.Millisecond)
	const n = 20
	var wfs []*workflow.Workflow
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a
			if i%2 == 1 {
				r = b
			}
			wf, err := r.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "refund", Goal: fmt.Sprint("refund ", i),
				Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			wfs = append(wfs, wf)
			mu.Unlock()
		}()
	}
	wg.Wait()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go a.Run(runCtx)
	go b.Run(runCtx)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, wf := range wfs {
		done, err := a.Wait(wctx, "acme", wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.Outcome != agent.OutcomeDenied {
			t.Errorf("workflow %s ended %s/%s; want denied at its timeout", wf.ID, done.Status, done.Outcome)
		}
		steps, err := db.Steps(ctx, wf.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range steps {
			got = append(got, s.Action+":"+s.Status)
		}
		if diff := cmp.Diff([]string{"fetch:ok", "refund_approval:waiting_approval", "refund_approval:denied"}, got); diff != "" {
			t.Errorf("workflow %s steps (-want +got):\n%s", wf.ID, diff)
		}
		if !json.Valid(steps[2].Result) || !contains(string(steps[2].Result), `"timed_out":true`) || !contains(string(steps[2].Result), `"decided_by":"agentplane"`) {
			t.Errorf("timeout decision recorded as %s", steps[2].Result)
		}
	}
	recs, err := db.QueryAudit(ctx, "acme", audit.Filter{Action: "workflow.approval", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Errorf("%d approval decisions audited for %d timeouts; want one each", len(recs), n)
	}
	for _, op := range api.seen() {
		if contains(op, "postEntry") {
			t.Errorf("a timed-out refund reached the tool: %s", op)
		}
	}
	if rep, err := audit.Verify(ctx, db, "acme"); err != nil || !rep.OK {
		t.Errorf("audit chain: %+v, %v", rep, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
