package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func fetchEvent() Event {
	return Event{Step: 1, Action: "fetch_transaction", Kind: KindCall, Status: StatusOK,
		Tool: "payments", Operation: "getTransaction", Args: map[string]any{"id": "tx_1"},
		Result: json.RawMessage(`{"id":"tx_1","amount":1500}`)}
}

func openCaseArgs() map[string]any {
	return map[string]any{"transaction": "tx_1", "queue": "fraud-review"}
}

func TestRunFraudTriage(t *testing.T) {
	tests := []struct {
		name       string
		amount     string
		scopes     []string
		maxCalls   int
		edit       func(*Definition)
		wantEvents []Event
		wantResult Result
		wantCalls  []string
	}{
		{
			name:   "large amount escalates",
			amount: "1500",
			scopes: []string{"tool:payments", "tool:cases"},
			wantEvents: []Event{
				fetchEvent(),
				{Step: 2, Action: "fraud_score", Kind: KindScore, Status: StatusOK, Score: ptr(0.91)},
				{Step: 3, Action: "route_queue", Kind: KindRoute, Status: StatusOK, Queue: "fraud-review"},
				{Step: 4, Action: "open_case", Kind: KindCall, Status: StatusOK, Tool: "cases", Operation: "createCase",
					Args: openCaseArgs(), Result: json.RawMessage(`{"case_id":"case_9"}`)},
			},
			wantResult: Result{Outcome: "escalated", Status: WorkflowCompleted,
				Output: map[string]any{"queue": "fraud-review", "score": 0.91}, Steps: 4, ToolCalls: 2},
			wantCalls: []string{"payments.getTransaction", "cases.createCase"},
		},
		{
			name:   "small amount is cleared and open_case takes no step number",
			amount: "20",
			scopes: []string{"tool:*"},
			wantEvents: []Event{
				{Step: 1, Action: "fetch_transaction", Kind: KindCall, Status: StatusOK,
					Tool: "payments", Operation: "getTransaction", Args: map[string]any{"id": "tx_1"},
					Result: json.RawMessage(`{"id":"tx_1","amount":20}`)},
				{Step: 2, Action: "fraud_score", Kind: KindScore, Status: StatusOK, Score: ptr(0.12)},
				{Step: 3, Action: "route_queue", Kind: KindRoute, Status: StatusOK, Queue: "standard"},
			},
			wantResult: Result{Outcome: "cleared", Status: WorkflowCompleted,
				Output: map[string]any{"queue": "standard", "score": 0.12}, Steps: 3, ToolCalls: 1},
			wantCalls: []string{"payments.getTransaction"},
		},
		{
			name:   "args as one expression giving the object",
			amount: "20",
			scopes: []string{"tool:*"},
			edit:   func(d *Definition) { d.Steps[0].Args = "{'id': context.transaction_id}" },
			wantEvents: []Event{
				{Step: 1, Action: "fetch_transaction", Kind: KindCall, Status: StatusOK,
					Tool: "payments", Operation: "getTransaction", Args: map[string]any{"id": "tx_1"},
					Result: json.RawMessage(`{"id":"tx_1","amount":20}`)},
				{Step: 2, Action: "fraud_score", Kind: KindScore, Status: StatusOK, Score: ptr(0.12)},
				{Step: 3, Action: "route_queue", Kind: KindRoute, Status: StatusOK, Queue: "standard"},
			},
			wantResult: Result{Outcome: "cleared", Status: WorkflowCompleted,
				Output: map[string]any{"queue": "standard", "score": 0.12}, Steps: 3, ToolCalls: 1},
			wantCalls: []string{"payments.getTransaction"},
		},
		{
			name:   "args expression that is not an object fails the step",
			amount: "20",
			scopes: []string{"tool:*"},
			edit:   func(d *Definition) { d.Steps[0].Args = "context.transaction_id" },
			wantEvents: []Event{
				{Step: 1, Action: "fetch_transaction", Kind: KindCall, Status: StatusError,
					Tool: "payments", Operation: "getTransaction", Error: "args: the expression gave string, not an object"},
			},
			wantResult: Result{Outcome: OutcomeFailed, Status: WorkflowFailed,
				Error: "steps[0] (fetch_transaction): args: the expression gave string, not an object", Steps: 1},
		},
		{
			name:   "caller without tool:cases is denied and the call is not made",
			amount: "1500",
			scopes: []string{"tool:payments"},
			wantEvents: []Event{
				fetchEvent(),
				{Step: 2, Action: "fraud_score", Kind: KindScore, Status: StatusOK, Score: ptr(0.91)},
				{Step: 3, Action: "route_queue", Kind: KindRoute, Status: StatusOK, Queue: "fraud-review"},
				{Step: 4, Action: "open_case", Kind: KindCall, Status: StatusDenied, Tool: "cases", Operation: "createCase",
					Args: openCaseArgs(), Error: "the caller lacks scope tool:cases"},
			},
			wantResult: Result{Outcome: OutcomeDenied, Status: WorkflowCompleted,
				Error: "steps[3] (open_case): the caller lacks scope tool:cases", Steps: 4, ToolCalls: 1},
			wantCalls: []string{"payments.getTransaction"},
		},
		{
			name:   "on_denied continue goes on to the outcome",
			amount: "1500",
			scopes: []string{"tool:payments"},
			edit:   func(d *Definition) { d.Steps[3].OnDenied = "continue" },
			wantEvents: []Event{
				fetchEvent(),
				{Step: 2, Action: "fraud_score", Kind: KindScore, Status: StatusOK, Score: ptr(0.91)},
				{Step: 3, Action: "route_queue", Kind: KindRoute, Status: StatusOK, Queue: "fraud-review"},
				{Step: 4, Action: "open_case", Kind: KindCall, Status: StatusDenied, Tool: "cases", Operation: "createCase",
					Args: openCaseArgs(), Error: "the caller lacks scope tool:cases"},
			},
			wantResult: Result{Outcome: "escalated", Status: WorkflowCompleted,
				Output: map[string]any{"queue": "fraud-review", "score": 0.91}, Steps: 4, ToolCalls: 1},
			wantCalls: []string{"payments.getTransaction"},
		},
		{
			name:     "max_tool_calls 1 stops the second call",
			amount:   "1500",
			scopes:   []string{"tool:*"},
			maxCalls: 1,
			wantEvents: []Event{
				fetchEvent(),
				{Step: 2, Action: "fraud_score", Kind: KindScore, Status: StatusOK, Score: ptr(0.91)},
				{Step: 3, Action: "route_queue", Kind: KindRoute, Status: StatusOK, Queue: "fraud-review"},
				{Step: 4, Action: ActionLimitReached, Kind: KindCall, Status: StatusLimitExceeded, Tool: "cases",
					Operation: "createCase", Args: openCaseArgs(), Error: "max_tool_calls (1) reached"},
			},
			wantResult: Result{Outcome: OutcomeLimitExceeded, Status: WorkflowCompleted,
				Error: "max_tool_calls (1) reached", Steps: 4, ToolCalls: 1},
			wantCalls: []string{"payments.getTransaction"},
		},
		{
			name:   "finish ends the run with its slug",
			amount: "1500",
			scopes: []string{"tool:*"},
			edit: func(d *Definition) {
				d.Steps = append(d.Steps[:2:2], Step{Action: "stop", When: "score > 0.5", Finish: &Finish{Outcome: "suspicious", Literal: true}})
				d.Output = "{'score': score}"
				d.Outcome = "'never'"
			},
			wantEvents: []Event{
				fetchEvent(),
				{Step: 2, Action: "fraud_score", Kind: KindScore, Status: StatusOK, Score: ptr(0.91)},
				{Step: 3, Action: "stop", Kind: KindFinish, Status: StatusOK, Outcome: "suspicious"},
			},
			wantResult: Result{Outcome: "suspicious", Status: WorkflowCompleted,
				Output: map[string]any{"score": 0.91}, Steps: 3, ToolCalls: 1},
			wantCalls: []string{"payments.getTransaction"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := loadDef(t, "fraud_triage.json")
			if tc.edit != nil {
				tc.edit(&def)
			}
			p := mustCompile(t, def)
			env := fraudEnv(tc.amount)
			in := fraudInput(tc.scopes...)
			in.MaxToolCalls = tc.maxCalls
			events, res, err := p.Execute(context.Background(), in, env)
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantResult, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCalls, env.calls); diff != "" {
				t.Errorf("calls made (-want +got):\n%s", diff)
			}
		})
	}
}

const refundDef = `{
  "tools": ["payments"],
  "policies": {"financial": {"allow": "!has(args.amount) || args.amount <= 5000.0 || 'payments:large' in caller.scopes"}},
  "steps": [{"action": "refund", "call": "payments.refund", "args": {"amount": "context.amount"}}],
  "outcome": "'refunded'"
}`

func TestPolicy(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		amount   any
		scopes   []string
		wantStat string
		wantOut  string
		wantErr  string
	}{
		{name: "small amount allowed", amount: 100, scopes: []string{"tool:payments"},
			wantStat: StatusOK, wantOut: "refunded"},
		{name: "large amount denied", amount: 6000, scopes: []string{"tool:payments"},
			wantStat: StatusDenied, wantOut: OutcomeDenied, wantErr: "policy financial denied the call"},
		{name: "large amount allowed with payments:large", amount: 6000.5, scopes: []string{"tool:payments", "payments:large"},
			wantStat: StatusOK, wantOut: "refunded"},
		{name: "scope is checked before policy", amount: 100, scopes: []string{"payments:large"},
			wantStat: StatusDenied, wantOut: OutcomeDenied, wantErr: "the caller lacks scope tool:payments"},
		{name: "a rule that errors denies", policy: "args.nope > 1", amount: 100, scopes: []string{"tool:payments"},
			wantStat: StatusDenied, wantOut: OutcomeDenied, wantErr: "policy financial failed, so the call is denied"},
		{name: "a rule sees tool and operation", policy: "tool == 'payments' && operation == 'refund'", amount: 100,
			scopes: []string{"tool:payments"}, wantStat: StatusOK, wantOut: "refunded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := parseDef(t, refundDef)
			if tc.policy != "" {
				def.Policies["financial"] = Policy{Allow: tc.policy}
			}
			p := mustCompile(t, def)
			env := fraudEnv("1")
			in := Input{Goal: "refund", Context: map[string]any{"amount": tc.amount}, Caller: Caller{Scopes: tc.scopes}}
			events, res, err := p.Execute(context.Background(), in, env)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != 1 {
				t.Fatalf("got %d events, want 1: %+v", len(events), events)
			}
			got := []string{events[0].Status, res.Outcome}
			if diff := cmp.Diff([]string{tc.wantStat, tc.wantOut}, got); diff != "" {
				t.Errorf("status, outcome (-want +got):\n%s", diff)
			}
			if !strings.Contains(events[0].Error, tc.wantErr) {
				t.Errorf("event error %q does not contain %q", events[0].Error, tc.wantErr)
			}
			wantCalls := 0
			if tc.wantStat == StatusOK {
				wantCalls = 1
			}
			if len(env.calls) != wantCalls {
				t.Errorf("Env.Call made %d calls, want %d", len(env.calls), wantCalls)
			}
		})
	}
}

func TestRunEndings(t *testing.T) {
	tests := []struct {
		name        string
		def         string
		ctx         map[string]any
		env         *fakeEnv
		wantKinds   []string // "action:status" of each event
		wantOutcome string
		wantErr     string
	}{
		{
			name: "goto loop ends at max_steps",
			def: `{"tools": [], "max_steps": 7, "steps": [
				{"action": "count", "set": {"n": "n == null ? 1 : n + 1"}},
				{"action": "again", "goto": "count"}]}`,
			wantKinds:   []string{"count:ok", "count:ok", "count:ok", "count:ok"},
			wantOutcome: OutcomeFailed, wantErr: "the run exceeded max_steps (7) at steps[1]",
		},
		{
			name: "goto with when loops until it is false",
			def: `{"tools": [], "steps": [
				{"action": "count", "set": {"n": "n == null ? 1 : n + 1"}},
				{"action": "again", "when": "n < 3", "goto": "count"},
				{"action": "done", "finish": {"outcome": "n == 3 ? 'counted' : 'wrong'"}}]}`,
			wantKinds:   []string{"count:ok", "count:ok", "count:ok", "done:ok"},
			wantOutcome: "counted",
		},
		{
			name: "cost limit breach fails the step cleanly",
			def: `{"tools": [], "steps": [
				{"action": "heavy", "score": "context.items.all(x, context.items.all(y, true)) ? 1.0 : 0.0"}]}`,
			ctx:         map[string]any{"items": make([]any, 1000)},
			wantKinds:   []string{"heavy:error"},
			wantOutcome: OutcomeFailed, wantErr: "cost limit",
		},
		{
			name:        "a tool error ends the run failed",
			def:         `{"tools": ["payments"], "steps": [{"action": "fetch", "call": "payments.getTransaction", "args": {"id": "'x'"}}]}`,
			env:         answering("payments.getTransaction", CallResult{Status: StatusError, Err: "HTTP 503"}),
			wantKinds:   []string{"fetch:error"},
			wantOutcome: OutcomeFailed, wantErr: "payments.getTransaction: HTTP 503",
		},
		{
			name: "on_error continue goes on",
			def: `{"tools": ["payments"], "steps": [
				{"action": "fetch", "call": "payments.getTransaction", "args": {"id": "'x'"}, "on_error": "continue", "save_as": "txn"},
				{"action": "done", "finish": {"outcome": "txn.code == 404 ? 'missing' : 'found'"}}]}`,
			env: answering("payments.getTransaction",
				CallResult{Status: StatusError, Result: json.RawMessage(`{"code":404}`), Err: "HTTP 404"}),
			wantKinds:   []string{"fetch:error", "done:ok"},
			wantOutcome: "missing",
		},
		{
			name: "an unrecorded call yields null and the run sees the consequence",
			def: `{"tools": ["payments"], "steps": [
				{"action": "fetch", "call": "payments.getTransaction", "args": {"id": "'x'"}, "save_as": "txn"},
				{"action": "decide", "finish": {"outcome": "txn == null ? 'unknown' : 'known'"}}]}`,
			env:         answering("payments.getTransaction", CallResult{Status: StatusUnrecorded}),
			wantKinds:   []string{"fetch:unrecorded", "decide:ok"},
			wantOutcome: "unknown",
		},
		{
			name: "a call cut short after it was sent is emitted and ends the run cancelled",
			def: `{"tools": ["payments"], "steps": [
				{"action": "fetch", "call": "payments.getTransaction", "args": {"id": "'x'"}, "on_error": "continue"},
				{"action": "done", "finish": {"outcome": "'finished'"}}]}`,
			env:         answering("payments.getTransaction", CallResult{Status: StatusCancelled, Err: "cancelled in flight"}),
			wantKinds:   []string{"fetch:cancelled"},
			wantOutcome: OutcomeCancelled, wantErr: "cancelled in flight",
		},
		{
			name:        "a finish expression that is not a slug fails",
			def:         `{"tools": [], "steps": [{"action": "done", "finish": {"outcome": "'Not A Slug'"}}]}`,
			wantKinds:   []string{"done:error"},
			wantOutcome: OutcomeFailed, wantErr: `outcome "Not A Slug" is not a slug`,
		},
		{
			name:        "an outcome that is not a slug fails",
			def:         `{"tools": [], "steps": [{"action": "s", "set": {"x": "1"}}], "outcome": "'two words'"}`,
			wantKinds:   []string{"s:ok"},
			wantOutcome: OutcomeFailed, wantErr: `outcome: "two words" is not a slug`,
		},
		{
			name:        "no outcome means completed",
			def:         `{"tools": [], "steps": [{"action": "s", "set": {"x": "[1, 'a', {'k': null}]"}}], "output": "x"}`,
			wantKinds:   []string{"s:ok"},
			wantOutcome: OutcomeCompleted,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, parseDef(t, tc.def))
			env := tc.env
			if env == nil {
				env = &fakeEnv{}
			}
			in := Input{Goal: "g", Context: tc.ctx, Caller: Caller{Scopes: []string{"tool:*"}}}
			events, res, err := p.Execute(context.Background(), in, env)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, ev := range events {
				kinds = append(kinds, ev.Action+":"+ev.Status)
			}
			if diff := cmp.Diff(tc.wantKinds, kinds); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if res.Outcome != tc.wantOutcome {
				t.Errorf("outcome = %q, want %q (error %q)", res.Outcome, tc.wantOutcome, res.Error)
			}
			if !strings.Contains(res.Error, tc.wantErr) {
				t.Errorf("result error %q does not contain %q", res.Error, tc.wantErr)
			}
		})
	}
}

func TestRunOutputIsJSON(t *testing.T) {
	p := mustCompile(t, parseDef(t, `{"tools": [], "steps": [{"action": "s", "set": {"x": "[1, 'a', {'k': null}, 2.5, true]"}}], "output": "{'x': x, 'goal': goal}"}`))
	_, res, err := p.Execute(context.Background(), Input{Goal: "g"}, &fakeEnv{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"x": []any{int64(1), "a", map[string]any{"k": nil}, 2.5, true}, "goal": "g"}
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	p := mustCompile(t, loadDef(t, "fraud_triage.json"))
	run := func() []Event {
		events, _, err := p.Execute(context.Background(), fraudInput("tool:*"), fraudEnv("1500"))
		if err != nil {
			t.Fatal(err)
		}
		return events
	}
	first, second := run(), run()
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second run differs (-first +second):\n%s", diff)
	}
	if len(first) != 4 {
		t.Errorf("got %d events, want 4", len(first))
	}
}

func TestRunEnvStepNumbers(t *testing.T) {
	p := mustCompile(t, loadDef(t, "fraud_triage.json"))
	env := fraudEnv("1500")
	if _, _, err := p.Execute(context.Background(), fraudInput("tool:*"), env); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 4}, env.steps); diff != "" {
		t.Errorf("steps passed to Env.Call (-want +got):\n%s", diff)
	}
}

func TestRunCancelled(t *testing.T) {
	p := mustCompile(t, loadDef(t, "fraud_triage.json"))
	ctx, cancel := context.WithCancel(context.Background())
	env := fraudEnv("1500")
	env.handlers["payments.getTransaction"] = func(map[string]any) CallResult {
		cancel()
		return CallResult{Status: StatusOK, Result: json.RawMessage(`{"id":"tx_1","amount":1500}`)}
	}
	events, res, err := p.Execute(ctx, fraudInput("tool:*"), env)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res.Outcome != OutcomeCancelled || res.Status != WorkflowCancelled {
		t.Errorf("result = %+v, want cancelled", res)
	}
	if len(events) != 1 {
		t.Errorf("got %d events, want the one before cancellation", len(events))
	}
}

func TestRunEnvError(t *testing.T) {
	p := mustCompile(t, loadDef(t, "fraud_triage.json"))
	_, res, err := p.Execute(context.Background(), fraudInput("tool:*"), &fakeEnv{})
	if err == nil || !strings.Contains(err.Error(), "no fake for payments.getTransaction") {
		t.Fatalf("err = %v, want the Env's error", err)
	}
	if res.Outcome != OutcomeFailed || res.Status != WorkflowFailed {
		t.Errorf("result = %+v, want failed", res)
	}
}

func TestWorkflowStatus(t *testing.T) {
	got := map[string]string{}
	for _, o := range []string{"escalated", OutcomeDenied, OutcomeLimitExceeded, OutcomeFailed, OutcomeTimedOut, OutcomeCancelled} {
		got[o] = WorkflowStatus(o)
	}
	want := map[string]string{
		"escalated": "completed", "denied": "completed", "limit_exceeded": "completed",
		"failed": "failed", "timed_out": "failed", "cancelled": "cancelled",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WorkflowStatus (-want +got):\n%s", diff)
	}
}

func TestCanonicalArgs(t *testing.T) {
	a, err := CanonicalArgs(map[string]any{"b": 1.0, "a": []any{"x", int64(2)}, "c": map[string]any{"z": true, "y": nil}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"a":["x",2],"b":1,"c":{"y":null,"z":true}}`, string(a)); diff != "" {
		t.Errorf("canonical args (-want +got):\n%s", diff)
	}
	k1, _ := ToolCall{Tool: "t", Operation: "o", Args: map[string]any{"n": int64(1500)}}.Key()
	k2, _ := ToolCall{Tool: "t", Operation: "o", Args: map[string]any{"n": 1500.0}}.Key()
	if k1 != k2 {
		t.Errorf("keys differ for equal numbers: %q vs %q", k1, k2)
	}
}

// Maps reach expressions with their keys in sorted order, so iterating one
// gives the same answer on every run (and on replay).
func TestMapIterationIsSorted(t *testing.T) {
	p := mustCompile(t, parseDef(t, `{"tools": [], "steps": [
		{"action": "keys", "set": {"ks": "context.map(k, k)", "nested": "context.h.map(k, k + '=' + string(context.h[k]))",
		 "all": "context.all(k, k != 'zz')", "saved": "steps.map(k, k)"}}],
		"output": "{'ks': ks, 'nested': nested, 'saved': saved}"}`))
	in := Input{Goal: "g", Context: map[string]any{
		"h": map[string]any{"q": 1.0, "b": 2.0, "x": 3.0, "a": 4.0, "m": 5.0},
		"c": 1.0, "a": 2.0, "g": 3.0, "e": 4.0, "b": 5.0, "f": 6.0, "d": 7.0,
	}}
	want := map[string]any{
		"ks":     []any{"a", "b", "c", "d", "e", "f", "g", "h"},
		"nested": []any{"a=4", "b=2", "m=5", "q=1", "x=3"},
		"saved":  []any{},
	}
	for i := range 50 {
		_, res, err := p.Execute(context.Background(), in, &fakeEnv{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, res.Output); diff != "" {
			t.Fatalf("run %d (-want +got):\n%s", i, diff)
		}
	}
}
