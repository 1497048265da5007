package workflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentplane/agentplane/internal/agent"
)

// A completion or a call of an external agent that would pass the run's
// max_llm_tokens or max_tool_calls, under limits.on_exhausted ask, is held
// at a budget_exhausted approval as a call matching an approvals rule is
// (see externalapproval.go): decided in time, the exchange goes on with
// the grant, or is refused limit_exceeded; past the hold the attempt is set
// aside, and the new attempt after the decision starts by recording it.

// budgetState is what the run's budget approvals decided: the grants by
// limit, the limits whose more was denied, and the step of an approval
// asked for whose decision is not recorded yet.
type budgetState struct {
	granted map[string]int64
	denied  map[string]bool
	open    int
}

func newBudgetState() budgetState {
	return budgetState{granted: map[string]int64{}, denied: map[string]bool{}}
}

// replay reads a recorded step of a budget's approval.
func (b *budgetState) replay(s *Step) {
	switch s.Status {
	case agent.StatusWaitingApproval:
		b.open = s.Step
	case agent.StatusApproved, agent.StatusDenied:
		var d decisionRecord
		if json.Unmarshal(s.Result, &d) != nil {
			return
		}
		b.decided(d.Limit, s.Status == agent.StatusApproved, d.Budget)
	}
}

// decided applies a decision on a budget's approval.
func (b *budgetState) decided(limit string, approved bool, grant int64) {
	b.open = 0
	if approved {
		b.granted[limit] += grant
	} else {
		b.denied[limit] = true
	}
}

// applyDecidedBudget records, as attempt's first step, the decision on the
// budget's approval an attempt set aside waited for.
func (x *externalRun) applyDecidedBudget(attempt int) error {
	a := x.decided[x.budgets.open]
	if x.budgets.open == 0 || a == nil || a.Budget == nil {
		return nil
	}
	ev := agent.Event{Action: agent.ActionBudgetExhausted, Kind: agent.KindApprove, Reason: a.Reason}
	d, err := x.emitDecision(ev, a, attempt)
	if err != nil {
		return err
	}
	x.budgets.decided(a.Budget.Limit, d.Status == agent.StatusApproved, agent.GrantOf(d.Result))
	return nil
}

// spent is a budget of the run: what it used, what it may use, what
// approving more grants; allowed is 0 when the run has no such bound.
func (x *externalRun) spent(limit string) agent.Budget {
	if limit == agent.LimitToolCalls {
		return agent.Budget{Limit: limit, Used: int64(x.calls), Allowed: int64(x.maxCalls()), Grant: int64(x.baseCalls())}
	}
	return agent.Budget{Limit: limit, Used: x.tokens, Allowed: x.maxTokens(), Grant: x.baseTokens()}
}

// askMore holds an exchange while the run's budget limit is spent and its
// limits say to ask, until an approval grants enough or denies more (the
// caller's limit check then refuses the exchange). When the hold passes
// first, x.setAside is set and waiting says why the exchange is refused.
func (x *externalRun) askMore(ctx context.Context, a *attemptGateway, limit string) (waiting string, err error) {
	for {
		b := x.spent(limit)
		if b.Allowed <= 0 || b.Used < b.Allowed {
			return "", nil
		}
		req := x.g.BudgetApproval(x.wf.OnExhausted, b)
		if req == nil || x.budgets.denied[limit] {
			return "", nil
		}
		req.Reason = x.rec.maskText(req.Reason)
		ev := agent.Event{Action: agent.ActionBudgetExhausted, Kind: agent.KindApprove, Reason: req.Reason}
		decided, err := x.wait(ctx, a, ev, req, "")
		if err != nil {
			return "", err
		}
		if decided == nil {
			x.setAside = true
			x.budgets.open = x.step
			return fmt.Sprintf("the run's %s is spent (%s) and waits for a person's approval of more (step %d). This attempt is set aside; after the decision agentplane starts a new one",
				limit, b.Spent(), x.step), nil
		}
		d, err := x.emitDecision(ev, decided, a.attempt)
		if err != nil {
			return "", err
		}
		x.budgets.decided(limit, d.Status == agent.StatusApproved, agent.GrantOf(d.Result))
	}
}
