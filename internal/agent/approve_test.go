package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// decidingEnv answers approve steps with a fixed decision and records
// what each step asked.
type decidingEnv struct {
	fakeEnv
	decision Decision
	asked    []ApprovalRequest
	steps    []int
}

func (d *decidingEnv) Approve(_ context.Context, step int, req ApprovalRequest) (Decision, error) {
	d.asked = append(d.asked, req)
	d.steps = append(d.steps, step)
	return d.decision, nil
}

const approvalDef = `{"tools": ["payments"], "steps": [
	{"action": "fetch", "call": "payments.getTransaction", "args": {"id": "'t1'"}, "save_as": "txn"},
	{"action": "refund_approval", "approve": {"when": "txn.amount > 500.0",
	  "reason": "'Refund of ' + string(txn.amount)", "approver_scope": "approve:refunds",
	  "timeout": "2h", "on_timeout": "approve"}%s},
	{"action": "refund", "call": "payments.refund", "args": {"amount": "txn.amount"}}]}`

func refundEnv(amount string) fakeEnv {
	return fakeEnv{handlers: map[string]func(map[string]any) CallResult{
		"payments.getTransaction": func(map[string]any) CallResult {
			return CallResult{Status: StatusOK, Result: json.RawMessage(`{"amount": ` + amount + `}`)}
		},
		"payments.refund": func(map[string]any) CallResult {
			return CallResult{Status: StatusOK, Result: json.RawMessage(`{"refunded": true}`)}
		},
	}}
}

func TestApproveStep(t *testing.T) {
	tests := []struct {
		name        string
		amount      string
		onDenied    string
		decision    string
		wantEvents  []string // action:status
		wantStatus  string
		wantOutcome string
		wantAsked   int
	}{
		{name: "below the threshold nothing is asked", amount: "100", decision: StatusWaitingApproval,
			wantEvents: []string{"fetch:ok", "refund:ok"}, wantStatus: WorkflowCompleted, wantOutcome: OutcomeCompleted},
		{name: "no decision yet pauses the run", amount: "900", decision: StatusWaitingApproval,
			wantEvents: []string{"fetch:ok", "refund_approval:waiting_approval"}, wantStatus: WorkflowWaiting, wantAsked: 1},
		{name: "approved goes on", amount: "900", decision: StatusApproved,
			wantEvents: []string{"fetch:ok", "refund_approval:waiting_approval", "refund_approval:approved", "refund:ok"},
			wantStatus: WorkflowCompleted, wantOutcome: OutcomeCompleted, wantAsked: 1},
		{name: "denied ends the run denied", amount: "900", decision: StatusDenied,
			wantEvents: []string{"fetch:ok", "refund_approval:waiting_approval", "refund_approval:denied"},
			wantStatus: WorkflowCompleted, wantOutcome: OutcomeDenied, wantAsked: 1},
		{name: "denied with on_denied continue goes on", amount: "900", decision: StatusDenied, onDenied: `, "on_denied": "continue"`,
			wantEvents: []string{"fetch:ok", "refund_approval:waiting_approval", "refund_approval:denied", "refund:ok"},
			wantStatus: WorkflowCompleted, wantOutcome: OutcomeCompleted, wantAsked: 1},
		{name: "unrecorded in a replay goes on", amount: "900", decision: StatusUnrecorded,
			wantEvents: []string{"fetch:ok", "refund_approval:waiting_approval", "refund_approval:unrecorded", "refund:ok"},
			wantStatus: WorkflowCompleted, wantOutcome: OutcomeCompleted, wantAsked: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, parseDef(t, strings.Replace(approvalDef, "%s", tc.onDenied, 1)))
			env := &decidingEnv{fakeEnv: refundEnv(tc.amount), decision: Decision{Status: tc.decision, Result: json.RawMessage(`{"decided_by":"alice"}`)}}
			events, res, err := p.Execute(context.Background(), Input{Goal: "refund", Caller: Caller{Scopes: []string{"tool:*"}}}, env)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range events {
				got = append(got, ev.Action+":"+ev.Status)
			}
			if diff := cmp.Diff(tc.wantEvents, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if res.Status != tc.wantStatus || res.Outcome != tc.wantOutcome {
				t.Errorf("status, outcome = %q, %q; want %q, %q", res.Status, res.Outcome, tc.wantStatus, tc.wantOutcome)
			}
			if len(env.asked) != tc.wantAsked {
				t.Fatalf("asked %d times, want %d", len(env.asked), tc.wantAsked)
			}
			if tc.wantAsked == 0 {
				return
			}
			want := ApprovalRequest{Action: "refund_approval", Reason: "Refund of 900", ApproverScope: "approve:refunds",
				Timeout: 2 * time.Hour, OnTimeout: DecisionApprove}
			if diff := cmp.Diff(want, env.asked[0]); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if env.steps[0] != 2 || events[1].Reason != "Refund of 900" {
				t.Errorf("asked at step %d with reason %q; want step 2, the waiting event's", env.steps[0], events[1].Reason)
			}
			if len(events) > 2 && string(events[2].Result) != `{"decided_by":"alice"}` {
				t.Errorf("decision event result = %s", events[2].Result)
			}
		})
	}
}

func TestApproveStepIsValidatedAtDeploy(t *testing.T) {
	tests := []struct {
		approve string
		extra   string
		field   string
	}{
		{approve: `{"timeout": "soon"}`, field: "steps[0].approve.timeout"},
		{approve: `{"timeout": "800h"}`, field: "steps[0].approve.timeout"},
		{approve: `{"timeout": "10ms"}`, field: "steps[0].approve.timeout"},
		{approve: `{"on_timeout": "escalate"}`, field: "steps[0].approve.on_timeout"},
		{approve: `{"approver_scope": "two words"}`, field: "steps[0].approve.approver_scope"},
		{approve: `{"when": "1 + 1"}`, field: "steps[0].approve.when"},
		{approve: `{"reason": "goal.size()"}`, field: "steps[0].approve.reason"},
		{approve: `{}`, extra: `, "save_as": "x"`, field: "steps[0].save_as"},
		{approve: `{}`, extra: `, "on_error": "continue"`, field: "steps[0].on_error"},
	}
	for _, tc := range tests {
		t.Run(tc.field+" "+tc.approve+tc.extra, func(t *testing.T) {
			def := parseDef(t, `{"tools": [], "steps": [{"action": "ok", "approve": `+tc.approve+tc.extra+`}]}`)
			_, errs := Compile(def, testCatalog())
			if len(errs) == 0 {
				t.Fatal("compiled; want a field error")
			}
			if errs[0].Field != tc.field {
				t.Errorf("field = %q (%s); want %q", errs[0].Field, errs[0].Message, tc.field)
			}
		})
	}
}
