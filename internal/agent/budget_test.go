package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// budgetEnv answers every call and decides every budget approval as
// decide says, recording what it was asked.
type budgetEnv struct {
	*fakeEnv
	decide func(n int) Decision
	asked  []ApprovalRequest
}

func (e *budgetEnv) Approve(_ context.Context, _ int, req ApprovalRequest) (Decision, error) {
	e.asked = append(e.asked, req)
	return e.decide(len(e.asked)), nil
}

// twoCalls makes two calls; its limits are given.
func twoCalls(limits string) string {
	return `{"tools": ["payments", "cases"], "limits": ` + limits + `, "steps": [
	  {"action": "fetch", "call": "payments.getTransaction", "args": {"id": "'tx_1'"}},
	  {"action": "open", "call": "cases.createCase", "args": {"queue": "'review'"}}], "outcome": "'done'"}`
}

func TestBudgetAsks(t *testing.T) {
	decided := func(status string, grant int64) func(int) Decision {
		return func(int) Decision {
			b, _ := json.Marshal(map[string]any{"decision": "approve", "budget": grant})
			return Decision{Status: status, Result: b}
		}
	}
	for _, tc := range []struct {
		name, limits, onExhausted string
		decide                    func(int) Decision
		wantOutcome, wantSteps    string
		wantAsked                 int
	}{
		{"fail by default", `{}`, "", decided(StatusApproved, 0), "limit_exceeded", "fetch:ok tool_call_limit_reached:limit_exceeded", 0},
		{"approved", `{"on_exhausted": "ask"}`, "", decided(StatusApproved, 0), "done",
			"fetch:ok budget_exhausted:waiting_approval budget_exhausted:approved open:ok", 1},
		{"the invocation asks", `{}`, OnExhaustedAsk, decided(StatusApproved, 3), "done",
			"fetch:ok budget_exhausted:waiting_approval budget_exhausted:approved open:ok", 1},
		{"the invocation fails", `{"on_exhausted": "ask"}`, OnExhaustedFail, decided(StatusApproved, 3), "limit_exceeded",
			"fetch:ok tool_call_limit_reached:limit_exceeded", 0},
		{"denied", `{"on_exhausted": "ask"}`, "", decided(StatusDenied, 0), "limit_exceeded",
			"fetch:ok budget_exhausted:waiting_approval budget_exhausted:denied", 1},
		{"waiting", `{"on_exhausted": "ask", "ask": {"approver_scope": "approve:spend", "timeout": "1h", "on_timeout": "approve"}}`, "",
			decided(StatusWaitingApproval, 0), "", "fetch:ok budget_exhausted:waiting_approval", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, parseDef(t, twoCalls(tc.limits)))
			env := &budgetEnv{fakeEnv: fraudEnv("10.0"), decide: tc.decide}
			in := fraudInput("tool:*")
			in.MaxToolCalls, in.OnExhausted = 1, tc.onExhausted
			events, res, err := p.Execute(context.Background(), in, env)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range events {
				got = append(got, ev.Action+":"+ev.Status)
			}
			if strings.Join(got, " ") != tc.wantSteps || res.Outcome != tc.wantOutcome || len(env.asked) != tc.wantAsked {
				t.Fatalf("steps %v, outcome %q, asked %d; want %s, %q, %d", got, res.Outcome, len(env.asked), tc.wantSteps, tc.wantOutcome, tc.wantAsked)
			}
			if tc.wantAsked == 0 {
				return
			}
			req := env.asked[0]
			if req.Action != ActionBudgetExhausted || req.Budget == nil || *req.Budget != (Budget{Limit: LimitToolCalls, Used: 1, Allowed: 1, Grant: 1}) ||
				req.Reason != "used 1 of 1 tool calls (max_tool_calls); approving grants 1 more" {
				t.Errorf("asked %+v (budget %+v)", req, req.Budget)
			}
			switch tc.name {
			case "waiting":
				if res.Status != WorkflowWaiting || req.ApproverScope != "approve:spend" || req.OnTimeout != DecisionApprove || req.Timeout.Hours() != 1 {
					t.Errorf("waiting: status %s, request %+v", res.Status, req)
				}
			default:
				if req.ApproverScope != DefaultBudgetApproverScope || req.OnTimeout != DecisionDeny {
					t.Errorf("default approval: %+v", req)
				}
			}
		})
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 4210: "4,210", 100000000: "100,000,000", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
