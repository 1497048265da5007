package httpapi_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"
)

type batchResult struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	Target         string `json:"target_agent_version"`
	Total          int    `json:"total"`
	Done           int    `json:"done"`
	Changed        int    `json:"changed"`
	OutcomeChanges []struct {
		From  string `json:"from"`
		To    string `json:"to"`
		Count int    `json:"count"`
	} `json:"outcome_changes"`
	DeltaTotals map[string]int `json:"delta_totals"`
	FinishedAt  *string        `json:"finished_at"`
	ViewerURL   string         `json:"viewer_url"`
}

// waitBatch polls a batch until it is no longer running (at most 60 s).
func waitBatch(t *testing.T, h *harness, tok, id string) batchResult {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var b batchResult
		r := h.do("GET", "/v1/replay-batches/"+id, tok, nil)
		r.json(t, &b)
		if r.Status != http.StatusOK {
			t.Fatalf("GET batch: %d %s", r.Status, r.Body)
		}
		if b.Status != "running" {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch still running after 60 s: done %d of %d", b.Done, b.Total)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplayBatchReportsOutcomeChanges replays 200 workflows of v1 (a mix
// of amounts) against v2, which raises the escalation threshold from 1,000
// to 5,000, and checks the batch against outcomes computed here; the tools
// receive nothing.
func TestReplayBatchReportsOutcomeChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)

	amounts := []float64{20, 1200, 3000, 7000, 999, 5000, 5001}
	// Above the threshold a case is opened, which the financial policy
	// denies above 5,000 to a caller without payments:large.
	outcome := func(amount, threshold float64) string {
		switch {
		case amount <= threshold:
			return "cleared"
		case amount > 5000:
			return "denied"
		}
		return "escalated"
	}
	want := map[string]int{}
	wantChanged := 0
	const n = 200
	for i := range n {
		id := fmt.Sprintf("tx_%03d", i)
		a := amounts[i%len(amounts)]
		w.amounts.Store(id, a)
		wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": id}})
		if got := wf["outcome"]; got != outcome(a, 1000) {
			t.Fatalf("v1 outcome of %v = %v", a, got)
		}
		from, to := outcome(a, 1000), outcome(a, 5000)
		want[from+"→"+to]++
		if from != to {
			wantChanged++
		}
	}
	before := w.payments.Load() + w.cases.Load()

	r := h.do("POST", "/v1/replay-batches", tok, map[string]any{
		"target_agent_version": "fraud-triage@2",
		"workflows":            map[string]any{"agent": "fraud-triage", "limit": 10000},
	})
	var created batchResult
	r.json(t, &created)
	if r.Status != http.StatusAccepted || r.Header.Get("Location") != "/v1/replay-batches/"+created.ID || created.Total != n {
		t.Fatalf("create batch: %d %s %s", r.Status, r.Header.Get("Location"), r.Body)
	}
	b := waitBatch(t, h, tok, created.ID)
	got := map[string]int{}
	for _, c := range b.OutcomeChanges {
		got[c.From+"→"+c.To] = c.Count
	}
	if b.Status != "completed" || b.Done != n || b.Changed != wantChanged || !maps.Equal(got, want) || b.FinishedAt == nil {
		t.Errorf("batch: status %s, done %d, changed %d (want %d), matrix %v (want %v)", b.Status, b.Done, b.Changed, wantChanged, got, want)
	}
	if len(b.OutcomeChanges) > 0 && b.OutcomeChanges[0].From == b.OutcomeChanges[0].To {
		t.Errorf("matrix does not list changed outcomes first: %+v", b.OutcomeChanges)
	}
	if after := w.payments.Load() + w.cases.Load(); after != before {
		t.Errorf("the tools received %d requests during the batch, want none", after-before)
	}

	// The changed replays, paged; each changed from escalated to cleared.
	var changed []replayResult
	cursor := ""
	for range 20 {
		var pg struct {
			Replays    []replayResult `json:"replays"`
			NextCursor *string        `json:"next_cursor"`
		}
		h.do("GET", "/v1/replay-batches/"+b.ID+"/replays?changed=true&limit=25&cursor="+cursor, tok, nil).json(t, &pg)
		changed = append(changed, pg.Replays...)
		if pg.NextCursor == nil {
			break
		}
		cursor = *pg.NextCursor
	}
	if len(changed) != wantChanged {
		t.Fatalf("%d changed replays listed, want %d", len(changed), wantChanged)
	}
	seen := map[string]bool{}
	for _, rp := range changed {
		if rp.OriginalOutcome != "escalated" || rp.ReplayOutcome != "cleared" || !rp.DryRun || rp.ViewerURL == "" || seen[rp.WorkflowID] {
			t.Errorf("changed replay %s: %s → %s, dry run %v, seen before %v", rp.ReplayID, rp.OriginalOutcome, rp.ReplayOutcome, rp.DryRun, seen[rp.WorkflowID])
		}
		seen[rp.WorkflowID] = true
	}
	var all struct {
		Replays []replayResult `json:"replays"`
	}
	h.do("GET", "/v1/replay-batches/"+b.ID+"/replays?limit=200", tok, nil).json(t, &all)
	if len(all.Replays) != n || all.Replays[0].OriginalOutcome == all.Replays[0].ReplayOutcome {
		t.Errorf("all replays: %d, changed first: %v", len(all.Replays), all.Replays[0].ReplayOutcome)
	}

	// The event stream of a finished batch: its progress, then complete;
	// resumed after the last progress, only complete; after that, nothing.
	evs := parseSSE(t, "batch events", h.do("GET", "/v1/replay-batches/"+b.ID+"/events", tok, nil).Body)
	if len(evs) != 2 || evs[0].id != n || !strings.Contains(evs[0].data, fmt.Sprintf(`"event":"progress","done":%d,"total":%d,"changed":%d`, n, n, wantChanged)) ||
		evs[1].id != n+1 || !strings.Contains(evs[1].data, `"event":"complete"`) || !strings.Contains(evs[1].data, `"status":"completed"`) {
		t.Errorf("batch events: %+v", evs)
	}
	evs = parseSSE(t, "batch events resumed", h.do("GET", "/v1/replay-batches/"+b.ID+"/events", tok, nil, "Last-Event-ID", fmt.Sprint(n)).Body)
	if len(evs) != 1 || evs[0].id != n+1 {
		t.Errorf("batch events after %d: %+v", n, evs)
	}
	if r := h.do("GET", "/v1/replay-batches/"+b.ID+"/events", tok, nil, "Last-Event-ID", fmt.Sprint(n+1)); r.Status != http.StatusNoContent {
		t.Errorf("batch events after complete: %d %s", r.Status, r.Body)
	}

	// The report page, by its signed link, with the counts.
	page := h.do("GET", strings.TrimPrefix(b.ViewerURL, h.URL), "", nil)
	for _, want := range []string{`id="count-total">200<`, fmt.Sprintf(`id="count-changed">%d<`, wantChanged),
		`data-from="escalated" data-to="cleared" class="cell-changed">` + fmt.Sprint(want["escalated→cleared"]) + `<`} {
		if page.Status != http.StatusOK || !strings.Contains(string(page.Body), want) {
			t.Errorf("report page: %d, want %s in it", page.Status, want)
		}
	}
	if got := page.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("report page Cache-Control %q", got)
	}

	// A finished batch cannot be cancelled.
	if r := h.do("POST", "/v1/replay-batches/"+b.ID+"/cancel", tok, nil); r.Status != http.StatusConflict {
		t.Errorf("cancel a completed batch: %d %s", r.Status, r.Body)
	}

	// The list shows it with its counts; another tenant's list does not.
	var listed struct {
		Batches []struct {
			ID            string `json:"id"`
			Done, Changed int
			ViewerURL     string `json:"viewer_url"`
		} `json:"batches"`
		NextCursor *string `json:"next_cursor"`
	}
	h.do("GET", "/v1/replay-batches?target=fraud-triage@2", tok, nil).json(t, &listed)
	if len(listed.Batches) != 1 || listed.Batches[0].ID != b.ID || listed.Batches[0].Done != 200 ||
		listed.Batches[0].Changed != wantChanged || listed.Batches[0].ViewerURL == "" {
		t.Errorf("GET /v1/replay-batches = %+v, want batch %s with 200 done, %d changed", listed, b.ID, wantChanged)
	}

	// Another tenant neither sees the batch nor can replay acme's workflows.
	other := h.token("globex", replayScopes)
	var none struct {
		Batches []any `json:"batches"`
	}
	h.do("GET", "/v1/replay-batches", other, nil).json(t, &none)
	if len(none.Batches) != 0 {
		t.Errorf("another tenant lists %d batches", len(none.Batches))
	}
	for _, path := range []string{"", "/events", "/replays"} {
		if r := h.do("GET", "/v1/replay-batches/"+b.ID+path, other, nil); r.Status != http.StatusNotFound {
			t.Errorf("another tenant's GET %s: %d", path, r.Status)
		}
	}
	r = h.do("POST", "/v1/replay-batches", other, map[string]any{
		"target_agent_version": "fraud-triage@2", "workflow_ids": []string{changed[0].WorkflowID},
	})
	if r.Status != http.StatusNotFound && (r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "workflow_ids[0]")) {
		t.Errorf("another tenant's workflow ids: %d %s", r.Status, r.Body)
	}
}

func TestReplayBatchValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1"}})
	id := wf["workflow_id"].(string)
	for _, tc := range []struct {
		body   map[string]any
		status int
		field  string
	}{
		{map[string]any{"workflow_ids": []string{id}}, 422, "target_agent_version"},
		{map[string]any{"target_agent_version": "fraud-triage@1"}, 422, "workflows"},
		{map[string]any{"target_agent_version": "fraud-triage@1", "workflow_ids": []string{id}, "workflows": map[string]any{}}, 422, "workflow_ids"},
		{map[string]any{"target_agent_version": "fraud-triage@1", "workflows": map[string]any{"limit": 10001}}, 422, "workflows.limit"},
		{map[string]any{"target_agent_version": "fraud-triage@1", "workflows": map[string]any{"since": "yesterday"}}, 422, "workflows.since"},
		{map[string]any{"target_agent_version": "fraud-triage@1", "workflow_ids": []string{id, id}}, 422, "workflow_ids[1]"},
		{map[string]any{"target_agent_version": "fraud-triage@1", "workflow_ids": []string{"wf_nope"}}, 422, "workflow_ids[0]"},
		{map[string]any{"target_agent_version": "fraud-triage@1", "workflows": map[string]any{"agent": "nobody"}}, 422, "workflows"},
		{map[string]any{"target_agent_version": "fraud-triage@9", "workflow_ids": []string{id}}, 404, ""},
	} {
		r := h.do("POST", "/v1/replay-batches", tok, tc.body)
		if r.Status != tc.status || tc.field != "" && !strings.Contains(string(r.Body), `"field":"`+tc.field+`"`) {
			t.Errorf("%v: %d %s, want %d on %s", tc.body, r.Status, r.Body, tc.status, tc.field)
		}
	}
	if r := h.do("GET", "/v1/replay-batches/rpb_nope", tok, nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown batch: %d", r.Status)
	}
}
