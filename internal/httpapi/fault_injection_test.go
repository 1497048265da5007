package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/fault"
)

// injectedStep is a step with what a fault injected into it.
type injectedStep struct {
	Step       int             `json:"step"`
	Action     string          `json:"action"`
	Status     string          `json:"status"`
	Tool       string          `json:"tool"`
	Operation  string          `json:"operation"`
	Error      string          `json:"error"`
	ErrorCode  string          `json:"error_code"`
	HTTPStatus int             `json:"http_status"`
	Result     json.RawMessage `json:"result"`
	Sent       bool            `json:"sent"`
	Injected   *fault.Injected `json:"injected"`
}

// faultedReplay is a replay as the fault tests read it.
type faultedReplay struct {
	ID               string        `json:"replay_id"`
	WorkflowID       string        `json:"workflow_id"`
	OriginalOutcome  string        `json:"original_outcome"`
	ReplayOutcome    string        `json:"replay_outcome"`
	ReplayWorkflowID string        `json:"replay_workflow_id"`
	ViewerURL        string        `json:"viewer_url"`
	Faults           []fault.Fault `json:"faults"`
	Steps            []struct {
		Kind   string        `json:"kind"`
		Fields []string      `json:"changed_fields"`
		Replay *injectedStep `json:"replay"`
	} `json:"steps"`
	Checks []struct {
		Name   string `json:"name"`
		Passed bool   `json:"passed"`
	} `json:"checks"`
}

// injected is the replay's step a fault answered, or nil.
func (r faultedReplay) injected() *injectedStep {
	for _, e := range r.Steps {
		if e.Replay != nil && e.Replay.Injected != nil {
			return e.Replay
		}
	}
	return nil
}

// allBatchReplays is every replay of a batch, by workflow id.
func allBatchReplays(t *testing.T, h *harness, tok, id string) map[string]faultedReplay {
	t.Helper()
	out := map[string]faultedReplay{}
	for _, rp := range batchReplaysAs[faultedReplay](t, h, tok, id, "") {
		out[rp.WorkflowID] = rp
	}
	return out
}

// TestBatchFaultsFailTheSameItemsEveryRun replays 60 workflows against v2
// with a 503 injected at rate 0.5 into payments.getTransaction, twice: the
// items that fail are those the documented hash picks, the same on both
// runs, the gated check and the verdict follow, no tool is called, and the
// steps and the viewer show the injection.
func TestBatchFaultsFailTheSameItemsEveryRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", `"txn.amount > 1000.0 ? 0.91 : 0.12"`, `"txn.amount > 900.0 ? 0.91 : 0.12"`)
	tok := h.token("acme", replayScopes)
	const n = 60
	var ids []string
	original := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("tx_%02d", i)
		w.amounts.Store(id, []float64{20, 1200}[i%2])
		wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": id}})
		wfID := wf["workflow_id"].(string)
		ids = append(ids, wfID)
		original[wfID] = wf["outcome"].(string)
	}
	// fetch_transaction is step 1 of every run, and the fault is faults[0].
	injected := map[string]bool{}
	for _, id := range ids {
		injected[id] = fault.Chance(id, 1, 0) < 0.5
	}
	nInjected := 0
	for _, yes := range injected {
		if yes {
			nInjected++
		}
	}
	if nInjected == 0 || nInjected == n {
		t.Fatalf("the hash picks %d of %d: pick other transactions", nInjected, n)
	}
	paid, cased := w.payments.Load(), w.cases.Load()

	body := map[string]any{
		"target_agent_version": "fraud-triage@2",
		"workflow_ids":         ids,
		"faults": []map[string]any{{"tool": "payments", "operation": "getTransaction", "rate": 0.5,
			"result": map[string]any{"status": 503, "body": map[string]any{"error": "payments is down"}, "headers": map[string]string{"Retry-After": "30"}}}},
		"checks": []map[string]any{{"name": "outcome_unchanged"}, {"name": "no_failure", "expr": `replay.outcome != "failed"`}},
		"gate":   map[string]float64{"no_failure": 0.95},
	}
	var runs []map[string]faultedReplay
	for run := range 2 {
		r := h.do("POST", "/v1/replay-batches", tok, body)
		if r.Status != http.StatusAccepted {
			t.Fatalf("run %d: create batch: %d %s", run, r.Status, r.Body)
		}
		var created struct {
			ID     string        `json:"id"`
			Faults []fault.Fault `json:"faults"`
		}
		r.json(t, &created)
		if len(created.Faults) != 1 || created.Faults[0].Result.Status != 503 {
			t.Errorf("the batch shows faults %+v", created.Faults)
		}
		b := getCheckedBatch(t, h, tok, created.ID)
		if b.Status != "completed" || b.Done != n {
			t.Fatalf("run %d: batch %+v", run, b)
		}
		if b.Verdict != "failed" {
			t.Errorf("run %d: verdict %q, want failed: %d of %d items fail no_failure under a gate of 0.95", run, b.Verdict, nInjected, n)
		}
		for _, c := range b.Checks {
			if c.Name == "no_failure" && (c.Passed != n-nInjected || c.Failed != nInjected) {
				t.Errorf("run %d: no_failure passed %d failed %d, want %d and %d", run, c.Passed, c.Failed, n-nInjected, nInjected)
			}
		}
		replays := allBatchReplays(t, h, tok, b.ID)
		if len(replays) != n {
			t.Fatalf("run %d: %d replays", run, len(replays))
		}
		for _, id := range ids {
			rp := replays[id]
			step := rp.injected()
			if got := step != nil; got != injected[id] {
				t.Errorf("run %d: %s injected %v, want %v (chance %v)", run, id, got, injected[id], fault.Chance(id, 1, 0))
				continue
			}
			want := original[id]
			if injected[id] {
				want = "failed"
				if step.Status != "error" || step.HTTPStatus != 503 || step.ErrorCode != "upstream_error" || step.Sent ||
					*step.Injected != (fault.Injected{Fault: 0, Status: 503}) || !strings.Contains(string(step.Result), "payments is down") {
					t.Errorf("run %d: %s injected step %+v", run, id, step)
				}
			}
			if rp.ReplayOutcome != want {
				t.Errorf("run %d: %s replayed %s, want %s", run, id, rp.ReplayOutcome, want)
			}
			if len(rp.Faults) != 1 {
				t.Errorf("run %d: %s replay shows faults %+v", run, id, rp.Faults)
			}
		}
		runs = append(runs, replays)
	}
	for _, id := range ids {
		a, b := runs[0][id], runs[1][id]
		if a.ReplayOutcome != b.ReplayOutcome || (a.injected() == nil) != (b.injected() == nil) {
			t.Errorf("%s: run 1 %s (injected %v), run 2 %s (injected %v)", id, a.ReplayOutcome, a.injected() != nil, b.ReplayOutcome, b.injected() != nil)
		}
	}
	if w.payments.Load() != paid || w.cases.Load() != cased {
		t.Errorf("the tools got %d and %d requests, want none", w.payments.Load()-paid, w.cases.Load()-cased)
	}
	for _, id := range ids {
		if !injected[id] {
			continue
		}
		page := h.do("GET", strings.TrimPrefix(runs[0][id].ViewerURL, h.URL), "", nil)
		for _, s := range []string{`<span class="injected-badge">fault injected</span>`, `faults[0]: status 503; the call was not sent`, `id="faults"`} {
			if !strings.Contains(string(page.Body), s) {
				t.Errorf("the viewer (%d) lacks %s", page.Status, s)
			}
		}
		break
	}
}

// TestReplayFaults injects a time-out into a dry replay, and a 503 and a
// conditional fault into real ones: the tool never receives an injected
// call, and the steps of the replay's workflow say what was injected.
func TestReplayFaults(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", replayScopes)
	w.amounts.Store("tx_small", 20.0)
	w.amounts.Store("tx_big", 1200.0)
	small := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_small"}})["workflow_id"].(string)
	big := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_big"}})["workflow_id"].(string)
	replayOf := func(t *testing.T, wfID string, body map[string]any) faultedReplay {
		t.Helper()
		body["target_agent_version"] = "fraud-triage@1"
		r := h.do("POST", "/v1/workflows/"+wfID+"/replay", tok, body)
		if r.Status != http.StatusCreated {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		var rp faultedReplay
		r.json(t, &rp)
		return rp
	}

	t.Run("a dry run with a time-out", func(t *testing.T) {
		rp := replayOf(t, small, map[string]any{"faults": []map[string]any{{"tool": "payments", "result": map[string]any{"error": "timeout"}}}})
		step := rp.injected()
		if rp.ReplayOutcome != "failed" || step == nil || step.ErrorCode != "timeout" || step.Injected.Error != "timeout" ||
			!strings.Contains(step.Error, "timed out") || step.HTTPStatus != 0 {
			t.Fatalf("replay %s, injected step %+v", rp.ReplayOutcome, step)
		}
		if e := rp.Steps[0]; e.Kind != "changed" || !strings.Contains(strings.Join(e.Fields, ","), "injected") {
			t.Errorf("the diff's first entry %s %v, want changed with injected", e.Kind, e.Fields)
		}
		var again faultedReplay
		h.do("GET", "/v1/replays/"+rp.ID, tok, nil).json(t, &again)
		if again.injected() == nil || len(again.Faults) != 1 {
			t.Errorf("GET /v1/replays/%s lost the injection: %+v", rp.ID, again)
		}
	})

	t.Run("a real run with a 503: the tool receives nothing", func(t *testing.T) {
		paid := w.payments.Load()
		rp := replayOf(t, small, map[string]any{"dry_run": false,
			"faults": []map[string]any{{"tool": "payments", "operation": "getTransaction", "result": map[string]any{"status": 503}}}})
		if w.payments.Load() != paid {
			t.Errorf("payments got %d requests, want none", w.payments.Load()-paid)
		}
		if rp.ReplayOutcome != "failed" || rp.ReplayWorkflowID == "" {
			t.Fatalf("replay %+v", rp)
		}
		var wf struct {
			Outcome string         `json:"outcome"`
			Faults  []fault.Fault  `json:"faults"`
			Steps   []injectedStep `json:"steps"`
		}
		h.do("GET", "/v1/workflows/"+rp.ReplayWorkflowID, tok, nil).json(t, &wf)
		if len(wf.Steps) == 0 || wf.Steps[0].Injected == nil || wf.Steps[0].Injected.Status != 503 || wf.Steps[0].Sent || len(wf.Faults) != 1 {
			t.Errorf("the replay's workflow %s: faults %+v, steps %+v", wf.Outcome, wf.Faults, wf.Steps)
		}
	})

	t.Run("a real run with a fault when the amount is large", func(t *testing.T) {
		paid, cased := w.payments.Load(), w.cases.Load()
		faults := []map[string]any{{"tool": "cases", "when": "args.amount > 1000.0",
			"result": map[string]any{"status": 201, "body": map[string]any{"case_id": "injected-1"}}}}
		rp := replayOf(t, big, map[string]any{"dry_run": false, "faults": faults})
		if w.payments.Load() != paid+1 || w.cases.Load() != cased {
			t.Errorf("payments got %d requests (want 1), cases %d (want none)", w.payments.Load()-paid, w.cases.Load()-cased)
		}
		step := rp.injected()
		if rp.ReplayOutcome != "escalated" || step == nil || step.Tool != "cases" || step.Status != "ok" || !strings.Contains(string(step.Result), "injected-1") {
			t.Errorf("replay %s, injected step %+v", rp.ReplayOutcome, step)
		}
		// The small one's case is never opened: the fault does not apply.
		rp = replayOf(t, small, map[string]any{"faults": faults})
		if rp.injected() != nil || rp.ReplayOutcome != "cleared" {
			t.Errorf("replay %s injected %+v", rp.ReplayOutcome, rp.injected())
		}
	})

	t.Run("a batch of a dataset", func(t *testing.T) {
		if r := h.do("POST", "/v1/datasets", tok, map[string]any{"name": "outage", "workflow_ids": []string{small, big}}); r.Status != http.StatusCreated {
			t.Fatalf("dataset: %d %s", r.Status, r.Body)
		}
		r := h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "fraud-triage@1", "dataset": "outage",
			"faults": []map[string]any{{"tool": "payments", "result": map[string]any{"error": "transport"}}}})
		if r.Status != http.StatusAccepted {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		var b struct{ ID string }
		r.json(t, &b)
		waitBatch(t, h, tok, b.ID)
		replays := allBatchReplays(t, h, tok, b.ID)
		if len(replays) != 2 {
			t.Fatalf("%d replays, want 2", len(replays))
		}
		for id, rp := range replays {
			if step := rp.injected(); rp.ReplayOutcome != "failed" || step == nil || step.ErrorCode != "transport" {
				t.Errorf("%s: replay %s, injected step %+v", id, rp.ReplayOutcome, step)
			}
		}
	})
}

// TestFaultsBadInput refuses each kind of bad fault in replays and batches
// with a 422 naming the field.
func TestFaultsBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", replayScopes)
	w.amounts.Store("tx_1", 20.0)
	wfID := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1"}})["workflow_id"].(string)
	status := func(s int) map[string]any { return map[string]any{"status": s} }
	for _, tc := range []struct {
		name  string
		fault map[string]any
		field string
	}{
		{"unknown tool", map[string]any{"tool": "ledger", "result": status(503)}, "faults[0].tool"},
		{"unknown operation", map[string]any{"tool": "payments", "operation": "refund", "result": status(503)}, "faults[0].operation"},
		{"rate over 1", map[string]any{"tool": "payments", "rate": 1.5, "result": status(503)}, "faults[0].rate"},
		{"rate under 0", map[string]any{"tool": "payments", "rate": -0.5, "result": status(503)}, "faults[0].rate"},
		{"when that does not compile", map[string]any{"tool": "payments", "when": "args.id ==", "result": status(503)}, "faults[0].when"},
		{"neither status nor error", map[string]any{"tool": "payments", "result": map[string]any{}}, "faults[0].result"},
		{"both status and error", map[string]any{"tool": "payments", "result": map[string]any{"status": 503, "error": "timeout"}}, "faults[0].result"},
		{"status outside 100..599", map[string]any{"tool": "payments", "result": status(700)}, "faults[0].result.status"},
		{"an unknown error", map[string]any{"tool": "payments", "result": map[string]any{"error": "refused"}}, "faults[0].result.error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []struct{ path string }{{"/v1/workflows/" + wfID + "/replay"}, {"/v1/replay-batches"}} {
				body := map[string]any{"target_agent_version": "fraud-triage@1", "faults": []map[string]any{tc.fault}}
				if req.path == "/v1/replay-batches" {
					body["workflow_ids"] = []string{wfID}
				}
				r := h.do("POST", req.path, tok, body)
				if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), `"field":"`+tc.field+`"`) {
					t.Errorf("%s: %d %s, want 422 naming %s", req.path, r.Status, r.Body, tc.field)
				}
			}
		})
	}
}

// TestExternalReplayFaults replays an external agent's workflow (the Go
// recipe's agent) with a 503 injected into payments, as a dry run with the
// model live and as a real run: the tool receives nothing, the agent's MCP
// call gets an isError result carrying the status and the body, its model
// reads them, and the step says what was injected.
func TestExternalReplayFaults(t *testing.T) {
	t.Parallel()
	h, w, ms := newExternalReplayWorld(t)
	r := h.do("POST", "/v1/agents/ext-triage/invoke", w.admin, map[string]any{"goal": "How much is tx-1?"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "answered" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	replayer := h.token("acme", replayScopes)
	faults := []map[string]any{{"tool": "payments", "operation": "getTransaction",
		"result": map[string]any{"status": 503, "body": map[string]any{"error": "payments is down"}}}}
	// wantInjected checks the step a fault answered and what the agent's
	// model was given.
	wantInjected := func(t *testing.T, steps []injectedStep, output json.RawMessage) {
		t.Helper()
		var call *injectedStep
		for i := range steps {
			if steps[i].Tool == "payments" {
				call = &steps[i]
			}
		}
		if call == nil || call.Injected == nil || *call.Injected != (fault.Injected{Fault: 0, Status: 503}) || call.Sent || call.HTTPStatus != 503 {
			t.Errorf("the call's step %+v", call)
		}
		last := ms.Requests()[len(ms.Requests())-1].Last()
		if last.Role != "tool" || !strings.Contains(last.Content, "503 Service Unavailable") || !strings.Contains(last.Content, "payments is down") {
			t.Errorf("the agent's model was given %+v, want the injected 503 and its body", last)
		}
		if !strings.Contains(string(output), "503") {
			t.Errorf("output %s does not carry the model's reaction", output)
		}
	}

	t.Run("dry run, model live", func(t *testing.T) {
		paid := w.payments.Load()
		r := h.do("POST", "/v1/workflows/"+wf.ID+"/replay", replayer, map[string]any{"target_agent_version": "ext-triage@1", "llm": "live", "faults": faults})
		if r.Status != http.StatusCreated {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		var rp faultedReplay
		r.json(t, &rp)
		var out struct {
			Output json.RawMessage `json:"replay_output"`
		}
		r.json(t, &out)
		if w.payments.Load() != paid {
			t.Errorf("payments got %d requests, want none", w.payments.Load()-paid)
		}
		var steps []injectedStep
		for _, e := range rp.Steps {
			if e.Replay != nil {
				steps = append(steps, *e.Replay)
			}
		}
		wantInjected(t, steps, out.Output)
	})

	t.Run("real run", func(t *testing.T) {
		paid := w.payments.Load()
		r := h.do("POST", "/v1/workflows/"+wf.ID+"/replay", replayer, map[string]any{"target_agent_version": "ext-triage@1", "dry_run": false, "faults": faults})
		if r.Status != http.StatusCreated {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		var rp faultedReplay
		r.json(t, &rp)
		if w.payments.Load() != paid {
			t.Errorf("payments got %d requests, want none", w.payments.Load()-paid)
		}
		var got struct {
			Output json.RawMessage `json:"output"`
			Steps  []injectedStep  `json:"steps"`
		}
		h.do("GET", "/v1/workflows/"+rp.ReplayWorkflowID, replayer, nil).json(t, &got)
		wantInjected(t, got.Steps, got.Output)
	})
}
