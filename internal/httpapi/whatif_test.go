package httpapi_test

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/replay"
)

// noModels is a replay.Models that is never asked: the fraud-triage agent
// has no plan step.
type noModels struct{}

func (noModels) Complete(context.Context, string, string, int, int, agent.ChatRequest) (agent.ChatResponse, *replay.Cost, error) {
	panic("no completion expected")
}

func withModels(_ *httpapi.Config, d *httpapi.Deps) { d.Replays.Models = noModels{} }

// TestWhatIfRequestsAreChecked checks that llm, unrecorded_calls and
// concurrency refuse what they do not take, each naming its field.
func TestWhatIfRequestsAreChecked(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", replayScopes+" agents:invoke")
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1"}})
	path := "/v1/workflows/" + wf["workflow_id"].(string) + "/replay"
	for _, c := range []struct {
		path  string
		body  map[string]any
		field string
	}{
		{path, map[string]any{"target_agent_version": "fraud-triage@1", "llm": "sometimes"}, "llm"},
		{path, map[string]any{"target_agent_version": "fraud-triage@1", "unrecorded_calls": "write"}, "unrecorded_calls"},
		{path, map[string]any{"target_agent_version": "fraud-triage@1", "llm": "live"}, "llm"}, // no models here
		{path, map[string]any{"target_agent_version": "fraud-triage@1", "dry_run": false, "unrecorded_calls": "read"}, "unrecorded_calls"},
		{"/v1/replay-batches", map[string]any{"target_agent_version": "fraud-triage@1", "workflow_ids": []string{wf["workflow_id"].(string)}, "concurrency": 65}, "concurrency"},
		{"/v1/replay-batches", map[string]any{"target_agent_version": "fraud-triage@1", "workflow_ids": []string{wf["workflow_id"].(string)}, "llm": "LIVE"}, "llm"},
	} {
		r := h.do("POST", c.path, tok, c.body)
		if r.Status != 422 {
			t.Errorf("%v: %d %s, want 422", c.body, r.Status, r.Body)
			continue
		}
		doc := r.problem(t)
		if len(doc.Errors) != 1 || doc.Errors[0].Field != c.field || doc.Errors[0].Message == "" {
			t.Errorf("%v: errors %+v, want one naming %s", c.body, doc.Errors, c.field)
		}
	}

	// The seed's request is unchanged: a recorded dry run, with usage.
	r := h.do("POST", path, tok, map[string]any{"target_agent_version": "fraud-triage@1", "dry_run": true})
	var got struct {
		replayResult
		LLM             string         `json:"llm"`
		UnrecordedCalls string         `json:"unrecorded_calls"`
		Usage           map[string]any `json:"usage"`
	}
	r.json(t, &got)
	if r.Status != 201 || got.LLM != "recorded" || got.UnrecordedCalls != "skip" || got.Usage["original"] == nil || got.ReplayOutcome != got.OriginalOutcome {
		t.Errorf("seed replay: %d %s", r.Status, r.Body)
	}
}

// TestUnrecordedReadsOverHTTP replays an escalated workflow against a
// version that fetches another transaction: skipped, the fetch is
// unrecorded and nothing reaches the tools; with unrecorded_calls read,
// exactly that fetch is made (a GET), the new amount clears the workflow,
// and the case API (a write) is never called.
func TestUnrecordedReadsOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withModels)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", `"args": {"id": "context.transaction_id"}`, `"args": {"id": "context.transaction_id + '-b'"}`)
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	if wf["outcome"] != "escalated" {
		t.Fatalf("v1 outcome = %v, want escalated", wf["outcome"])
	}
	id := wf["workflow_id"].(string)
	payments, cases := w.payments.Load(), w.cases.Load()

	skipped := w.replay(t, tok, id, map[string]any{"target_agent_version": "fraud-triage@2", "llm": "live"})
	if skipped.Steps[0].Replay["status"] != "unrecorded" || w.payments.Load() != payments || w.cases.Load() != cases {
		t.Errorf("skip: first step %v, %d payments and %d cases requests; want unrecorded and none",
			skipped.Steps[0].Replay, w.payments.Load()-payments, w.cases.Load()-cases)
	}
	read := w.replay(t, tok, id, map[string]any{"target_agent_version": "fraud-triage@2", "unrecorded_calls": "read"})
	if read.Steps[0].Replay["status"] != "ok" || read.ReplayOutcome != "cleared" {
		t.Errorf("read: first step %v, outcome %s; want the live answer and cleared", read.Steps[0].Replay, read.ReplayOutcome)
	}
	if n := w.payments.Load() - payments; n != 1 {
		t.Errorf("read: the payments API got %d requests, want the one fetch", n)
	}
	if n := w.cases.Load() - cases; n != 0 {
		t.Errorf("read: the cases API got %d writes, want none", n)
	}

	// A version whose case differs: its write has no recorded answer and
	// is not made, read or not.
	w.deployVersion(t, "3", `"queue": "queue"`, `"queue": "'fraud-review-2'"`)
	payments = w.payments.Load()
	write := w.replay(t, tok, id, map[string]any{"target_agent_version": "fraud-triage@3", "unrecorded_calls": "read"})
	last := write.Steps[len(write.Steps)-1].Replay
	if last["operation"] != "createCase" || last["status"] != "unrecorded" || w.cases.Load() != cases || w.payments.Load() != payments {
		t.Errorf("write: last step %v, %d cases and %d payments requests; want createCase unrecorded and none",
			last, w.cases.Load()-cases, w.payments.Load()-payments)
	}
}
