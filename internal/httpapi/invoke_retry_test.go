package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
)

// gate holds w's getTransaction calls until release is called, or the
// test ends.
func gate(t *testing.T, w *fraudWorld) (release func()) {
	w.gate = make(chan struct{})
	release = sync.OnceFunc(func() { close(w.gate) })
	t.Cleanup(release)
	return release
}

// hangUpInvoke sends a sync invoke with body and headers, and hangs up once
// the workflow waits on its first tool call (w.gate must be set).
func hangUpInvoke(t *testing.T, w *fraudWorld, body map[string]any, headers ...string) {
	t.Helper()
	b, _ := json.Marshal(body)
	ctx, hangUp := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", w.h.URL+"/v1/agents/fraud-triage/invoke", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.admin)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := w.h.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return w.payments.Load() == 1 })
	hangUp()
	<-done
}

// waitInvokeAudited waits until the audit log holds n invoke requests: a
// request's record is written once everything else about it is settled.
func waitInvokeAudited(t *testing.T, h *harness, n int) auditPage {
	t.Helper()
	reader := h.token("acme", "audit:read")
	var page auditPage
	waitFor(t, func() bool {
		h.do("GET", "/v1/audit/query?action=agent.invoke", reader, nil).json(t, &page)
		return len(page.Records) >= n
	})
	return page
}

func TestAClientDisconnectIsStillAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	gate(t, w)
	hangUpInvoke(t, w, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-gone"}})

	page := waitInvokeAudited(t, h, 1)
	if rec := page.Records[0]; rec.WorkflowID == "" || rec.Actor.Sub != "alice" {
		t.Fatalf("record of the abandoned invoke: %+v", rec)
	}
}

func TestInvokeRetriedAfterADisconnectGetsTheWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	release := gate(t, w)
	body := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-retry"}}
	hangUpInvoke(t, w, body, "Idempotency-Key", "retry-me")
	waitInvokeAudited(t, h, 1) // the first request is over
	release()

	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body, "Idempotency-Key", "retry-me")
	if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v %s", r.Status, r.Header, r.Body)
	}
	var wf map[string]any
	r.json(t, &wf)
	if wf["workflow_id"] != r.Header.Get("Workflow-Id") || wf["status"] != "completed" || wf["outcome"] != "cleared" {
		t.Fatalf("retry answered %s", r.Body)
	}
	if n := w.payments.Load(); n != 1 {
		t.Fatalf("the payments API received %d requests, want 1", n)
	}
}

func TestInvokeRepeatAttachesHoweverLongTheWorkflowRuns(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	store := &hookedStore{}
	h := newHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) {
		d.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	}, hookStore(store))
	w := newFraudWorld(t, h)
	release := gate(t, w)
	body := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-long"}, "idempotency_key": "long"}
	first := make(chan response, 1)
	go func() { first <- h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body) }()
	waitFor(t, func() bool { return w.payments.Load() == 1 })
	waitLinked(t, h, "long")

	// Long after the first request began, the workflow still runs.
	skew.Store(int64(time.Hour))
	repeat := make(chan response, 1)
	go func() { repeat <- h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body) }()
	waitAttached(t, store, "long")
	release()
	a, b := <-first, <-repeat
	if a.Status != 200 || b.Status != 200 || b.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("statuses %d %d (%v): %s %s", a.Status, b.Status, b.Header, a.Body, b.Body)
	}
	if id := a.Header.Get("Workflow-Id"); id == "" || b.Header.Get("Workflow-Id") != id {
		t.Fatalf("workflow ids %q and %q", id, b.Header.Get("Workflow-Id"))
	}
	if n := w.payments.Load(); n != 1 {
		t.Fatalf("the payments API received %d requests, want 1", n)
	}
}

// TestASyncInvokesRecordIsWrittenOnce checks that a sync invoke's own
// record is written once, after its workflow's end, saying what was
// answered, and that the chain verifies.
func TestASyncInvokesRecordIsWrittenOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin,
		map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-1"}})
	if r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	id := r.Header.Get("Workflow-Id")
	page := waitInvokeAudited(t, h, 1)
	if len(page.Records) != 1 {
		t.Fatalf("%d records of the invoke, want 1", len(page.Records))
	}
	rec := page.Records[0]
	if rec.WorkflowID != id || rec.Status != 200 || rec.Outcome != "success" {
		t.Errorf("the invoke's record: %+v", rec)
	}
	reader := h.token("acme", "audit:read")
	var ends auditPage
	h.do("GET", "/v1/audit/query?action=workflow.finish&workflow_id="+id, reader, nil).json(t, &ends)
	if len(ends.Records) != 1 || ends.Records[0].Seq > rec.Seq {
		t.Errorf("workflow.finish records %+v; want one, before the invoke's (seq %d)", ends.Records, rec.Seq)
	}
	var rep struct {
		OK bool `json:"ok"`
	}
	h.do("GET", "/v1/audit/verify", reader, nil).json(t, &rep)
	if !rep.OK {
		t.Error("the chain does not verify")
	}
}

// TestAnInvokeKeyLapsesAfterItsTTL checks that an invoke's key, kept with
// its workflow, is honoured for Config.InvokeIdempotencyTTL (7 days) and
// then starts a new workflow.
func TestAnInvokeKeyLapsesAfterItsTTL(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := newHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) {
		d.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	w := newFraudWorld(t, h)
	body := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-ttl"}, "idempotency_key": "week"}
	first := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body)
	skew.Store(int64(6 * 24 * time.Hour))
	within := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body)
	skew.Store(int64(8 * 24 * time.Hour))
	after := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body)
	if first.Status != 200 || within.Status != 200 || after.Status != 200 {
		t.Fatalf("statuses %d %d %d", first.Status, within.Status, after.Status)
	}
	id := first.Header.Get("Workflow-Id")
	if within.Header.Get("Workflow-Id") != id || within.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a repeat after 6 days: workflow %q (replayed %q), want %s", within.Header.Get("Workflow-Id"), within.Header.Get("Idempotent-Replayed"), id)
	}
	if got := after.Header.Get("Workflow-Id"); got == id || got == "" || after.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("a repeat after 8 days: workflow %q (replayed %q), want a new one", got, after.Header.Get("Idempotent-Replayed"))
	}
}

// TestAnInvokeKeyTellsEveryDigit: a body sent again with an invoke's key
// that differs from the first's only in an integer past 2^53 sharing its
// double is another request, refused as the key's reuse, where the first
// body written otherwise is its repeat.
func TestAnInvokeKeyTellsEveryDigit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	first := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin,
		`{"goal": "triage", "context": {"transaction_id": "tx-wide", "account": 1234567890123456789}}`, "Idempotency-Key", "wide")
	if first.Status != 200 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	again := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin,
		`{"context":{"account":1234567890123456789,"transaction_id":"tx-wide"},"goal":"triage"}`, "Idempotency-Key", "wide")
	if again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" || again.Header.Get("Workflow-Id") != first.Header.Get("Workflow-Id") {
		t.Fatalf("repeat: %d %v %s; want the first's workflow", again.Status, again.Header, again.Body)
	}
	other := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin,
		`{"goal": "triage", "context": {"transaction_id": "tx-wide", "account": 1234567890123456788}}`, "Idempotency-Key", "wide")
	if other.Status != 422 || other.problem(t).Code != "idempotency-key-reused" {
		t.Fatalf("another account: %d %s; want the key's reuse refused", other.Status, other.Body)
	}
}

// TestConcurrentInvokesWithOneKeyShareAWorkflow sends the same keyed invoke
// at once from several clients: one workflow is created
// and every request answers with it, none with a 409 or a 500.
func TestConcurrentInvokesWithOneKeyShareAWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	body := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-race"}, "idempotency_key": "race"}
	got := make(chan response, 8)
	for range 8 {
		go func() { got <- h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body) }()
	}
	ids := map[string]int{}
	for range 8 {
		r := <-got
		if r.Status != 200 {
			t.Fatalf("a concurrent repeat: %d %s", r.Status, r.Body)
		}
		ids[r.Header.Get("Workflow-Id")]++
	}
	if len(ids) != 1 {
		t.Fatalf("workflows answered %v, want one", ids)
	}
	var page struct {
		Workflows []map[string]any `json:"workflows"`
	}
	h.do("GET", "/v1/workflows", w.admin, nil).json(t, &page)
	if len(page.Workflows) != 1 {
		t.Errorf("%d workflows stored, want 1", len(page.Workflows))
	}
}
