package httpapi_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/httpapi"
)

// openStream opens an event stream and returns it once its first event
// has arrived; ok is false with the response when the server refused it.
func openStream(t *testing.T, h *harness, path, token string) (resp *http.Response, ok bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "GET", h.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err = h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp, false
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream %s ended before its first event: %v", path, err)
		}
		if strings.HasPrefix(line, "data:") {
			return resp, true
		}
	}
}

// TestEventStreamsAreCappedPerTenant checks --max-streams-per-tenant: at
// the cap a tenant's next event stream, and an invoke asking for one, are
// refused with 429 rate-limited and Retry-After before any workflow
// starts; sync invokes and other tenants are not held back; a stream that
// ends frees its place.
func TestEventStreamsAreCappedPerTenant(t *testing.T) {
	h := newHarness(t, func(c *httpapi.Config, _ *httpapi.Deps) { c.MaxStreamsPerTenant = 2 })
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("tx-big", 900.0)
	invoke := map[string]any{"goal": "refund", "context": map[string]any{"transaction_id": "tx-big"}}
	var wf struct {
		WorkflowID string `json:"workflow_id"`
		Status     string `json:"status"`
	}
	if r := h.do("POST", "/v1/agents/refunds/invoke", w.admin, invoke); r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	} else if r.json(t, &wf); wf.Status != "waiting" {
		t.Fatalf("invoke: %s; want the workflow waiting", r.Body)
	}
	events := "/v1/workflows/" + wf.WorkflowID + "/events"
	var open []*http.Response
	for range 2 {
		resp, ok := openStream(t, h, events, w.admin)
		if !ok {
			t.Fatalf("stream under the cap: %d", resp.StatusCode)
		}
		open = append(open, resp)
	}
	defer func() {
		for _, resp := range open {
			resp.Body.Close()
		}
	}()

	r := h.do("GET", events, w.admin, nil, "Accept", "text/event-stream")
	if r.Status != 429 || r.problem(t).Code != "rate-limited" || r.Header.Get("Retry-After") == "" {
		t.Errorf("a third stream: %d %v %s; want 429 rate-limited with Retry-After", r.Status, r.Header, r.Body)
	}
	before := w.payments.Load()
	streamed := map[string]any{"goal": "refund", "context": map[string]any{"transaction_id": "tx-big"}, "stream": true}
	if r := h.do("POST", "/v1/agents/refunds/invoke", w.admin, streamed); r.Status != 429 || r.problem(t).Code != "rate-limited" {
		t.Errorf("an invoke with a stream at the cap: %d %s; want 429", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/agents/refunds/invoke", w.admin, invoke); r.Status != 200 {
		t.Errorf("a sync invoke at the cap: %d %s; want 200", r.Status, r.Body)
	}
	if got := w.payments.Load(); got != before+1 {
		t.Errorf("%d workflows ran after the refused stream; want 1, the sync invoke's", got-before)
	}
	// Another tenant's streams are its own: its invoke gets past the cap
	// (to the agent it has not deployed).
	globex := h.token("globex", adminScopes)
	if r := h.do("POST", "/v1/agents/refunds/invoke", globex, streamed); r.Status != 404 {
		t.Errorf("another tenant's invoke with a stream: %d %s; want 404, no agent", r.Status, r.Body)
	}

	open[0].Body.Close()
	open = open[1:]
	waitFor(t, func() bool {
		resp, ok := openStream(t, h, events, w.admin)
		if ok {
			open = append(open, resp)
		} else {
			resp.Body.Close()
		}
		return ok
	})
}
