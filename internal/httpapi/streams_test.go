package httpapi_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
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
	t.Parallel()
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

// eventStream is an open event stream, read an event at a time.
type eventStream struct {
	resp *http.Response
	rd   *bufio.Reader
}

// openEventStream opens an event stream that the server must accept; the
// stream ends with ctx.
func openEventStream(ctx context.Context, t *testing.T, h *harness, path, token string) *eventStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", h.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open %s: %d", path, resp.StatusCode)
	}
	return &eventStream{resp: resp, rd: bufio.NewReader(resp.Body)}
}

// next returns the data of the stream's next event, or "" once it ended.
func (s *eventStream) next(t *testing.T) string {
	t.Helper()
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return ""
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			return strings.TrimSpace(data)
		}
	}
}

// streamRefusal opens an event stream that the server should refuse and
// returns the refusal; a stream it opens instead is closed at once, its
// body unread.
func streamRefusal(ctx context.Context, t *testing.T, h *harness, path, token string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", h.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := response{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		if r.Body, err = io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestBatchEventStreamsTakeStreamSlots checks that a replay batch's event
// stream counts against --max-streams-per-tenant as a workflow's does: at
// the cap the next batch stream and a workflow stream are refused with the
// same 429 rate-limited problem. Cancelling the batch wakes its followers,
// whose fallback poll is an hour: their streams end with complete, and
// their places are free again.
func TestBatchEventStreamsTakeStreamSlots(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *httpapi.Config, d *httpapi.Deps) {
		c.MaxStreamsPerTenant = 2
		// A runner that never runs: the batch stays running until it is
		// cancelled, and no other runner claims it within the hour.
		d.Batches = &replay.BatchRunner{Service: d.Replays, Store: d.BatchStore, Owner: "idle", Lease: time.Hour, FollowPoll: time.Hour}
	})
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	w.amounts.Store("tx-1", 20.0)
	wfID, _ := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-1"}})["workflow_id"].(string)
	r := h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "fraud-triage@2", "workflow_ids": []string{wfID}})
	var b batchResult
	if r.json(t, &b); r.Status != http.StatusAccepted {
		t.Fatalf("create batch: %d %s", r.Status, r.Body)
	}

	// The deadline only keeps a missing wake-up from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := "/v1/replay-batches/" + b.ID + "/events"
	var open []*eventStream
	for range 2 {
		s := openEventStream(ctx, t, h, events, tok)
		if ev := s.next(t); !strings.Contains(ev, `"event":"progress","done":0,"total":1`) {
			t.Fatalf("first event %q, want progress with nothing done", ev)
		}
		open = append(open, s)
	}

	batchRefused := streamRefusal(ctx, t, h, events, tok)
	workflowRefused := streamRefusal(ctx, t, h, "/v1/workflows/"+wfID+"/events", tok)
	if batchRefused.Status != http.StatusTooManyRequests || batchRefused.Header.Get("Retry-After") == "" {
		t.Fatalf("a third stream, of the batch: %d %v %s; want 429 rate-limited with Retry-After", batchRefused.Status, batchRefused.Header, batchRefused.Body)
	}
	if diff := cmp.Diff(workflowRefused.problem(t), batchRefused.problem(t), cmpopts.IgnoreFields(problem.Document{}, "Instance", "RequestID", "TraceID")); diff != "" {
		t.Errorf("the batch stream's refusal differs from the workflow stream's (-workflow +batch):\n%s", diff)
	}
	if got, want := batchRefused.Header.Get("Retry-After"), workflowRefused.Header.Get("Retry-After"); got != want {
		t.Errorf("Retry-After %q, the workflow stream's %q", got, want)
	}

	if r := h.do("POST", "/v1/replay-batches/"+b.ID+"/cancel", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	for i, s := range open {
		ev := s.next(t)
		if !strings.Contains(ev, `"event":"complete"`) || !strings.Contains(ev, `"status":"cancelled"`) {
			t.Errorf("stream %d after the cancel: %q, want complete with the batch cancelled", i, ev)
		}
		if ev := s.next(t); ev != "" {
			t.Errorf("stream %d went on after complete: %q", i, ev)
		}
	}
	waitFor(t, func() bool {
		r := h.do("GET", "/v1/workflows/"+wfID+"/events", tok, nil, "Accept", "text/event-stream")
		return r.Status == http.StatusOK
	})
}
