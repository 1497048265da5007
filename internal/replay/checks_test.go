package replay

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

func TestCompileChecksNamesBadFields(t *testing.T) {
	two := 2.0
	s := Spec{
		Checks: []CheckSpec{
			{Name: "fine", Expr: "replay.outcome == original.outcome"},
			{Name: "broken", Expr: "replay.outcome =="},
			{Name: "fine", Expr: "true"},
			{Name: "not_builtin"},
			{Name: "number", Expr: "1 + 2"},
			{Name: "judge", Expr: "true"},
		},
		Judge: &JudgeSpec{Model: "", Rubric: "polite", PassScore: &two},
		Gate:  map[string]float64{"unknown": 0.5, "fine": 1.5},
	}
	_, err := CompileChecks(s, nil)
	p := problem.As(err)
	if p == nil || p.Code != problem.ValidationFailed {
		t.Fatalf("err = %v, want validation-failed", err)
	}
	var fields []string
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	want := []string{"checks[1].expr", "checks[2].name", "checks[3].expr", "checks[4].expr", "checks[5].name",
		"judge.model", "judge.pass_score", "judge", "gate.fine", "gate.unknown"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s\n%v", diff, p.Errors)
	}
}

// sideOf is a run with outcome and one call of pets.getPet with args.
func sideOf(outcome, args, output string) Side {
	s := Side{Outcome: outcome, Status: "completed", Steps: []StepView{}, ToolCalls: []CallView{}}
	if output != "" {
		s.Output = json.RawMessage(output)
	}
	if args != "" {
		s.ToolCalls = append(s.ToolCalls, CallView{Tool: "pets", Operation: "getPet", Args: json.RawMessage(args), Status: "ok"})
	}
	return s
}

func TestChecksRun(t *testing.T) {
	s := Spec{Checks: []CheckSpec{
		{Name: CheckOutcomeUnchanged}, {Name: CheckOutputUnchanged}, {Name: CheckSameToolCalls}, {Name: CheckExpectedOutcome},
		{Name: "few_calls", Expr: "size(replay.tool_calls) <= size(original.tool_calls)"},
		{Name: "expects_output", Expr: "expected != null && replay.output == expected.output"},
		{Name: "missing_key", Expr: "replay.nothing == 1"},
	}}
	c, err := CompileChecks(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		k    Case
		want map[string]string // check → passed, failed or errored
	}{
		{"same run", Case{Original: sideOf("cleared", `{"id":1,"b":2}`, `{"x":1}`), Replay: sideOf("cleared", `{"b":2, "id":1}`, `{"x": 1}`)},
			map[string]string{"outcome_unchanged": "passed", "output_unchanged": "passed", "same_tool_calls": "passed",
				"expected_outcome": "passed", "few_calls": "passed", "expects_output": "failed", "missing_key": "errored"}},
		{"changed", Case{Original: sideOf("escalated", `{"id":1}`, ""), Replay: sideOf("cleared", `{"id":2}`, `{"x":1}`),
			Expected: &Expectation{Outcome: "escalated", Output: json.RawMessage(`{"x":1}`)}},
			map[string]string{"outcome_unchanged": "failed", "output_unchanged": "failed", "same_tool_calls": "failed",
				"expected_outcome": "failed", "few_calls": "passed", "expects_output": "passed", "missing_key": "errored"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, r := range c.Run(t.Context(), tc.k) {
				got[r.Name] = r.Result()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	gate := Spec{Checks: []CheckSpec{{Name: "a"}, {Name: "b"}}, Gate: map[string]float64{"a": 0.9}}
	plain := Spec{Checks: []CheckSpec{{Name: "a"}, {Name: "b"}}}
	counts := map[string][3]int{"a": {9, 1, 0}, "b": {0, 10, 0}}
	for _, tc := range []struct {
		name, status string
		spec         Spec
		counts       map[string][3]int
		want         string
	}{
		{"gated check at its minimum; the ungated one does not count", BatchCompleted, gate, counts, VerdictPassed},
		{"gated check under its minimum", BatchCompleted, gate, map[string][3]int{"a": {8, 1, 1}}, VerdictFailed},
		{"no gate: any failure fails", BatchCompleted, plain, counts, VerdictFailed},
		{"no gate, all passed", BatchCompleted, plain, map[string][3]int{"a": {3, 0, 0}, "b": {3, 0, 0}}, VerdictPassed},
		{"cancelled", BatchCancelled, plain, map[string][3]int{"a": {3, 0, 0}, "b": {3, 0, 0}}, VerdictFailed},
	} {
		if got := Verdict(tc.status, tc.spec, tc.spec.Tally(tc.counts)); got != tc.want {
			t.Errorf("%s: verdict %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestChatJudge scores through a scripted chat model: the rubric goes in
// the system message, the answer's score and reason come back, the
// exchange and its tokens are recorded, and a score under pass_score fails.
func TestChatJudge(t *testing.T) {
	var asked []agent.ChatRequest
	answers := []string{`{"score": 0.9, "reason": "kept the customer informed"}`, "```json\n{\"score\": 0.4, \"reason\": \"rude\"}\n```", `not json`}
	judge := ChatJudge{Complete: func(_ context.Context, tenant string, req agent.ChatRequest) (agent.ChatResponse, error) {
		if tenant != "acme" {
			return agent.ChatResponse{}, errors.New("wrong tenant " + tenant)
		}
		asked = append(asked, req)
		a := answers[len(asked)-1]
		return agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: a},
			Usage: &agent.Usage{InputTokens: 120, OutputTokens: 12}}, nil
	}}
	pass := 0.5
	c, err := CompileChecks(Spec{Judge: &JudgeSpec{Model: "judge-model", Rubric: "Be polite.", PassScore: &pass}}, judge)
	if err != nil {
		t.Fatal(err)
	}
	k := Case{Tenant: "acme", Original: sideOf("cleared", "", ""), Replay: sideOf("cleared", "", "")}
	var got []CheckResult
	for range answers {
		got = append(got, c.Run(t.Context(), k)...)
	}
	if r := got[0]; !r.Passed || *r.Score != 0.9 || r.Reason != "kept the customer informed" || r.Judge == nil ||
		r.Judge.Usage.InputTokens != 120 || !strings.Contains(string(r.Judge.Request), "Be polite.") {
		t.Errorf("first result %+v", r)
	}
	if r := got[1]; r.Passed || *r.Score != 0.4 || r.Result() != ResultFailed {
		t.Errorf("second result %+v, want failed at 0.4", r)
	}
	if r := got[2]; r.Result() != ResultErrored || r.Judge == nil || len(r.Judge.Response) == 0 {
		t.Errorf("third result %+v, want errored with the exchange kept", r)
	}
	if asked[0].Model != "judge-model" || asked[0].Messages[0].Role != agent.RoleSystem || len(asked[0].OutputSchema) == 0 {
		t.Errorf("judge request %+v", asked[0])
	}
	if names := c.Spec().Names(); !slices.Equal(names, []string{CheckJudge}) {
		t.Errorf("names %v", names)
	}
}

type lookupFunc func(ctx context.Context, tenant, name string) (*model.Model, error)

func (f lookupFunc) Model(ctx context.Context, tenant, name string) (*model.Model, error) {
	return f(ctx, tenant, name)
}

type liveFunc func(ctx context.Context, tenant, agent string, req agent.ChatRequest) (agent.ChatResponse, *model.Model, error)

func (f liveFunc) LiveCompletion(ctx context.Context, tenant, agent string, req agent.ChatRequest) (agent.ChatResponse, *model.Model, error) {
	return f(ctx, tenant, agent, req)
}

// TestModelJudge asks the tenant's registered model through its client,
// and CheckModel tells a model the tenant lacks.
func TestModelJudge(t *testing.T) {
	models := lookupFunc(func(_ context.Context, tenant, name string) (*model.Model, error) {
		if tenant != "acme" || name != "judge-1" {
			return nil, problem.New(problem.NotFound, "no model %s", name)
		}
		return &model.Model{Tenant: tenant, Name: name, Model: "gpt-test"}, nil
	})
	var used []string
	live := liveFunc(func(ctx context.Context, tenant, agentName string, req agent.ChatRequest) (agent.ChatResponse, *model.Model, error) {
		m, err := models.Model(ctx, tenant, req.Model)
		if err != nil {
			return agent.ChatResponse{}, nil, err
		}
		used = append(used, m.Model+"/"+req.Model+"/"+agentName)
		return agent.ChatResponse{Message: agent.ChatMessage{Content: `{"score": 1, "reason": "fine"}`}}, m, nil
	})
	j := ModelJudge(models, live)
	ans, err := j.Judge(t.Context(), JudgeRequest{Tenant: "acme", Model: "judge-1", Rubric: "r"})
	if err != nil || ans.Score != 1 || !slices.Equal(used, []string{"gpt-test/judge-1/" + JudgeAgent}) {
		t.Errorf("judge: %+v %v, clients used %v", ans, err, used)
	}
	if err := j.CheckModel(t.Context(), "acme", "judge-1"); err != nil {
		t.Errorf("check a registered model: %v", err)
	}
	if err := j.CheckModel(t.Context(), "acme", "nope"); !problem.Is(err, problem.NotFound) {
		t.Errorf("check a missing model: %v", err)
	}
	if _, err := j.Judge(t.Context(), JudgeRequest{Tenant: "globex", Model: "judge-1"}); !problem.Is(err, problem.NotFound) {
		t.Errorf("another tenant's judge: %v", err)
	}
}

// TestChecksReadUsage: a check may bound what the replay's completions cost
// against the original's, from the usage CaseOf takes from the replay.
func TestChecksReadUsage(t *testing.T) {
	c, err := CompileChecks(Spec{Checks: []CheckSpec{
		{Name: "tokens", Expr: "replay.usage.input_tokens + replay.usage.output_tokens <= 1.2 * double(original.usage.input_tokens + original.usage.output_tokens)"},
		{Name: "cost", Expr: "replay.usage.cost.amount <= original.usage.cost.amount"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	usd := func(a float64) *Cost { return &Cost{Amount: a, Currency: "USD"} }
	rp := &Replay{Usage: Usages{
		Original: Usage{InputTokens: 100, OutputTokens: 20, Completions: 2, Cost: usd(0.002)},
		Replay:   Usage{InputTokens: 130, OutputTokens: 30, Completions: 3, Cost: usd(0.0015)},
	}}
	got := map[string]string{}
	for _, r := range c.Run(t.Context(), CaseOf(&workflow.Workflow{}, rp, nil)) {
		got[r.Name] = r.Result()
	}
	if diff := cmp.Diff(map[string]string{"tokens": ResultFailed, "cost": ResultPassed}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// TestSameToolCallsOfParallelCalls: same_tool_calls reads the calls as the
// step diff pairs them, so an external agent's parallel calls made in
// another order are the same calls; a defined agent's are not.
func TestSameToolCallsOfParallelCalls(t *testing.T) {
	c, err := CompileChecks(Spec{Checks: []CheckSpec{{Name: CheckSameToolCalls}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := func(attempt int, ids ...string) []workflow.Step {
		steps := []workflow.Step{{Action: agent.KindCompletion, Kind: agent.KindCompletion, Status: agent.StatusOK, Attempt: attempt}}
		for _, id := range ids {
			steps = append(steps, workflow.Step{Action: agent.KindCall, Kind: agent.KindCall, Status: agent.StatusOK, Attempt: attempt,
				Tool: "ledger", Operation: "get", Args: json.RawMessage(`{"id":"` + id + `"}`)})
		}
		return steps
	}
	for _, tc := range []struct {
		attempt int
		want    string
	}{{1, ResultPassed}, {0, ResultFailed}} {
		rp := &Replay{}
		rp.Steps, rp.Delta = Diff(run(tc.attempt, "tx-1", "tx-2"), run(tc.attempt, "tx-2", "tx-1"))
		if got := c.Run(t.Context(), CaseOf(&workflow.Workflow{}, rp, nil))[0].Result(); got != tc.want {
			t.Errorf("attempt %d: same_tool_calls %s, want %s", tc.attempt, got, tc.want)
		}
	}
}
