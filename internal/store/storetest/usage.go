package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// completion is the n-th completion of w, recorded at base, of no usage.
func completion(w *workflow.Workflow, n int, data string) *workflow.Completion {
	return &workflow.Completion{WorkflowID: w.ID, N: n, Step: n, Tenant: w.Tenant, Agent: w.Agent,
		AgentVersion: w.AgentVersion, Model: "default", CreatedAt: base, Data: json.RawMessage(data)}
}

// testCompletionUsage records completions of several tenants, agents,
// models and days and reads them back: by workflow, as a model's tokens of
// a day, and as usage grouped each way, each counted once.
func testCompletionUsage(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	day2 := base.Add(24 * time.Hour)
	triage := create(t, s, newWorkflow("acme", "triage", "replica-a", 0))
	refund := create(t, s, newWorkflow("acme", "refund", "replica-a", 1))
	other := create(t, s, newWorkflow("globex", "triage", "replica-a", 2))
	type rec struct {
		w        *workflow.Workflow
		n        int
		model    string
		in, out  int64
		cost     float64
		currency string
		at       time.Time
	}
	recs := []rec{
		{triage, 1, "gpt", 100, 10, 0.5, "USD", base},
		{triage, 2, "gpt", 200, 20, 1, "USD", base},
		{triage, 3, "claude", 300, 30, 2, "EUR", day2},
		{refund, 1, "gpt", 1000, 100, 4, "USD", base},
		{refund, 2, "local", 7, 3, 0, "", base},
		{other, 1, "gpt", 50000, 5000, 100, "USD", base},
	}
	var want []workflow.Completion
	for _, r := range recs {
		c := completion(r.w, r.n, fmt.Sprintf(`{"request_sha256": "h%d", "response": {"message": {"role": "assistant"}}}`, r.n))
		c.Step, c.Model, c.ProviderModel, c.FinishReason = r.n*2, r.model, r.model+"-2026", "stop"
		c.InputTokens, c.OutputTokens, c.Cost, c.Currency, c.CreatedAt = r.in, r.out, r.cost, r.currency, r.at.Add(999)
		// Its step is another than the steps below, which are checked whole.
		must(t, s.AppendSteps(ctx, "replica-a", answered(c, 10+c.Step)), "record completion")
		if r.w == triage {
			want = append(want, *c)
		}
	}
	// Recorded again (a resume that raced its record): kept once, counted once.
	again := completion(triage, 1, `{"request_sha256": "other"}`)
	again.Model, again.InputTokens = "gpt", 99999
	must(t, s.AppendSteps(ctx, "replica-a", answered(again, 1)), "record a completion again")
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-b", answered(&workflow.Completion{WorkflowID: triage.ID, N: 9, Step: 9,
		Tenant: "acme", Agent: "triage", Model: "gpt", InputTokens: 1, CreatedAt: base, Data: json.RawMessage(`{}`)}, 9)), "another owner's completion")

	got, err := s.WorkflowCompletions(ctx, triage.ID)
	must(t, err, "workflow completions")
	if diff := cmp.Diff(want, got, cmp.Transformer("json", func(m json.RawMessage) any {
		var v any
		_ = json.Unmarshal(m, &v)
		return v
	})); diff != "" {
		t.Errorf("WorkflowCompletions (-want +got):\n%s", diff)
	}
	if !got[0].CreatedAt.Equal(base) {
		t.Errorf("created_at = %v, want %v (µs)", got[0].CreatedAt, base)
	}
	// Two currencies: the tokens and completions summed, no cost.
	for _, tc := range []struct {
		w    *workflow.Workflow
		want workflow.CompletionTotals
	}{
		{triage, workflow.CompletionTotals{InputTokens: 600, OutputTokens: 60, Completions: 3}},
		{refund, workflow.CompletionTotals{InputTokens: 1007, OutputTokens: 103, Completions: 2, Cost: &workflow.Cost{Amount: 4, Currency: "USD"}}},
		{create(t, s, newWorkflow("acme", "triage", "replica-a", 3)), workflow.CompletionTotals{}},
	} {
		usage, err := s.WorkflowUsage(ctx, tc.w.ID)
		must(t, err, "workflow usage")
		if diff := cmp.Diff(tc.want, usage); diff != "" {
			t.Errorf("WorkflowUsage of %s (-want +got):\n%s", tc.w.Agent, diff)
		}
		comps, err := s.WorkflowCompletions(ctx, tc.w.ID)
		must(t, err, "workflow completions")
		if diff := cmp.Diff(workflow.TotalCompletions(comps), usage); diff != "" {
			t.Errorf("WorkflowUsage of %s is not TotalCompletions of its completions (-want +got):\n%s", tc.w.Agent, diff)
		}
	}

	for _, tc := range []struct {
		tenant, model string
		day           time.Time
		want          int64
	}{{"acme", "gpt", base, 1430}, {"acme", "gpt", day2, 0}, {"acme", "claude", day2, 330},
		{"acme", "nope", base, 0}, {"globex", "gpt", base.Add(time.Hour), 55000}, {"initech", "gpt", base, 0}} {
		n, err := s.TokensToday(ctx, tc.tenant, tc.model, tc.day)
		must(t, err, "tokens today")
		if n != tc.want {
			t.Errorf("TokensToday(%s, %s, %s) = %d, want %d", tc.tenant, tc.model, workflow.Day(tc.day), n, tc.want)
		}
	}

	both := workflow.UsageQuery{Since: base, Until: day2}
	usd := func(a float64) []workflow.Cost { return []workflow.Cost{{Amount: a, Currency: "USD"}} }
	for _, tc := range []struct {
		by   string
		q    workflow.UsageQuery
		want []workflow.UsageGroup
	}{
		{workflow.GroupByAgent, both, []workflow.UsageGroup{
			{Key: "refund", InputTokens: 1007, OutputTokens: 103, Completions: 2, Cost: usd(4)},
			{Key: "triage", InputTokens: 600, OutputTokens: 60, Completions: 3,
				Cost: []workflow.Cost{{Amount: 2, Currency: "EUR"}, {Amount: 1.5, Currency: "USD"}}},
		}},
		{workflow.GroupByModel, both, []workflow.UsageGroup{
			{Key: "claude", InputTokens: 300, OutputTokens: 30, Completions: 1, Cost: []workflow.Cost{{Amount: 2, Currency: "EUR"}}},
			{Key: "gpt", InputTokens: 1300, OutputTokens: 130, Completions: 3, Cost: usd(5.5)},
			{Key: "local", InputTokens: 7, OutputTokens: 3, Completions: 1},
		}},
		{workflow.GroupByDay, both, []workflow.UsageGroup{
			{Key: workflow.Day(base), InputTokens: 1307, OutputTokens: 133, Completions: 4, Cost: usd(5.5)},
			{Key: workflow.Day(day2), InputTokens: 300, OutputTokens: 30, Completions: 1, Cost: []workflow.Cost{{Amount: 2, Currency: "EUR"}}},
		}},
		{workflow.GroupByDay, workflow.UsageQuery{Since: day2, Until: day2.Add(48 * time.Hour)}, []workflow.UsageGroup{
			{Key: workflow.Day(day2), InputTokens: 300, OutputTokens: 30, Completions: 1, Cost: []workflow.Cost{{Amount: 2, Currency: "EUR"}}},
		}},
		{workflow.GroupByAgent, workflow.UsageQuery{Since: base.Add(-48 * time.Hour), Until: base.Add(-24 * time.Hour)}, nil},
	} {
		tc.q.GroupBy = tc.by
		got, err := s.Usage(ctx, "acme", tc.q)
		must(t, err, "usage")
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("Usage by %s from %s (-want +got):\n%s", tc.by, workflow.Day(tc.q.Since), diff)
		}
	}

	// A completion's step keeps its model, tokens, finish reason and error code.
	st := &workflow.Step{WorkflowID: refund.ID, Seq: 1, Step: 1, Action: "solve", Kind: agent.KindCompletion,
		Status: agent.StatusOK, Model: "gpt", Usage: &agent.Usage{InputTokens: 12, OutputTokens: 0},
		FinishReason: "tool_calls", StartedAt: base}
	failed := &workflow.Step{WorkflowID: refund.ID, Seq: 2, Step: 2, Action: "solve", Kind: agent.KindCompletion,
		Status: agent.StatusError, Model: "gpt", Error: "the model answered 500: overloaded", ErrorCode: "llm_error", StartedAt: base}
	must(t, s.AppendSteps(ctx, "replica-a", written(st), written(failed)), "append completion steps")
	steps, err := s.Steps(ctx, refund.ID, 0)
	must(t, err, "steps")
	if len(steps) > 2 {
		steps = steps[:2] // the steps stored with the completions above follow
	}
	if diff := cmp.Diff([]workflow.Step{*st, *failed}, steps); diff != "" {
		t.Errorf("completion steps (-want +got):\n%s", diff)
	}
}

// testRecordUsage: completions made outside any workflow (a live what-if
// replay's, a judge's) count in the tenant's usage and budgets, added to
// those of workflows on the same day, agent and model.
func testRecordUsage(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	wf := create(t, s, newWorkflow("acme", "triage", "replica-a", 0))
	c := completion(wf, 1, `{"request_sha256": "h1", "response": {"message": {"role": "assistant"}}}`)
	c.Model, c.InputTokens, c.OutputTokens, c.Cost, c.Currency, c.CreatedAt = "gpt", 100, 10, 0.5, "USD", base
	must(t, s.AppendSteps(ctx, "replica-a", answered(c, c.Step)), "record completion")
	for _, u := range []workflow.UsageRecord{
		{Tenant: "acme", Agent: "triage", Model: "gpt", InputTokens: 40, OutputTokens: 4, Cost: 0.25, Currency: "USD", At: base.Add(time.Hour)},
		{Tenant: "acme", Agent: "(judge)", Model: "gpt", InputTokens: 7, OutputTokens: 3, At: base},
		{Tenant: "globex", Agent: "triage", Model: "gpt", InputTokens: 1000, OutputTokens: 1, At: base},
	} {
		must(t, s.RecordUsage(ctx, u), "record usage")
	}
	n, err := s.TokensToday(ctx, "acme", "gpt", base)
	must(t, err, "tokens today")
	if n != 164 {
		t.Errorf("TokensToday = %d, want 164: the workflow's 110, the replay's 44 and the judge's 10", n)
	}
	got, err := s.Usage(ctx, "acme", workflow.UsageQuery{Since: base, Until: base, GroupBy: workflow.GroupByAgent})
	must(t, err, "usage")
	want := []workflow.UsageGroup{
		{Key: "(judge)", InputTokens: 7, OutputTokens: 3, Completions: 1},
		{Key: "triage", InputTokens: 140, OutputTokens: 14, Completions: 2, Cost: []workflow.Cost{{Amount: 0.75, Currency: "USD"}}},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Usage by agent (-want +got):\n%s", diff)
	}
}

// testStepCompletion: a completion written with its step is stored and
// counted once in the same transaction, and, like the step, only under the
// workflow's lease.
func testStepCompletion(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "triage", "replica-a", 0))
	c := completion(w, 1, `{"request_sha256": "h1"}`)
	c.Model, c.InputTokens, c.OutputTokens, c.CreatedAt = "gpt", 100, 10, base.Add(999)
	sw := written(newStep(w.ID, 1))
	sw.Completion = c
	must(t, s.AppendSteps(ctx, "replica-a", sw), "append a step with its completion")
	again := written(newStep(w.ID, 2))
	again.Completion = completion(w, 1, `{"request_sha256": "other"}`)
	again.Completion.Model, again.Completion.InputTokens = "gpt", 99999
	must(t, s.AppendSteps(ctx, "replica-a", again), "append a step with a completion recorded before")
	lost := written(newStep(w.ID, 3))
	lost.Completion = completion(w, 2, `{}`)
	lost.Completion.Model, lost.Completion.InputTokens = "gpt", 7
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-b", lost), "another owner's step and completion")

	got, err := s.WorkflowCompletions(ctx, w.ID)
	must(t, err, "workflow completions")
	if len(got) != 1 || got[0].N != 1 || got[0].InputTokens != 100 || !got[0].CreatedAt.Equal(base) {
		t.Errorf("WorkflowCompletions = %+v; want completion 1 alone, of 100 input tokens, created at %v (µs)", got, base)
	}
	if n, err := s.TokensToday(ctx, "acme", "gpt", base); err != nil || n != 110 {
		t.Errorf("TokensToday = %d, %v; want 110 (counted once)", n, err)
	}
	if steps, err := s.Steps(ctx, w.ID, 0); err != nil || len(steps) != 2 {
		t.Errorf("Steps = %d, %v; want 2", len(steps), err)
	}
	fin := *w
	fin.Status, fin.Outcome = workflow.Completed, "answered"
	last := written(newStep(w.ID, 3))
	last.Completion = completion(w, 2, `{}`)
	last.Completion.Model, last.Completion.InputTokens = "gpt", 5
	must(t, s.FinishWorkflow(ctx, "replica-a", &fin, nil, last), "finish with a last step and its completion")
	if n, err := s.TokensToday(ctx, "acme", "gpt", base); err != nil || n != 115 {
		t.Errorf("TokensToday after finish = %d, %v; want 115", n, err)
	}
}
