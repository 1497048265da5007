package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentplane/agentplane/internal/httpapi"
)

// TestEachInvokesRecordCarriesTheStatusItsClientGot sends invokes with a
// mix of outcomes (200, 202, 4xx, a stream, an attached repeat, a stream
// whose client leaves mid-way, a sync invoke whose client leaves before the
// answer) and checks that each request's audit record carries the status
// the client received: none at all (499) for the one that left first.
func TestEachInvokesRecordCarriesTheStatusItsClientGot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	const path = "/v1/agents/fraud-triage/invoke"
	body := func(tx string) map[string]any {
		return map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": tx}}
	}
	got := map[string]int{} // request id → status received
	note := func(r response) {
		t.Helper()
		id := r.Header.Get("Request-Id")
		if id == "" {
			t.Fatalf("a response without Request-Id: %d %s", r.Status, r.Body)
		}
		got[id] = r.Status
	}
	// A sync invoke whose client leaves before any answer: no status.
	release := gate(t, w)
	hangUpInvoke(t, w, body("tx-gone"))

	// A stream whose client reads its 200 and leaves while the workflow
	// waits on its tool call.
	ctx, leave := context.WithCancel(t.Context())
	b, _ := json.Marshal(map[string]any{"goal": "triage", "stream": true, "context": map[string]any{"transaction_id": "tx-leave"}})
	req, _ := http.NewRequestWithContext(ctx, "POST", h.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.admin)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got[resp.Header.Get("Request-Id")] = resp.StatusCode
	leave()
	resp.Body.Close()

	release()

	for _, r := range []response{
		h.do("POST", path, w.admin, body("tx-sync"), "Idempotency-Key", "k-sync"),
		h.do("POST", path, w.admin, body("tx-sync"), "Idempotency-Key", "k-sync"),  // attached repeat: 200
		h.do("POST", path, w.admin, body("tx-other"), "Idempotency-Key", "k-sync"), // 422 reused
		h.do("POST", path, w.admin, body("tx-async"), "Prefer", "respond-async"),   // 202
		h.do("POST", path, w.admin, map[string]any{"goal": ""}),                    // 422
		h.do("POST", "/v1/agents/nobody/invoke", w.admin, body("tx-none")),         // 404
		h.do("POST", path, h.token("acme", "agents:read"), body("tx-scope")),       // 403
		h.do("POST", path, w.admin, map[string]any{"goal": "triage", "stream": true, // a stream
			"context": map[string]any{"transaction_id": "tx-stream"}}),
	} {
		note(r)
	}

	total := len(got) + 1
	page := waitInvokeAudited(t, h, total)
	if len(page.Records) != total {
		t.Fatalf("%d invoke records, want %d", len(page.Records), total)
	}
	gone := 0
	for _, rec := range page.Records {
		status, ok := got[rec.RequestID]
		switch {
		case !ok && rec.Status == httpapi.StatusClientClosed:
			gone++
		case !ok:
			t.Errorf("record of request %s says %d; no client got an answer from it", rec.RequestID, rec.Status)
		case rec.Status != status:
			t.Errorf("record of request %s says %d, its client got %d", rec.RequestID, rec.Status, status)
		}
	}
	if gone != 1 {
		t.Errorf("%d records of a request whose client left before its answer, want 1", gone)
	}
	seen := map[int]int{}
	for _, s := range got {
		seen[s]++
	}
	if seen[200] != 4 || seen[202] != 1 || seen[422] != 2 || seen[404] != 1 || seen[403] != 1 {
		t.Errorf("statuses received %v; the mix is not what the test means to send", seen)
	}
}
