package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// testBudgetApproval: a workflow keeps its invocation's on_exhausted, a
// spent budget's approval keeps its budget, and its decision the grant
// (docs/change-safety.md, "Budgets that ask"); an approve step's approval
// has no budget.
func testBudgetApproval(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := newWorkflow("acme", "spender", "replica-a", 0)
	w.OnExhausted = agent.OnExhaustedAsk
	create(t, s, w)
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if got.OnExhausted != agent.OnExhaustedAsk {
		t.Errorf("on_exhausted = %q, want ask", got.OnExhausted)
	}

	step := newStep(w.ID, 1)
	step.Action, step.Kind, step.Status, step.Tool, step.Operation = agent.ActionBudgetExhausted, "approve", "waiting_approval", "", ""
	step.Args, step.Result, step.Request, step.Sent = nil, nil, nil, false
	spent := agent.Budget{Limit: agent.LimitLLMTokens, Used: 4210, Allowed: 4000, Grant: 4000}
	step.Reason = spent.Reason()
	a := &workflow.Approval{
		WorkflowID: w.ID, Tenant: w.Tenant, Agent: w.Agent, AgentVersion: w.AgentVersion, Step: 1,
		Action: step.Action, Reason: step.Reason, ApproverScope: agent.DefaultBudgetApproverScope, OnTimeout: "deny",
		Invoker: w.Caller.Sub, RequestedAt: base.Add(time.Minute), Deadline: base.Add(2 * time.Hour),
		Status: workflow.ApprovalPending, Remaining: 4 * time.Minute, Budget: &spent,
	}
	must(t, s.SuspendWorkflow(ctx, "replica-a", a, written(step, record("acme", "workflow.step", 1))), "suspend")
	as, err := s.WorkflowApprovals(ctx, w.ID)
	must(t, err, "approvals")
	if len(as) != 1 || as[0].Kind() != workflow.KindBudgetExhausted {
		t.Fatalf("approvals = %+v; want one budget_exhausted", as)
	}
	if diff := cmp.Diff(&spent, as[0].Budget); diff != "" {
		t.Errorf("pending budget (-want +got):\n%s", diff)
	}

	d := decision(w, 1, workflow.ApprovalApproved)
	d.Budget = 10000
	_, decided, err := s.DecideApproval(ctx, d, "replica-b", base.Add(4*time.Hour), record("acme", "workflow.approval", 2))
	must(t, err, "decide")
	want := spent
	want.Grant = 10000
	if diff := cmp.Diff(&want, decided.Budget); diff != "" {
		t.Errorf("decided budget (-want +got):\n%s", diff)
	}
	as, err = s.WorkflowApprovals(ctx, w.ID)
	must(t, err, "approvals after the decision")
	if diff := cmp.Diff(&want, as[0].Budget); diff != "" {
		t.Errorf("stored grant (-want +got):\n%s", diff)
	}

	// An approve step's approval has no budget, before and after.
	other := create(t, s, newWorkflow("acme", "refunds", "replica-a", 1))
	suspend(t, s, "replica-a", other, 1)
	_, plain, err := s.DecideApproval(ctx, decision(other, 1, workflow.ApprovalApproved), "replica-b", base.Add(4*time.Hour), record("acme", "workflow.approval", 3))
	must(t, err, "decide a step's approval")
	if plain.Budget != nil || plain.Kind() != workflow.KindApproval {
		t.Errorf("an approve step's approval: kind %s budget %+v", plain.Kind(), plain.Budget)
	}
	list, err := s.Approvals(ctx, "acme", workflow.ApprovalFilter{})
	must(t, err, "list")
	for _, l := range list {
		if (l.WorkflowID == w.ID) != (l.Budget != nil) {
			t.Errorf("listed approval of %s: budget %+v", l.WorkflowID, l.Budget)
		}
	}
}
