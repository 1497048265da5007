package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
)

// fraudOutcome is the fraud-triage agent's outcome for an amount when it
// escalates above threshold; the financial policy denies a case above 5,000.
func fraudOutcome(amount, threshold float64) string {
	switch {
	case amount <= threshold:
		return "cleared"
	case amount > 5000:
		return "denied"
	}
	return "escalated"
}

type checkTotal struct {
	Name     string   `json:"name"`
	Passed   int      `json:"passed"`
	Failed   int      `json:"failed"`
	Errored  int      `json:"errored"`
	PassRate float64  `json:"pass_rate"`
	Gate     *float64 `json:"gate"`
}

type checkedBatch struct {
	batchResult
	Dataset string       `json:"dataset"`
	Checks  []checkTotal `json:"checks"`
	Verdict string       `json:"verdict"`
}

type checkedReplay struct {
	WorkflowID      string `json:"workflow_id"`
	OriginalOutcome string `json:"original_outcome"`
	ReplayOutcome   string `json:"replay_outcome"`
	ViewerURL       string `json:"viewer_url"`
	Checks          []struct {
		Name   string   `json:"name"`
		Passed bool     `json:"passed"`
		Error  string   `json:"error"`
		Score  *float64 `json:"score"`
		Reason string   `json:"reason"`
		Judge  *struct {
			Model   string          `json:"model"`
			Request json.RawMessage `json:"request"`
			Usage   *agent.Usage    `json:"usage"`
		} `json:"judge"`
	} `json:"checks"`
}

func getCheckedBatch(t *testing.T, h *harness, tok, id string) checkedBatch {
	t.Helper()
	waitBatch(t, h, tok, id)
	var b checkedBatch
	h.do("GET", "/v1/replay-batches/"+id, tok, nil).json(t, &b)
	return b
}

// batchReplays pages all of a batch's replays matching query (failed=true…).
func batchReplays(t *testing.T, h *harness, tok, id, query string) []checkedReplay {
	t.Helper()
	return batchReplaysAs[checkedReplay](t, h, tok, id, query)
}

// batchReplaysAs pages all of a batch's replays matching query, each
// decoded as a T.
func batchReplaysAs[T any](t *testing.T, h *harness, tok, id, query string) []T {
	t.Helper()
	var all []T
	cursor := ""
	for range 100 {
		var pg struct {
			Replays    []T     `json:"replays"`
			NextCursor *string `json:"next_cursor"`
		}
		r := h.do("GET", "/v1/replay-batches/"+id+"/replays?limit=200&"+query+"&cursor="+cursor, tok, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("batch replays: %d %s", r.Status, r.Body)
		}
		r.json(t, &pg)
		all = append(all, pg.Replays...)
		if pg.NextCursor == nil {
			return all
		}
		cursor = *pg.NextCursor
	}
	t.Fatal("too many pages")
	return nil
}

// TestReplayBatchChecksAndGate replays 500 workflows of v1 against v2 with
// two built-in checks, one CEL check and a gate, and compares the batch's
// totals and verdict with those computed here from the amounts.
func TestReplayBatchChecksAndGate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)

	amounts := []float64{20, 1200, 3000, 7000, 999, 5000, 5001}
	const n = 500
	type tally struct{ passed, failed int }
	want := map[string]*tally{"outcome_unchanged": {}, "same_tool_calls": {}, "no_denial": {}}
	count := func(name string, ok bool) {
		if ok {
			want[name].passed++
		} else {
			want[name].failed++
		}
	}
	failedAny := 0
	for i := range n {
		id := fmt.Sprintf("tx_%03d", i)
		a := amounts[i%len(amounts)]
		w.amounts.Store(id, a)
		w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": id}})
		from, to := fraudOutcome(a, 1000), fraudOutcome(a, 5000)
		// A case is opened (and denied above 5,000) when the amount is over
		// the threshold: the calls are the same when both runs open one or
		// neither does.
		sameCalls := (a > 1000) == (a > 5000)
		count("outcome_unchanged", from == to)
		count("same_tool_calls", sameCalls)
		count("no_denial", to != "denied")
		if from != to || !sameCalls || to == "denied" {
			failedAny++
		}
	}
	gate := map[string]float64{"outcome_unchanged": 0.5, "no_denial": 0.8}
	wantVerdict := "passed"
	for name, min := range gate {
		if tl := want[name]; float64(tl.passed)/float64(tl.passed+tl.failed) < min {
			wantVerdict = "failed"
		}
	}

	r := h.do("POST", "/v1/replay-batches", tok, map[string]any{
		"target_agent_version": "fraud-triage@2",
		"workflows":            map[string]any{"agent": "fraud-triage", "limit": n},
		"checks": []map[string]any{
			{"name": "outcome_unchanged"}, {"name": "same_tool_calls"},
			{"name": "no_denial", "expr": `replay.outcome != "denied" && replay.status == "completed"`},
		},
		"gate": gate,
	})
	if r.Status != http.StatusAccepted {
		t.Fatalf("create batch: %d %s", r.Status, r.Body)
	}
	var created checkedBatch
	r.json(t, &created)
	b := getCheckedBatch(t, h, tok, created.ID)
	if b.Status != "completed" || b.Done != n {
		t.Fatalf("batch %+v", b)
	}
	if b.Verdict != wantVerdict {
		t.Errorf("verdict %q, want %q", b.Verdict, wantVerdict)
	}
	if len(b.Checks) != 3 {
		t.Fatalf("checks %+v", b.Checks)
	}
	for _, c := range b.Checks {
		tl := want[c.Name]
		rate := float64(tl.passed) / n
		if c.Passed != tl.passed || c.Failed != tl.failed || c.Errored != 0 || math.Abs(c.PassRate-rate) > 1e-9 {
			t.Errorf("check %s: %d passed, %d failed, %d errored, rate %v; want %d, %d, 0, %v", c.Name, c.Passed, c.Failed, c.Errored, c.PassRate, tl.passed, tl.failed, rate)
		}
		if g, gated := gate[c.Name]; gated != (c.Gate != nil) || (gated && *c.Gate != g) {
			t.Errorf("check %s: gate %v, want %v", c.Name, c.Gate, g)
		}
	}

	failed := batchReplays(t, h, tok, b.ID, "failed=true")
	if len(failed) != failedAny {
		t.Errorf("%d replays failed a check, want %d", len(failed), failedAny)
	}
	for _, rp := range failed[:min(5, len(failed))] {
		if len(rp.Checks) != 3 {
			t.Errorf("replay of %s carries checks %+v", rp.WorkflowID, rp.Checks)
		}
	}
	page := h.do("GET", strings.TrimPrefix(b.ViewerURL, h.URL), "", nil)
	for _, s := range []string{`id="batch-verdict">` + wantVerdict, `data-check="no_denial"`, `id="failed-replays"`} {
		if !strings.Contains(string(page.Body), s) {
			t.Errorf("report page lacks %s", s)
		}
	}
}

// TestReplayBatchChecksValidation refuses bad checks and gates at
// submission, naming each field.
func TestReplayBatchChecksValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", replayScopes)
	w.amounts.Store("tx_1", 20.0)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1"}})
	ids := []string{wf["workflow_id"].(string)}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		fields []string
	}{
		{"bad expression", map[string]any{"checks": []map[string]any{{"name": "ok", "expr": "replay.outcome =="}}}, []string{"checks[0].expr"}},
		{"not a bool", map[string]any{"checks": []map[string]any{{"name": "ok", "expr": "1 + 1"}}}, []string{"checks[0].expr"}},
		{"duplicate", map[string]any{"checks": []map[string]any{{"name": "outcome_unchanged"}, {"name": "outcome_unchanged"}}}, []string{"checks[1].name"}},
		{"unknown built-in", map[string]any{"checks": []map[string]any{{"name": "magic"}}}, []string{"checks[0].expr"}},
		{"gate on no check", map[string]any{"checks": []map[string]any{{"name": "outcome_unchanged"}}, "gate": map[string]any{"nope": 0.5}}, []string{"gate.nope"}},
		{"gate over 1", map[string]any{"checks": []map[string]any{{"name": "outcome_unchanged"}}, "gate": map[string]any{"outcome_unchanged": 2}}, []string{"gate.outcome_unchanged"}},
		{"judge without a judge", map[string]any{"judge": map[string]any{"model": "m", "rubric": "r"}}, []string{"judge"}},
		{"dataset and ids", map[string]any{"dataset": "suite"}, []string{"dataset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"target_agent_version": "fraud-triage@1", "workflow_ids": ids}
			for k, v := range tc.body {
				body[k] = v
			}
			r := h.do("POST", "/v1/replay-batches", tok, body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			for _, f := range tc.fields {
				if !strings.Contains(string(r.Body), `"field":"`+f+`"`) {
					t.Errorf("%s not named: %s", f, r.Body)
				}
			}
		})
	}
}

// TestDatasetsDriveExpectedOutcome makes a dataset with expectations, its
// next version, refuses bad ones, and replays it: expected_outcome passes
// where the replay meets the expectation or there is none.
func TestDatasetsDriveExpectedOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	amounts := []float64{20, 1200, 3000, 7000, 999}
	var ids []string
	for i, a := range amounts {
		id := fmt.Sprintf("tx_%d", i)
		w.amounts.Store(id, a)
		wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": id}})
		ids = append(ids, wf["workflow_id"].(string))
	}
	// v2 clears 1,200 and 3,000; the dataset expects the output of 20
	// (an outcome check passes without an expected outcome), escalated of
	// 1,200 (fails), cleared of 3,000 and denied of 7,000 (pass).
	exp := map[string]any{
		ids[0]: map[string]any{"output": map[string]any{"queue": "standard", "score": 0.12}},
		ids[1]: map[string]any{"outcome": "escalated"},
		ids[2]: map[string]any{"outcome": "cleared"},
		ids[3]: map[string]any{"outcome": "denied"},
	}
	r := h.do("POST", "/v1/datasets", tok, map[string]any{"name": "triage-suite", "description": "amounts around the thresholds",
		"workflow_ids": ids[:4], "expectations": exp})
	var d struct {
		ID           string                     `json:"id"`
		Version      int                        `json:"version"`
		Ref          string                     `json:"ref"`
		WorkflowIDs  []string                   `json:"workflow_ids"`
		Count        int                        `json:"workflow_count"`
		Expectations map[string]json.RawMessage `json:"expectations"`
	}
	r.json(t, &d)
	if r.Status != http.StatusCreated || !strings.HasPrefix(d.ID, "ds_") || d.Version != 1 || d.Ref != "triage-suite@1" ||
		d.Count != 4 || len(d.Expectations) != 4 || r.Header.Get("Location") != "/v1/datasets/triage-suite@1" {
		t.Fatalf("create dataset: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/datasets", tok, map[string]any{"name": "triage-suite", "workflow_ids": ids[:1]}); r.Status != http.StatusConflict {
		t.Errorf("the same name again: %d %s", r.Status, r.Body)
	}
	other := h.token("globex", replayScopes)
	for _, tc := range []struct {
		name, tok string
		body      map[string]any
		field     string
	}{
		{"unknown workflow", tok, map[string]any{"name": "x", "workflow_ids": []string{ids[0], "wf_nope"}}, "workflow_ids[1]"},
		{"another tenant's workflows", other, map[string]any{"name": "x", "workflow_ids": ids[:1]}, "workflow_ids[0]"},
		{"expectation outside the set", tok, map[string]any{"name": "x", "workflow_ids": ids[:1],
			"expectations": map[string]any{ids[2]: map[string]any{"outcome": "cleared"}}}, "expectations." + ids[2]},
		{"bad name", tok, map[string]any{"name": "Not A Name", "workflow_ids": ids[:1]}, "name"},
		{"no workflows", tok, map[string]any{"name": "x"}, "workflows"},
	} {
		r := h.do("POST", "/v1/datasets", tc.tok, tc.body)
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), `"field":"`+tc.field+`"`) {
			t.Errorf("%s: %d %s, want 422 naming %s", tc.name, r.Status, r.Body, tc.field)
		}
	}

	// Version 2 holds every workflow, by filter, without expectations; the
	// same request again with its key is answered, not stored again.
	for range 2 {
		r = h.do("PUT", "/v1/datasets/triage-suite", tok, map[string]any{"workflows": map[string]any{"agent": "fraud-triage"}},
			"Idempotency-Key", "suite-v2")
		r.json(t, &d)
		if r.Status != http.StatusCreated || d.Version != 2 || d.Count != 5 {
			t.Fatalf("next version: %d %s", r.Status, r.Body)
		}
	}
	if r := h.do("PUT", "/v1/datasets/nothing", tok, map[string]any{"workflow_ids": ids[:1]}); r.Status != http.StatusNotFound {
		t.Errorf("next version of nothing: %d %s", r.Status, r.Body)
	}
	r = h.do("GET", "/v1/datasets/triage-suite@1", tok, nil)
	r.json(t, &d)
	if r.Status != http.StatusOK || d.Version != 1 || len(d.WorkflowIDs) != 4 || d.WorkflowIDs[3] != ids[3] || len(d.Expectations) != 4 {
		t.Errorf("GET version 1: %d %s", r.Status, r.Body)
	}
	var list struct {
		Datasets []struct {
			Ref string `json:"ref"`
		} `json:"datasets"`
	}
	h.do("GET", "/v1/datasets", tok, nil).json(t, &list)
	if len(list.Datasets) != 1 || list.Datasets[0].Ref != "triage-suite@2" {
		t.Errorf("list %+v", list)
	}
	if r := h.do("GET", "/v1/datasets/triage-suite", other, nil); r.Status != http.StatusNotFound {
		t.Errorf("another tenant's dataset: %d", r.Status)
	}

	r = h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "fraud-triage@2", "dataset": "triage-suite@1",
		"checks": []map[string]any{{"name": "expected_outcome"}, {"name": "expected_output", "expr": "expected == null || expected.output == null || replay.output == expected.output"}}})
	var created checkedBatch
	r.json(t, &created)
	if r.Status != http.StatusAccepted || created.Total != 4 || created.Dataset != "triage-suite@1" {
		t.Fatalf("batch of a dataset: %d %s", r.Status, r.Body)
	}
	b := getCheckedBatch(t, h, tok, created.ID)
	if len(b.Checks) != 2 || b.Checks[0].Passed != 3 || b.Checks[0].Failed != 1 || b.Checks[1].Passed != 4 || b.Verdict != "failed" {
		t.Errorf("dataset batch: checks %+v, verdict %s; want expected_outcome 3 of 4, expected_output 4 of 4, failed", b.Checks, b.Verdict)
	}
	failed := batchReplays(t, h, tok, b.ID, "failed=true")
	if len(failed) != 1 || failed[0].WorkflowID != ids[1] {
		t.Errorf("failed replays %+v, want the one of %s", failed, ids[1])
	}
	if r := h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "fraud-triage@2", "dataset": "triage-suite@9"}); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("a batch of a missing dataset version: %d %s", r.Status, r.Body)
	}
}

// scriptedJudge scores a replay 1 when it kept the original outcome and
// 0.2 otherwise, and counts tokens as a model would.
type scriptedJudge struct{}

func (scriptedJudge) Judge(_ context.Context, req replay.JudgeRequest) (replay.JudgeAnswer, error) {
	ans := replay.JudgeAnswer{Score: 0.2, Reason: "the outcome changed from " + req.Original.Outcome + " to " + req.Replay.Outcome}
	if req.Original.Outcome == req.Replay.Outcome {
		ans.Score, ans.Reason = 1, "same outcome"
	}
	body, _ := json.Marshal(map[string]any{"rubric": req.Rubric, "replay_outcome": req.Replay.Outcome})
	ans.Record = replay.JudgeRecord{Model: req.Model, Request: body, Response: json.RawMessage(`{"ok":true}`),
		Usage: &agent.Usage{InputTokens: 100, OutputTokens: 10}}
	return ans, nil
}

// CheckModel knows one model, judge-1.
func (scriptedJudge) CheckModel(_ context.Context, _, name string) error {
	if name != "judge-1" {
		return problem.New(problem.NotFound, "no model %s", name)
	}
	return nil
}

// TestReplayBatchJudge runs the LLM-as-judge check through a scripted
// judge: each replay carries its score, reason and the judge's exchange,
// and the batch counts them against pass_score.
func TestReplayBatchJudge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) { d.Replays.Judge = scriptedJudge{} })
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	for i, a := range []float64{20, 1200, 999, 3000} {
		id := fmt.Sprintf("tx_%d", i)
		w.amounts.Store(id, a)
		w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": id}})
	}
	r := h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "fraud-triage@2",
		"workflows": map[string]any{"agent": "fraud-triage"}, "judge": map[string]any{"model": "nope", "rubric": "r"}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), `"field":"judge.model"`) {
		t.Errorf("a judge model the tenant lacks: %d %s", r.Status, r.Body)
	}
	r = h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "fraud-triage@2",
		"workflows": map[string]any{"agent": "fraud-triage"},
		"judge":     map[string]any{"model": "judge-1", "rubric": "The replay reaches the same decision.", "pass_score": 0.5},
		"gate":      map[string]any{"judge": 0.5}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var created checkedBatch
	r.json(t, &created)
	b := getCheckedBatch(t, h, tok, created.ID)
	if len(b.Checks) != 1 || b.Checks[0].Name != "judge" || b.Checks[0].Passed != 2 || b.Checks[0].Failed != 2 || b.Verdict != "passed" {
		t.Fatalf("judge totals %+v, verdict %s; want 2 of 4 passed, passed at the 0.5 gate", b.Checks, b.Verdict)
	}
	for _, rp := range batchReplays(t, h, tok, b.ID, "") {
		c := rp.Checks[0]
		same := rp.OriginalOutcome == rp.ReplayOutcome
		if c.Score == nil || (*c.Score == 1) != same || c.Passed != same || c.Reason == "" || c.Judge == nil ||
			c.Judge.Model != "judge-1" || c.Judge.Usage.InputTokens != 100 || !strings.Contains(string(c.Judge.Request), "same decision") {
			t.Errorf("replay of %s (%s → %s): judge result %+v", rp.WorkflowID, rp.OriginalOutcome, rp.ReplayOutcome, c)
		}
	}
}
