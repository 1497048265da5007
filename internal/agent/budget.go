package agent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Budgets that ask (SPEC §4 "Change safety"): with limits.on_exhausted
// ask, a run that would pass its max_llm_tokens or max_tool_calls waits at
// an approval instead of ending. Approving grants the same budget again,
// or what the decision says; denying ends the run limit_exceeded.

// What a run does when a budget is spent.
const (
	OnExhaustedFail = "fail"
	OnExhaustedAsk  = "ask"
)

// ActionBudgetExhausted is the action of the approval a spent budget asks
// for, and of its steps.
const ActionBudgetExhausted = "budget_exhausted"

// DefaultBudgetApproverScope is the scope a budget's approver needs unless
// the limits' ask names another.
const DefaultBudgetApproverScope = "approve:budget"

// The budgets that may ask, by the limit that sets them.
const (
	LimitLLMTokens = "max_llm_tokens"
	LimitToolCalls = "max_tool_calls"
)

// MaxBudgetGrant bounds what one decision may grant (10^8, the largest
// max_llm_tokens).
const MaxBudgetGrant = MaxLLMTokensLimit

// BudgetAsk configures the approval a spent budget asks for; the fields
// mean what they mean on an approve step. ApproverScope defaults to
// DefaultBudgetApproverScope.
type BudgetAsk struct {
	ApproverScope string `json:"approver_scope,omitempty"`
	Timeout       string `json:"timeout,omitempty"`
	OnTimeout     string `json:"on_timeout,omitempty"`
	AllowSelf     bool   `json:"allow_self,omitempty"`
}

// Budget is a spent budget as its approval shows it.
type Budget struct {
	// Limit names it: LimitLLMTokens or LimitToolCalls.
	Limit string `json:"limit"`
	// Used is what the run has spent; Allowed what it could spend so far
	// (the limit and the grants approved before).
	Used    int64 `json:"used"`
	Allowed int64 `json:"allowed"`
	// Grant is what approving adds: the limit again unless the decision
	// says how much; once decided, what was granted.
	Grant int64 `json:"grant"`
}

// Spent says what was spent, e.g. "used 4,210 of 4,000 LLM tokens".
func (b Budget) Spent() string {
	unit := "LLM tokens"
	if b.Limit == LimitToolCalls {
		unit = "tool calls"
	}
	return fmt.Sprintf("used %s of %s %s", thousands(b.Used), thousands(b.Allowed), unit)
}

// Reason is the approval's reason: what was spent, and what approving
// grants.
func (b Budget) Reason() string {
	return fmt.Sprintf("%s (%s); approving grants %s more", b.Spent(), b.Limit, thousands(b.Grant))
}

// Denied says why a run denied more of b ended.
func (b Budget) Denied() string {
	return fmt.Sprintf("%s reached (%s) and more was denied", b.Limit, b.Spent())
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// GrantOf reads the budget a decision granted from its record (the
// result of the decision's step): 0 when it names none.
func GrantOf(result json.RawMessage) int64 {
	var d struct {
		Budget int64 `json:"budget"`
	}
	if len(result) == 0 || json.Unmarshal(result, &d) != nil || d.Budget < 0 {
		return 0
	}
	return d.Budget
}

// compileBudgetAsk checks limits.on_exhausted and limits.ask and compiles
// the approval a spent budget asks for.
func (c *compiler) compileBudgetAsk() *capprove {
	l := c.def.Limits
	if l == nil {
		l = &Limits{}
	}
	switch l.OnExhausted {
	case "", OnExhaustedFail, OnExhaustedAsk:
	default:
		c.bad("limits.on_exhausted", fmt.Sprintf("must be %q (end the run limit_exceeded) or %q (wait for a person's approval of more), not %q",
			OnExhaustedFail, OnExhaustedAsk, l.OnExhausted))
	}
	ask := l.Ask
	if ask == nil {
		ask = &BudgetAsk{}
	} else if l.OnExhausted != OnExhaustedAsk {
		c.bad("limits.ask", `applies with on_exhausted "ask" only: set it, or leave ask out`)
	}
	scope := ask.ApproverScope
	if scope == "" {
		scope = DefaultBudgetApproverScope
	}
	return c.compileApprove("limits.ask", &Approve{ApproverScope: scope, Timeout: ask.Timeout, OnTimeout: ask.OnTimeout, AllowSelf: ask.AllowSelf})
}

// OnExhausted is what a run of the program does when a budget is spent:
// the invocation's on_exhausted when it sets one, else the limits'.
func (p *Program) OnExhausted(invocation string) string {
	switch {
	case invocation != "":
		return invocation
	case p.def.Limits != nil && p.def.Limits.OnExhausted != "":
		return p.def.Limits.OnExhausted
	}
	return OnExhaustedFail
}

// BudgetApproval is the approval a spent budget b asks for in a run whose
// invocation says onExhausted, or nil when the run ends instead.
func (p *Program) BudgetApproval(onExhausted string, b Budget) *ApprovalRequest {
	if p.OnExhausted(onExhausted) != OnExhaustedAsk || p.budgetAsk == nil {
		return nil
	}
	a := p.budgetAsk
	return &ApprovalRequest{Action: ActionBudgetExhausted, Reason: b.Reason(), ApproverScope: a.scope,
		Timeout: a.timeout, OnTimeout: a.onTimeout, AllowSelf: a.allowSelf, Budget: &b}
}

// askBudget has a run whose budget b is spent wait for an approval of
// more, when its limits say so: the grant approved, or the ending (the
// run waits, or was denied more, or ends as it always has when it may not
// ask: end is nil and grant 0 then, and the caller ends it).
func (r *runner) askBudget(b Budget) (grant int64, end *ending, err error) {
	req := r.p.BudgetApproval(r.in.OnExhausted, b)
	if req == nil {
		return 0, nil, nil
	}
	ev := Event{Action: ActionBudgetExhausted, Kind: KindApprove, Status: StatusWaitingApproval, Reason: req.Reason}
	if err := r.emit(ev); err != nil {
		return 0, nil, err
	}
	d, err := r.env.Approve(r.ctx, r.step, *req)
	if err != nil {
		if r.ctx.Err() != nil {
			return 0, nil, r.ctx.Err()
		}
		return 0, nil, fmt.Errorf("budget approval at step %d: %w", r.step, err)
	}
	ev.Status, ev.Result = d.Status, d.Result
	switch d.Status {
	case StatusWaitingApproval:
		return 0, &ending{waiting: true}, nil
	case StatusApproved, StatusUnrecorded:
		grant = GrantOf(d.Result)
		if grant <= 0 {
			grant = b.Grant
		}
		return grant, nil, r.emit(ev)
	case StatusDenied:
		ev.Error = "more budget was denied"
		if err := r.emit(ev); err != nil {
			return 0, nil, err
		}
		return 0, &ending{outcome: OutcomeLimitExceeded, err: b.Denied()}, nil
	}
	return 0, nil, fmt.Errorf("budget approval at step %d: unknown decision status %q", r.step, d.Status)
}
