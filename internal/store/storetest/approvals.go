package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// suspend stores w's steps before (when given), its waiting step seq and a
// pending approval at it, under owner, and returns the approval.
func suspend(t *testing.T, s Store, owner string, w *workflow.Workflow, seq int, before ...workflow.StepWrite) *workflow.Approval {
	t.Helper()
	step := newStep(w.ID, seq)
	step.Kind, step.Status, step.Tool, step.Operation, step.Reason = "approve", "waiting_approval", "", "", "Refund of 900"
	step.Args, step.Result, step.Request, step.Sent = nil, nil, nil, false
	a := &workflow.Approval{
		WorkflowID: w.ID, Tenant: w.Tenant, Agent: w.Agent, AgentVersion: w.AgentVersion, Step: seq,
		Action: step.Action, Reason: step.Reason, ApproverScope: "approve:refunds", OnTimeout: "deny",
		Invoker: w.Caller.Sub, RequestedAt: base.Add(time.Minute), Deadline: base.Add(2 * time.Hour),
		Status: workflow.ApprovalPending, Remaining: 4 * time.Minute,
	}
	last := append(before, written(step, record(w.Tenant, "workflow.step", seq)))
	must(t, s.SuspendWorkflow(ctxOf(t), owner, a, last...), "suspend "+w.ID)
	return a
}

func decision(w *workflow.Workflow, step int, status string) workflow.Decision {
	return workflow.Decision{Tenant: w.Tenant, WorkflowID: w.ID, Step: step, Status: status, By: "approver-1",
		Comment: "looks right", At: base.Add(3 * time.Hour)}
}

func testApprovalLifecycle(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "refunds", "replica-a", 0))
	wantLeaseLost(t, s.SuspendWorkflow(ctx, "replica-b", &workflow.Approval{WorkflowID: w.ID, Step: 2}), "another owner's suspend")
	// Step 1 is stored with the pause, as an execution's unwritten steps are.
	a := suspend(t, s, "replica-a", w, 2, written(newStep(w.ID, 1), record("acme", "workflow.step", 1)))

	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if got.Status != workflow.Waiting || got.Owner != "" || got.Done() || !got.Settled() {
		t.Errorf("suspended workflow: status %q owner %q; want waiting without an owner", got.Status, got.Owner)
	}
	steps, err := s.Steps(ctx, w.ID, 0)
	must(t, err, "steps")
	if len(steps) != 2 || steps[1].Reason != "Refund of 900" || steps[1].Status != "waiting_approval" {
		t.Fatalf("steps = %+v; want the waiting step with its reason", steps)
	}
	// Nobody holds a waiting workflow: its owner's writes fail, no claim takes it.
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-a", written(newStep(w.ID, 3))), "step of a waiting workflow")
	claimed, err := s.ClaimExpired(ctx, "replica-b", base.Add(100*time.Hour), base.Add(101*time.Hour), 10)
	must(t, err, "claim")
	if len(claimed) != 0 {
		t.Errorf("ClaimExpired took %d waiting workflows", len(claimed))
	}

	for _, tc := range []struct {
		tenant string
		f      workflow.ApprovalFilter
		want   int
	}{
		{"acme", workflow.ApprovalFilter{}, 1},
		{"acme", workflow.ApprovalFilter{Status: "pending"}, 1},
		{"acme", workflow.ApprovalFilter{Status: "decided"}, 0},
		{"acme", workflow.ApprovalFilter{Agent: "refunds"}, 1},
		{"acme", workflow.ApprovalFilter{Agent: "other"}, 0},
		{"globex", workflow.ApprovalFilter{}, 0},
	} {
		list, err := s.Approvals(ctx, tc.tenant, tc.f)
		must(t, err, "list approvals")
		if len(list) != tc.want {
			t.Errorf("Approvals(%s, %+v) = %d, want %d", tc.tenant, tc.f, len(list), tc.want)
		}
	}
	list, err := s.Approvals(ctx, "acme", workflow.ApprovalFilter{})
	must(t, err, "list approvals")
	if diff := cmp.Diff(a, list[0]); diff != "" {
		t.Errorf("listed approval (-stored +got):\n%s", diff)
	}
	due, err := s.DueApprovals(ctx, a.Deadline.Add(-time.Second), 10)
	must(t, err, "due approvals")
	if len(due) != 0 {
		t.Errorf("DueApprovals before the deadline = %d", len(due))
	}
	due, err = s.DueApprovals(ctx, a.Deadline, 10)
	must(t, err, "due approvals")
	if len(due) != 1 || due[0].WorkflowID != w.ID {
		t.Errorf("DueApprovals at the deadline = %d, want the approval", len(due))
	}

	d := decision(w, 2, workflow.ApprovalApproved)
	d.Tenant = "globex"
	_, _, err = s.DecideApproval(ctx, d, "replica-c", base.Add(4*time.Hour), record("globex", "workflow.approval", 1))
	wantCode(t, err, problem.NotFound, "decide another tenant's approval")
	_, _, err = s.DecideApproval(ctx, decision(w, 1, workflow.ApprovalApproved), "replica-c", base.Add(4*time.Hour), record("acme", "workflow.approval", 3))
	wantCode(t, err, problem.Conflict, "decide a step that is not waiting")

	lease := base.Add(4 * time.Hour)
	wf, dec, err := s.DecideApproval(ctx, decision(w, 2, workflow.ApprovalDenied), "replica-c", lease, record("acme", "workflow.approval", 3))
	must(t, err, "decide")
	wantDeadline := base.Add(3*time.Hour + 4*time.Minute)
	if wf.Status != workflow.Running || wf.Owner != "replica-c" || !wf.LeaseUntil.Equal(lease) || !wf.Deadline.Equal(wantDeadline) {
		t.Errorf("decided workflow: status %q owner %q lease %v deadline %v; want running, replica-c, %v, %v",
			wf.Status, wf.Owner, wf.LeaseUntil, wf.Deadline, lease, wantDeadline)
	}
	if dec.Status != workflow.ApprovalDenied || dec.DecidedBy != "approver-1" || dec.Comment != "looks right" || !dec.DecidedAt.Equal(base.Add(3*time.Hour)) {
		t.Errorf("decision = %+v", dec)
	}
	_, _, err = s.DecideApproval(ctx, decision(w, 2, workflow.ApprovalApproved), "replica-d", lease, record("acme", "workflow.approval", 4))
	wantCode(t, err, problem.Conflict, "a second decision")
	stored, err := s.WorkflowApprovals(ctx, w.ID)
	must(t, err, "workflow approvals")
	if diff := cmp.Diff([]*workflow.Approval{dec}, stored); diff != "" {
		t.Errorf("stored approvals (-decided +got):\n%s", diff)
	}
	got, err = s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if got.Status != workflow.Running || got.Owner != "replica-c" {
		t.Errorf("stored workflow after the decision: %q owned by %q", got.Status, got.Owner)
	}
	// The new owner goes on.
	must(t, s.AppendSteps(ctx, "replica-c", written(newStep(w.ID, 3), record("acme", "workflow.step", 5))), "step after the decision")
	finish(t, s, "replica-c", w)
	verifyOK(t, s, "acme", 4)
}

func testApprovalDecideConcurrent(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "refunds", "replica-a", 0))
	suspend(t, s, "replica-a", w, 1)
	const n = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		won      []string
		conflict int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := "replica-" + string(rune('a'+i))
			_, _, err := s.DecideApproval(ctx, decision(w, 1, workflow.ApprovalApproved), owner, base.Add(time.Hour), record("acme", "workflow.approval", 2+i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, owner)
			case problem.Is(err, problem.Conflict):
				conflict++
			default:
				t.Errorf("decide: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 || conflict != n-1 {
		t.Fatalf("%d decisions went through (%v), %d conflicts; want exactly one", len(won), won, conflict)
	}
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if got.Owner != won[0] {
		t.Errorf("owner = %q, want the one decision's %q", got.Owner, won[0])
	}
	verifyOK(t, s, "acme", 2)
}

func testApprovalCancelWaiting(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "refunds", "replica-a", 0))
	suspend(t, s, "replica-a", w, 1)
	lease := base.Add(time.Hour)
	got, taken, err := s.RequestCancel(ctx, "acme", w.ID, "replica-c", lease)
	must(t, err, "cancel a waiting workflow")
	if !taken || got.Status != workflow.Running || !got.CancelRequested || got.Owner != "replica-c" || !got.LeaseUntil.Equal(lease) {
		t.Errorf("RequestCancel of a waiting workflow: taken %v, %+v; want it handed to replica-c, marked", taken, got)
	}
	stored, err := s.WorkflowApprovals(ctx, w.ID)
	must(t, err, "approvals")
	if len(stored) != 1 || stored[0].Status != workflow.ApprovalCancelled {
		t.Errorf("approvals after cancel = %+v; want one cancelled", stored)
	}
	_, _, err = s.DecideApproval(ctx, decision(w, 1, workflow.ApprovalApproved), "replica-d", lease, record("acme", "workflow.approval", 2))
	wantCode(t, err, problem.Conflict, "decide a cancelled approval")
	w.Status, w.Outcome = workflow.Cancelled, "cancelled"
	must(t, s.FinishWorkflow(ctx, "replica-c", w, nil), "finish the cancelled workflow")
}

func testApprovalList(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var want []string
	for i := range 5 {
		w := create(t, s, newWorkflow("acme", "refunds", "replica-a", i))
		suspend(t, s, "replica-a", w, 1)
		want = append([]string{w.ID}, want...)
	}
	var got []string
	after := ""
	for range 4 {
		list, err := s.Approvals(ctx, "acme", workflow.ApprovalFilter{Status: "pending", Limit: 2, After: after})
		must(t, err, "list approvals")
		for _, a := range list {
			got = append(got, a.WorkflowID)
		}
		if len(list) < 2 {
			break
		}
		after = workflow.ApprovalCursor(list[len(list)-1])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged approvals, newest first (-want +got):\n%s", diff)
	}
}
