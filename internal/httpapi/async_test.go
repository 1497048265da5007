package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/replay"
)

// asyncPrefer asks for respond-async among other preferences, in another
// case and with parameters, as RFC 7240 allows.
const asyncPrefer = `wait=10, Respond-Async; note="a, b", handling=lenient`

func TestInvokePreferRespondAsyncAnswers202WithTheRunningWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	release := gate(t, w)
	body := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_async"}}

	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body, "Prefer", asyncPrefer, "Idempotency-Key", "async-1")
	if r.Status != http.StatusAccepted {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	var wf map[string]any
	r.json(t, &wf)
	id, _ := wf["workflow_id"].(string)
	if wf["status"] != "running" || id == "" || r.Header.Get("Workflow-Id") != id {
		t.Fatalf("202 body = %s, want the running workflow", r.Body)
	}
	if loc, pa := r.Header.Get("Location"), r.Header.Get("Preference-Applied"); loc != "/v1/workflows/"+id || pa != "respond-async" {
		t.Errorf("Location %q, Preference-Applied %q; want /v1/workflows/%s and respond-async", loc, pa, id)
	}
	// The body is the workflow as GET shows it.
	var got map[string]any
	h.do("GET", "/v1/workflows/"+id, w.admin, nil).json(t, &got)
	for _, k := range []string{"workflow_id", "agent", "agent_version", "goal", "context", "max_tool_calls", "caller"} {
		if !cmp.Equal(wf[k], got[k]) {
			t.Errorf("%s: 202 shows %v, GET %v", k, wf[k], got[k])
		}
	}

	again := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body, "Prefer", "respond-async", "Idempotency-Key", "async-1")
	if again.Status != http.StatusAccepted || again.Header.Get("Workflow-Id") != id || again.Header.Get("Idempotent-Replayed") != "true" ||
		again.Header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("repeat: %d %v %s; want the same 202", again.Status, again.Header, again.Body)
	}
	release()
	waitFor(t, func() bool {
		h.do("GET", "/v1/workflows/"+id, w.admin, nil).json(t, &got)
		return got["status"] == "completed"
	})
	if n := w.payments.Load(); n != 1 {
		t.Errorf("the payments API received %d requests, want 1", n)
	}
	page := waitInvokeAudited(t, h, 2)
	for _, rec := range page.Records {
		if rec.Status != http.StatusAccepted || rec.WorkflowID != id {
			t.Errorf("audit record: status %d workflow %q; want 202 of %s", rec.Status, rec.WorkflowID, id)
		}
	}
}

func TestInvokeIgnoresPreferencesItDoesNotSupport(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	body := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_sync"}}
	for _, prefer := range []string{"return=minimal", `respond-asynchronously`, `foo="respond-async"`} {
		r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body, "Prefer", prefer)
		if r.Status != http.StatusOK || r.Header.Get("Preference-Applied") != "" {
			t.Errorf("Prefer %s: %d %v, want a sync 200 with no preference applied", prefer, r.Status, r.Header)
		}
	}
	// A stream wins over respond-async.
	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "triage", "stream": true, "context": map[string]any{"transaction_id": "tx_stream"}}, "Prefer", "respond-async")
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream with respond-async: %d %v", r.Status, r.Header)
	}
}

// replayBody is a real replay of fraud-triage@2.
var replayBody = map[string]any{"target_agent_version": "fraud-triage@2", "dry_run": false}

// realReplayWorld has a finished workflow of fraud-triage@1 whose replay
// against version 2 clears it, and holds getTransaction (release lets it go).
func realReplayWorld(t *testing.T) (w *fraudWorld, tok, wfID string, release func()) {
	h := newHarness(t)
	w = newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok = h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	return w, tok, wf["workflow_id"].(string), gate(t, w)
}

// replayOf reads the replays of workflow wfID.
func replayList(t *testing.T, w *fraudWorld, tok, wfID string) []map[string]any {
	var page struct {
		Replays []map[string]any `json:"replays"`
	}
	w.h.do("GET", "/v1/replays?workflow_id="+wfID, tok, nil).json(t, &page)
	return page.Replays
}

func TestARealReplayWhoseClientLeavesCompletesAndARepeatReturnsIt(t *testing.T) {
	t.Parallel()
	w, tok, wfID, release := realReplayWorld(t)
	payments := w.payments.Load()

	// The client gives up after one second, while the new workflow's tool
	// call is held.
	b, _ := json.Marshal(replayBody)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", w.h.URL+"/v1/workflows/"+wfID+"/replay", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", "replay-once")
	if resp, err := w.h.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the replay answered %d before its workflow ended", resp.StatusCode)
	}
	rs := replayList(t, w, tok, wfID)
	if len(rs) != 1 || rs[0]["status"] != "running" || rs[0]["replay_workflow_id"] == "" {
		t.Fatalf("replays while the workflow runs: %v, want one running", rs)
	}
	id := rs[0]["replay_id"].(string)
	release()
	var got map[string]any
	waitFor(t, func() bool {
		w.h.do("GET", "/v1/replays/"+id, tok, nil).json(t, &got)
		return got["status"] == "completed"
	})
	if got["replay_outcome"] != "cleared" || !cmp.Equal(got["delta"], map[string]any{"steps_added": 0.0, "steps_changed": 2.0, "steps_removed": 1.0, "tool_calls_changed": 1.0}) {
		t.Errorf("completed replay: outcome %v delta %v", got["replay_outcome"], got["delta"])
	}

	r := w.h.do("POST", "/v1/workflows/"+wfID+"/replay", tok, replayBody, "Idempotency-Key", "replay-once")
	var again map[string]any
	r.json(t, &again)
	if r.Status != http.StatusCreated || again["replay_id"] != id || again["status"] != "completed" || r.Header.Get("Location") != "/v1/replays/"+id {
		t.Fatalf("repeat: %d %s, want replay %s completed", r.Status, r.Body, id)
	}
	if n := w.payments.Load() - payments; n != 1 {
		t.Errorf("the tool was called %d times by the replay and its repeat, want 1", n)
	}
	if rs := replayList(t, w, tok, wfID); len(rs) != 1 {
		t.Errorf("%d replays, want 1", len(rs))
	}
}

func TestARealReplayWithRespondAsyncAnswers202(t *testing.T) {
	t.Parallel()
	w, tok, wfID, release := realReplayWorld(t)
	r := w.h.do("POST", "/v1/workflows/"+wfID+"/replay", tok, replayBody, "Prefer", asyncPrefer, "Idempotency-Key", "replay-async")
	var rp map[string]any
	r.json(t, &rp)
	id, _ := rp["replay_id"].(string)
	if r.Status != http.StatusAccepted || rp["status"] != "running" || r.Header.Get("Location") != "/v1/replays/"+id ||
		r.Header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("async replay: %d %v %s", r.Status, r.Header, r.Body)
	}
	again := w.h.do("POST", "/v1/workflows/"+wfID+"/replay", tok, replayBody, "Prefer", "respond-async", "Idempotency-Key", "replay-async")
	var same map[string]any
	again.json(t, &same)
	if again.Status != http.StatusAccepted || same["replay_id"] != id {
		t.Fatalf("repeat: %d %s, want the same 202", again.Status, again.Body)
	}
	release()
	waitFor(t, func() bool {
		w.h.do("GET", "/v1/replays/"+id, tok, nil).json(t, &rp)
		return rp["status"] == "completed"
	})
	if rp["replay_outcome"] != "cleared" || rp["replay_workflow_id"] == "" {
		t.Errorf("completed replay: %v", rp)
	}
	// A dry run ignores the preference.
	dry := w.h.do("POST", "/v1/workflows/"+wfID+"/replay", tok, map[string]any{"target_agent_version": "fraud-triage@2"}, "Prefer", "respond-async")
	if dry.Status != http.StatusCreated || dry.Header.Get("Preference-Applied") != "" {
		t.Errorf("dry run with respond-async: %d %v", dry.Status, dry.Header)
	}
}

// TestRealReplaysRacingWithOneKeyRunOnce sends one keyed real replay from
// several clients at once: every one gets the same replay, which completes;
// a request that lost the race for the key leaves its own replay failed,
// saying which workflow the key made. (A loser's execution may have sent a
// read while its workflow was being stored, as any start does; never a
// write, which waits for the store.)
func TestRealReplaysRacingWithOneKeyRunOnce(t *testing.T) {
	t.Parallel()
	w, tok, wfID, release := realReplayWorld(t)
	const clients = 4
	answers := make(chan response, clients)
	for range clients {
		go func() {
			answers <- w.h.do("POST", "/v1/workflows/"+wfID+"/replay", tok, replayBody, "Prefer", "respond-async", "Idempotency-Key", "raced")
		}()
	}
	ids := map[string]int{}
	for range clients {
		r := <-answers
		var rp map[string]any
		r.json(t, &rp)
		if r.Status != http.StatusAccepted {
			t.Fatalf("a racing replay: %d %s", r.Status, r.Body)
		}
		ids[rp["replay_id"].(string)]++
	}
	if len(ids) != 1 {
		t.Fatalf("racing replays got %v, want one replay for all", ids)
	}
	release()
	var id string
	for id = range ids {
	}
	var got map[string]any
	waitFor(t, func() bool {
		w.h.do("GET", "/v1/replays/"+id, tok, nil).json(t, &got)
		return got["status"] == "completed"
	})
	for _, rp := range replayList(t, w, tok, wfID) {
		if rp["replay_id"] == id {
			continue
		}
		if rp["status"] != "failed" || !strings.Contains(fmt.Sprint(rp["replay_error"]), got["replay_workflow_id"].(string)) {
			t.Errorf("a losing request's replay: %v, want failed naming workflow %v", rp, got["replay_workflow_id"])
		}
	}
}

func TestTheSweepCompletesReplaysLeftRunning(t *testing.T) {
	t.Parallel()
	var svc *replay.Service
	h := newHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) { svc = d.Replays })
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	wfID := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})["workflow_id"].(string)
	done := w.replay(t, tok, wfID, replayBody)

	// A replica stopped between the end of a replay's workflow and the
	// replay's completion; another before it stored the workflow at all.
	now := time.Now().UTC()
	left := &replay.Replay{ID: ids.NewAt(ids.Replay, now), Tenant: "acme", WorkflowID: wfID, Target: "fraud-triage@2",
		Status: replay.StatusRunning, ReplayWorkflowID: done.ReplayWorkflowID, OriginalOutcome: done.OriginalOutcome, CreatedAt: now}
	old := now.Add(-10 * time.Minute)
	orphan := &replay.Replay{ID: ids.NewAt(ids.Replay, old), Tenant: "acme", WorkflowID: wfID, Target: "fraud-triage@2",
		Status: replay.StatusRunning, ReplayWorkflowID: ids.NewAt(ids.Workflow, old), CreatedAt: old}
	for _, r := range []*replay.Replay{left, orphan} {
		if err := h.DB.CreateReplay(t.Context(), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.CompleteRunning(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	h.do("GET", "/v1/replays/"+left.ID, tok, nil).json(t, &got)
	want := map[string]any{}
	for k, v := range done.Delta {
		want[k] = float64(v)
	}
	if got["status"] != "completed" || got["replay_outcome"] != "cleared" || !cmp.Equal(got["delta"], want) {
		t.Errorf("replay left running, after the sweep: %v %v %v; want completed, cleared, %v", got["status"], got["replay_outcome"], got["delta"], want)
	}
	h.do("GET", "/v1/replays/"+orphan.ID, tok, nil).json(t, &got)
	if got["status"] != "failed" || !strings.Contains(got["replay_error"].(string), "was not started") {
		t.Errorf("replay whose workflow was never stored, after the sweep: %v %v", got["status"], got["replay_error"])
	}
}
