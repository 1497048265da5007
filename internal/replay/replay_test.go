package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

const planDef = `{
  "purpose": "You triage card transactions.",
  "tools": ["payments", "cases"],
  "steps": [
    {"action": "investigate", "plan": {"prompt": %q, "max_calls": 3}, "save_as": "summary"}
  ],
  "outcome": "'investigated'",
  "output": "summary"
}`

func planProgram(t *testing.T, prompt string) *agent.Program {
	t.Helper()
	cat := agent.NewCatalog()
	cat.AddModel(agent.DefaultModel)
	cat.Add(&tool.Tool{Name: "payments"}, []tool.Operation{{ID: "getTransaction", Kind: tool.Read,
		Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)}})
	cat.Add(&tool.Tool{Name: "cases"}, []tool.Operation{{ID: "createCase", Kind: tool.Write}})
	def, errs := agent.DecodeDefinition([]byte(fmtDef(prompt)))
	if errs != nil {
		t.Fatal(errs)
	}
	prog, errs := agent.Compile(def, cat)
	if errs != nil {
		t.Fatal(errs)
	}
	return prog
}

func fmtDef(prompt string) string {
	b, _ := json.Marshal(prompt)
	return replaceVerb(planDef, string(b))
}

func replaceVerb(s, v string) string {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 'q' {
			return s[:i] + v + s[i+2:]
		}
	}
	return s
}

// recordingEnv runs a workflow for real against scripted answers, keeping
// what the workflow runner would record.
type recordingEnv struct {
	agent.NoDecisions
	replies     []agent.ChatResponse
	completions map[int]json.RawMessage
	sent        map[int]bool
	// stopAt, when set, is the completion the run's stop cuts short (as
	// the workflow runner's recorder reports one: its record is kept).
	stopAt int
}

func (e *recordingEnv) Call(_ context.Context, step int, c agent.ToolCall) (agent.CallResult, error) {
	e.sent[step] = true
	return agent.CallResult{Status: agent.StatusOK, Result: json.RawMessage(`{"id":"tx_1","amount":1500}`)}, nil
}

func (e *recordingEnv) Complete(_ context.Context, _, n int, req agent.ChatRequest) (agent.ChatResponse, error) {
	hash, err := req.Hash()
	if err != nil {
		return agent.ChatResponse{}, err
	}
	if n == e.stopAt {
		usage := agent.Usage{InputTokens: 41}
		e.completions[n], _ = json.Marshal(agent.RecordedCompletion{RequestSHA256: hash, Response: agent.ChatResponse{Usage: &usage}})
		return agent.ChatResponse{}, &agent.StoppedError{Usage: usage, Reason: "cancelled while the model answered"}
	}
	if n > len(e.replies) {
		return agent.ChatResponse{}, errors.New("script exhausted")
	}
	resp := e.replies[n-1]
	e.completions[n], _ = json.Marshal(agent.RecordedCompletion{RequestSHA256: hash, Response: resp})
	return resp, nil
}

// record runs prog and returns its history as the runner stores it.
func record(t *testing.T, prog *agent.Program, replies ...agent.ChatResponse) *replay.History {
	t.Helper()
	return recordWith(t, prog, `{}`, replies...)
}

// recordWith is record of a workflow invoked with the context ctx.
func recordWith(t *testing.T, prog *agent.Program, ctx string, replies ...agent.ChatResponse) *replay.History {
	t.Helper()
	return recordIn(t, prog, ctx, &recordingEnv{replies: replies})
}

// recordIn is recordWith against env.
func recordIn(t *testing.T, prog *agent.Program, ctx string, env *recordingEnv) *replay.History {
	t.Helper()
	env.completions, env.sent = map[int]json.RawMessage{}, map[int]bool{}
	wf := &workflow.Workflow{ID: "wf_1", Agent: "triage", AgentVersion: "1", Status: workflow.Completed,
		Goal: "look at tx_1", Context: json.RawMessage(ctx), Caller: workflow.Caller{Sub: "alice", Scopes: []string{"tool:*"}}}
	events, res, err := prog.Execute(context.Background(), wf.Input(), env)
	if err != nil {
		t.Fatal(err)
	}
	wf.Outcome = res.Outcome
	h := &replay.History{Workflow: wf, Completions: env.completions}
	for _, ev := range events {
		s := workflow.Step{Seq: ev.Step, Step: ev.Step, Action: ev.Action, Kind: ev.Kind, Status: ev.Status,
			Tool: ev.Tool, Operation: ev.Operation, Result: ev.Result, Error: ev.Error, Sent: env.sent[ev.Step],
			Model: ev.Model, FinishReason: ev.FinishReason, Usage: ev.Usage}
		if ev.Args != nil {
			s.Args, _ = json.Marshal(ev.Args)
		}
		h.Steps = append(h.Steps, s)
	}
	return h
}

func callReply(id string) agent.ChatResponse {
	return agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{
		{ID: "c1", Name: agent.FunctionName("payments", "getTransaction"), Arguments: `{"id":"` + id + `"}`}}}}
}

var doneReply = agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "looks fine"}}

func TestPlanStepReplaysFromItsRecordedCompletions(t *testing.T) {
	prog := planProgram(t, "'Check the transaction.'")
	h := record(t, prog, callReply("tx_1"), doneReply)
	// A completion, the call it asked for, and the completion of the answer.
	if len(h.Completions) != 2 || len(h.Steps) != 3 {
		t.Fatalf("recorded %d completions and %d steps, want 2 and 3", len(h.Completions), len(h.Steps))
	}
	run, err := replay.DryRun(context.Background(), prog, h)
	if err != nil {
		t.Fatal(err)
	}
	entries, delta := replay.Diff(h.Steps, run.Steps)
	if run.Outcome != "investigated" || delta != (replay.Delta{}) {
		t.Fatalf("outcome %q, delta %+v, want investigated and no change: %+v", run.Outcome, delta, entries)
	}
	if got := run.Steps[1]; got.Status != agent.StatusOK || string(got.Result) != `{"id":"tx_1","amount":1500}` {
		t.Errorf("plan call step = %+v, want the recorded answer", got)
	}

	// Another prompt is another conversation: its completion was not
	// recorded, so the plan step ends unrecorded and nothing is called.
	changed := planProgram(t, "'Check the transaction twice.'")
	run, err = replay.DryRun(context.Background(), changed, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Steps) != 1 || run.Steps[0].Status != agent.StatusUnrecorded || run.Steps[0].Kind != agent.KindCompletion {
		t.Fatalf("steps = %+v, want one unrecorded completion step", run.Steps)
	}
	// The first completion is aligned and changed (status); the call and
	// the second completion are removed.
	_, delta = replay.Diff(h.Steps, run.Steps)
	if want := (replay.Delta{StepsChanged: 1, StepsRemoved: 2, ToolCallsChanged: 1}); delta != want {
		t.Errorf("delta = %+v, want %+v", delta, want)
	}
}

// TestACompletionCutByTheRunsStopReplaysCancelled: a run cancelled while
// the model made its second completion keeps that completion's record
// (its tokens) beside a cancelled step. A dry replay serves the record as
// the stop it was and ends cancelled there, as the run did, rather than
// taking the record's empty answer for the model's (a dry replay's steps
// cost nothing, so the replayed step shows no tokens).
func TestACompletionCutByTheRunsStopReplaysCancelled(t *testing.T) {
	prog := planProgram(t, "'Check the transaction.'")
	h := recordIn(t, prog, `{}`, &recordingEnv{replies: []agent.ChatResponse{callReply("tx_1")}, stopAt: 2})
	if last := h.Steps[len(h.Steps)-1]; len(h.Steps) != 3 || last.Status != agent.StatusCancelled || last.Usage == nil || h.Workflow.Outcome != agent.OutcomeCancelled {
		t.Fatalf("recorded outcome %q and steps %+v, want a completion, a call and a cancelled completion with its tokens", h.Workflow.Outcome, h.Steps)
	}

	run, err := replay.DryRun(context.Background(), prog, h)
	if err != nil {
		t.Fatal(err)
	}
	if run.Outcome != agent.OutcomeCancelled || len(run.Steps) != 3 {
		t.Fatalf("replay ended %q (%s) with steps %+v, want cancelled at the third step", run.Outcome, run.Error, run.Steps)
	}
	cut := run.Steps[2]
	if cut.Kind != agent.KindCompletion || cut.Status != agent.StatusCancelled || cut.Error != "cancelled while the model answered" {
		t.Errorf("the replayed cut completion = %+v, want cancelled with the recorded words", cut)
	}
	if _, delta := replay.Diff(h.Steps, run.Steps); delta != (replay.Delta{}) {
		t.Errorf("delta %+v, want the recorded run again", delta)
	}
}

func TestLegacyCompletionsAreServedByNumber(t *testing.T) {
	prog := planProgram(t, "'Check the transaction.'")
	h := record(t, prog, callReply("tx_1"), doneReply)
	for n, raw := range h.Completions {
		rc, _ := agent.DecodeCompletion(raw)
		h.Completions[n], _ = json.Marshal(rc.Response) // as recorded before requests were hashed
	}
	run, err := replay.DryRun(context.Background(), prog, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, delta := replay.Diff(h.Steps, run.Steps); delta != (replay.Delta{}) || run.Outcome != "investigated" {
		t.Errorf("outcome %q delta %+v, want the recorded run again", run.Outcome, delta)
	}
}

// TestCallsRecordedAsFloatsAreServed: a model's call recorded before
// arguments kept their numbers as written (each a float64: 1.0 as 1, 1e21
// as 1e+21) is served to the identical call made again; one whose id past
// 2^53 was recorded rounded is not, the call made now sending the id the
// record never did. Recorded now, with every digit, it is served.
func TestCallsRecordedAsFloatsAreServed(t *testing.T) {
	prog := planProgram(t, "'Check the transaction.'")
	for _, tc := range []struct {
		name, args string
		asFloats   bool
		want       string
	}{
		{"ordinary numbers, recorded as floats", `{"id":"tx_1","amount":1.0,"limit":1e21,"rate":2.50,"page":{"size":10}}`, true, agent.StatusOK},
		{"an id past 2^53, recorded rounded", `{"id":"tx_1","ref":1234567890123456789}`, true, agent.StatusUnrecorded},
		{"an id past 2^53, recorded with every digit", `{"id":"tx_1","ref":1234567890123456789}`, false, agent.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{
				{ID: "c1", Name: agent.FunctionName("payments", "getTransaction"), Arguments: tc.args}}}}
			h := record(t, prog, call, doneReply)
			if tc.asFloats {
				var args map[string]any
				if err := json.Unmarshal(h.Steps[1].Args, &args); err != nil {
					t.Fatal(err)
				}
				h.Steps[1].Args, _ = json.Marshal(args)
			}
			run, err := replay.DryRun(context.Background(), prog, h)
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Steps) < 2 || run.Steps[1].Status != tc.want {
				t.Errorf("the call replayed %+v, want status %s (recorded args %s)", run.Steps, tc.want, h.Steps[1].Args)
			}
		})
	}
}

// TestContextArgsRecordedAsFloatsAreServed: a call step's args built from
// the context, recorded before an integer past 2^53 kept its digits (each
// number a float64: 12.50 as 12.5, 1e21 as 1e+21), are served to the same
// call made again; one whose id past 2^53 was recorded rounded is not, the
// call made now sending the id the record never did. Recorded now, with
// every digit, it is served.
func TestContextArgsRecordedAsFloatsAreServed(t *testing.T) {
	cat := agent.NewCatalog()
	cat.Add(&tool.Tool{Name: "ledger"}, []tool.Operation{{ID: "getOrder", Kind: tool.Read,
		Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"ref":{"type":"integer"},"amount":{"type":"number"},"n":{"type":"number"},"limit":{"type":"number"}}}`)}})
	def, errs := agent.DecodeDefinition([]byte(`{"tools": ["ledger"], "steps": [{"action": "read", "call": "ledger.getOrder",
		"args": {"id": "context.id", "ref": "context.ref", "amount": "context.amount", "n": "context.n", "limit": "context.limit"}}],
		"outcome": "'read'"}`))
	if errs != nil {
		t.Fatal(errs)
	}
	prog, errs := agent.Compile(def, cat)
	if errs != nil {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		name, context string
		asFloats      bool
		want          string
	}{
		{"ordinary numbers, recorded as floats", `{"id":"tx_1","ref":42,"amount":12.50,"n":1.0,"limit":1e21}`, true, agent.StatusOK},
		{"an id past 2^53, recorded rounded", `{"id":"tx_1","ref":1234567890123456789,"amount":12.50,"n":1.0,"limit":1e21}`, true, agent.StatusUnrecorded},
		{"an id past 2^53, recorded with every digit", `{"id":"tx_1","ref":1234567890123456789,"amount":12.50,"n":1.0,"limit":1e21}`, false, agent.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := recordWith(t, prog, tc.context)
			if tc.asFloats {
				var args map[string]any
				if err := json.Unmarshal(h.Steps[0].Args, &args); err != nil {
					t.Fatal(err)
				}
				h.Steps[0].Args, _ = json.Marshal(args)
			}
			run, err := replay.DryRun(context.Background(), prog, h)
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Steps) != 1 || run.Steps[0].Status != tc.want {
				t.Errorf("the call replayed %+v, want status %s (recorded args %s)", run.Steps, tc.want, h.Steps[0].Args)
			}
		})
	}
}

func TestRepeatedCallsAreServedInRecordedOrder(t *testing.T) {
	h := &replay.History{Workflow: &workflow.Workflow{Context: json.RawMessage(`{}`)}}
	for i := 1; i <= 3; i++ {
		h.Steps = append(h.Steps, workflow.Step{Step: i, Action: "poll", Kind: agent.KindCall, Status: agent.StatusOK,
			Tool: "t", Operation: "o", Args: json.RawMessage(`{"b":1,"a":2}`), Sent: true,
			Result: json.RawMessage(strconv.Itoa(i))})
	}
	// A call that was refused before sending is never served.
	h.Steps = append(h.Steps, workflow.Step{Step: 4, Action: "poll", Kind: agent.KindCall, Status: agent.StatusError,
		Tool: "t", Operation: "o", Args: json.RawMessage(`{"a":2,"b":1}`), Error: "args did not evaluate"})
	env, err := replay.NewEnv(h)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 1; i <= 4; i++ {
		res, err := env.Call(context.Background(), i, agent.ToolCall{Tool: "t", Operation: "o", Args: map[string]any{"a": 2.0, "b": int64(1)}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Status+":"+string(res.Result))
	}
	if diff := cmp.Diff([]string{"ok:1", "ok:2", "ok:3", "unrecorded:"}, got); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
}

func TestDiffAlignsByActions(t *testing.T) {
	steps := func(actions ...string) []workflow.Step {
		out := make([]workflow.Step, len(actions))
		for i, a := range actions {
			out[i] = workflow.Step{Step: i + 1, Action: a, Status: "ok"}
		}
		return out
	}
	entries, delta := replay.Diff(steps("a", "b", "c", "d"), steps("a", "x", "c", "d", "e"))
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	if diff := cmp.Diff([]string{"same", "removed", "added", "same", "same", "added"}, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if want := (replay.Delta{StepsAdded: 2, StepsRemoved: 1}); delta != want {
		t.Errorf("delta = %+v, want %+v", delta, want)
	}
}

// TestDiffPairsParallelCalls: an external agent's framework may make a
// model's parallel tool calls in any order, so a replay that made them in
// another order changed nothing; a defined agent's calls keep their
// places, and a call that did change still shows.
func TestDiffPairsParallelCalls(t *testing.T) {
	step := func(attempt int, kind, op, args string) workflow.Step {
		s := workflow.Step{Action: kind, Kind: kind, Status: agent.StatusOK, Attempt: attempt}
		if kind == agent.KindCall {
			s.Tool, s.Operation, s.Args, s.Result = "ledger", op, json.RawMessage(args), json.RawMessage(`{"for":`+args+`}`)
		}
		return s
	}
	run := func(attempt int, calls ...string) []workflow.Step {
		out := []workflow.Step{step(attempt, agent.KindCompletion, "", "")}
		for _, c := range calls {
			out = append(out, step(attempt, agent.KindCall, "get", c))
		}
		return append(out, step(attempt, agent.KindCompletion, "", ""))
	}
	tests := []struct {
		name               string
		original, replayed []workflow.Step
		want               []string // each entry: kind and the args of its original and replay
		calls              int
	}{
		{name: "external, another order", original: run(1, `{"id":1}`, `{"id":2}`, `{"id":3}`), replayed: run(1, `{"id":3}`, `{"id":1}`, `{"id":2}`),
			want: []string{"same", `same {"id":3} {"id":3}`, `same {"id":1} {"id":1}`, `same {"id":2} {"id":2}`, "same"}},
		{name: "external, one call changed", original: run(1, `{"id":1}`, `{"id":2}`), replayed: run(2, `{"id":9}`, `{"id":1}`),
			want: []string{"same", `changed {"id":2} {"id":9}`, `same {"id":1} {"id":1}`, "same"}, calls: 1},
		{name: "defined, another order", original: run(0, `{"id":1}`, `{"id":2}`), replayed: run(0, `{"id":2}`, `{"id":1}`),
			want: []string{"same", `changed {"id":1} {"id":2}`, `changed {"id":2} {"id":1}`, "same"}, calls: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries, delta := replay.Diff(tc.original, tc.replayed)
			var got []string
			for _, e := range entries {
				if e.Original.Kind == agent.KindCall {
					got = append(got, e.Kind+" "+string(e.Original.Args)+" "+string(e.Replay.Args))
				} else {
					got = append(got, e.Kind)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if delta.ToolCallsChanged != tc.calls || delta.StepsChanged != tc.calls || delta.StepsAdded+delta.StepsRemoved != 0 {
				t.Errorf("delta = %+v, want %d calls changed", delta, tc.calls)
			}
		})
	}
}

func TestDiffComparesCompletions(t *testing.T) {
	completion := func(model, status, finish string) workflow.Step {
		return workflow.Step{Step: 1, Action: "solve", Kind: agent.KindCompletion, Status: status, Model: model, FinishReason: finish}
	}
	base := completion("gpt-4o-mini", agent.StatusOK, "stop")
	tests := []struct {
		name   string
		replay workflow.Step
		fields []string
	}{
		{name: "the same", replay: base},
		{name: "another model", replay: completion("claude", agent.StatusOK, "stop"), fields: []string{"model"}},
		{name: "another status", replay: completion("gpt-4o-mini", agent.StatusError, "stop"), fields: []string{"status"}},
		{name: "another finish reason", replay: completion("gpt-4o-mini", agent.StatusOK, "tool_calls"), fields: []string{"finish_reason"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries, delta := replay.Diff([]workflow.Step{base}, []workflow.Step{tc.replay})
			if len(entries) != 1 {
				t.Fatalf("%d entries, want the pair aligned", len(entries))
			}
			if diff := cmp.Diff(tc.fields, entries[0].Fields); diff != "" {
				t.Errorf("changed fields (-want +got):\n%s", diff)
			}
			if want := min(len(tc.fields), 1); delta.StepsChanged != want || delta.ToolCallsChanged != 0 {
				t.Errorf("delta = %+v, want %d changed and no call changed", delta, want)
			}
		})
	}
}
