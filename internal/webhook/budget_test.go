package webhook_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestBudgetApprovalEvents: workflow.waiting and approval.decided of a
// spent budget's approval say its kind and the budget; another
// approval's say kind approval and carry none.
func TestBudgetApprovalEvents(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	spent := &workflow.Approval{WorkflowID: "wf_1", Tenant: "acme", Agent: "spender", Step: 3, Action: agent.ActionBudgetExhausted,
		RequestedAt: at, Status: workflow.ApprovalPending,
		Budget: &agent.Budget{Limit: agent.LimitLLMTokens, Used: 4210, Allowed: 4000, Grant: 4000}}
	plain := &workflow.Approval{WorkflowID: "wf_2", Tenant: "acme", Agent: "refunds", Step: 2, Action: "refund_approval",
		RequestedAt: at, Status: workflow.ApprovalPending}
	type data struct {
		Kind   string        `json:"kind"`
		Budget *agent.Budget `json:"budget"`
	}
	read := func(ev *webhook.Event) data {
		var p struct {
			Type string `json:"type"`
			Data data   `json:"data"`
		}
		if err := json.Unmarshal(ev.Body, &p); err != nil {
			t.Fatal(err)
		}
		return p.Data
	}
	if diff := cmp.Diff(data{Kind: workflow.KindBudgetExhausted, Budget: spent.Budget}, read(webhook.Waiting(spent))); diff != "" {
		t.Errorf("workflow.waiting of a budget (-want +got):\n%s", diff)
	}
	spent.Apply(workflow.Decision{Status: workflow.ApprovalApproved, By: "bob", At: at.Add(time.Minute), Budget: 5000})
	granted := *spent.Budget
	granted.Grant = 5000
	if diff := cmp.Diff(data{Kind: workflow.KindBudgetExhausted, Budget: &granted}, read(webhook.Decided(spent))); diff != "" {
		t.Errorf("approval.decided of a budget (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(data{Kind: workflow.KindApproval}, read(webhook.Waiting(plain))); diff != "" {
		t.Errorf("workflow.waiting of an approve step (-want +got):\n%s", diff)
	}
}
