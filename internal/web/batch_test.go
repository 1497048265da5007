package web

import (
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/replay"
)

// TestRenderBatchChecks renders a finished batch with a gate, a replay
// that failed two checks (one with a judge's score and reason, one that
// errored) and the tokens and cost of both sides.
func TestRenderBatchChecks(t *testing.T) {
	b := replay.NewBatch("acme", "triage@2", 2, replay.Creator{}, time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC))
	b.Status, b.Done, b.Dataset = replay.BatchCompleted, 2, "suite@3"
	b.Spec = replay.Spec{Checks: []replay.CheckSpec{{Name: "outcome_unchanged"}, {Name: "<b>odd</b>", Expr: "true"}},
		Judge: &replay.JudgeSpec{Model: "j", Rubric: "r"}, Gate: map[string]float64{"judge": 0.75}}
	b.CountChecks([]replay.CheckCount{{Name: "outcome_unchanged", Result: replay.ResultPassed, Count: 2},
		{Name: "judge", Result: replay.ResultPassed, Count: 1}, {Name: "judge", Result: replay.ResultFailed, Count: 1},
		{Name: "<b>odd</b>", Result: replay.ResultErrored, Count: 1}, {Name: "<b>odd</b>", Result: replay.ResultPassed, Count: 1}})
	score := 0.25
	failed := &replay.Replay{ID: "rpl_1", WorkflowID: "wf_1", OriginalOutcome: "cleared", ReplayOutcome: "cleared",
		Checks: []replay.CheckResult{{Name: "outcome_unchanged", Passed: true},
			{Name: "<b>odd</b>", Error: "evaluate: no such key: x"},
			{Name: "judge", Score: &score, Reason: "skipped the <script> step"}}}
	b.Mode = replay.Mode{LLM: replay.LLMLive}
	b.Usage = replay.Usages{
		Original: replay.Usage{InputTokens: 1000, OutputTokens: 200, Completions: 4, Cost: &replay.Cost{Amount: 0.02, Currency: "USD"}},
		Replay:   replay.Usage{InputTokens: 800, OutputTokens: 100, Completions: 3, Cost: &replay.Cost{Amount: 0.03, Currency: "USD"}},
	}
	var out strings.Builder
	changed := &replay.Replay{ID: "rpl_2", WorkflowID: "wf_2", OriginalVersion: "triage@1", OriginalOutcome: "cleared", ReplayOutcome: "escalated"}
	err := RenderBatch(&out, BatchPage{Batch: b, Failed: []*replay.Replay{failed}, Changed: []*replay.Replay{changed},
		Link: func(id string) string { return "/replays/" + id + "?sig=x" }})
	if err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{
		`id="batch-verdict">failed<`, `id="batch-dataset">suite@3<`,
		`<td class="pass-rate">50%</td>`, `≥ 75% <strong>missed</strong>`,
		`href="/replays/rpl_1?sig=x"`, `<li data-check="judge"><code>judge</code> (score 0.25): skipped the &lt;script&gt; step</li>`,
		`no such key: x`, `&lt;b&gt;odd&lt;/b&gt;`,
		`id="batch-mode">dry runs, completions requested live, tool answers from the record<`,
		`id="tokens-change">-300<`, `id="cost-change">&#43;0.0100 (&#43;50%)<`,
		`<td><code>triage@1</code> <a class="version-diff" href="/console/agents/triage/diff?from=1&amp;to=2">diff</a></td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, `data-check="outcome_unchanged"><code>outcome_unchanged`) {
		t.Error("a passed check is listed among the failures")
	}
	if strings.Contains(page, "<b>odd</b>") || strings.Contains(page, "<script>") {
		t.Error("a check name or reason is not escaped")
	}
}
