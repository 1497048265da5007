package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/workflow"
)

// equalJSON compares JSON by value: a replay is stored as one JSON
// document, which may re-encode the JSON inside it.
var equalJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
})

// replayStep is step seq as a replay shows it: without the workflow id and
// event number, which are not part of a step's JSON.
func replayStep(seq int) *workflow.Step {
	st := newStep("", seq)
	st.Seq = 0
	return st
}

// newReplay is a real (not dry) replay of workflowID against target, made i
// seconds after base, with one entry of each kind.
func newReplay(tenant, workflowID, target string, i int) *replay.Replay {
	at := base.Add(time.Duration(i) * time.Second)
	changed := replayStep(2)
	changed.Tool, changed.Operation, changed.Args = "pets", "getPet", json.RawMessage(`{"id": 7}`)
	refused := replayStep(3)
	refused.Status, refused.Error, refused.Sent = "error", "denied by policy", false
	refused.Request, refused.HTTPStatus, refused.Attempts = nil, 0, 0
	return &replay.Replay{
		ID: ids.NewAt(ids.Replay, at), Tenant: tenant, WorkflowID: workflowID, Target: target, Status: replay.StatusCompleted,
		OriginalVersion: "triage@1", OriginalOutcome: "routed", ReplayOutcome: "escalated",
		Delta: replay.Delta{StepsAdded: 1, StepsChanged: 1, StepsRemoved: 1, ToolCallsChanged: 2},
		Steps: []replay.Entry{
			{Kind: replay.Same, Original: replayStep(1), Replay: replayStep(1)},
			{Kind: replay.Changed, Fields: []string{"operation", "args"}, Original: replayStep(2), Replay: changed},
			{Kind: replay.Removed, Original: refused},
			{Kind: replay.Added, Replay: replayStep(4)},
		},
		ReplayWorkflowID: ids.NewAt(ids.Workflow, at),
		Creator:          replay.Creator{Sub: "user-1", ClientID: "cli-1", Scopes: []string{"replays:write", "tools:read"}},
		CreatedAt:        at,
	}
}

func replayIDs(rs []*replay.Replay) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// replayRecord is the audit record of creating r.
func replayRecord(r *replay.Replay, i int) *audit.Record {
	rec := record(r.Tenant, "replay.create", i)
	rec.Resource = audit.Resource{Type: "replay", ID: r.ID}
	rec.WorkflowID = r.WorkflowID
	return rec
}

// testReplayRoundTrip stores a replay with its audit record and reads it
// back whole; a second create of the same id stores nothing.
func testReplayRoundTrip(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	r := newReplay("acme", "wf_1", "triage@2", 0)
	r.CreatedAt = r.CreatedAt.Add(321) // finer than stores keep
	must(t, s.CreateReplay(ctx, r, replayRecord(r, 0)), "create replay")
	if !r.CreatedAt.Equal(base) {
		t.Errorf("CreatedAt after create = %v, want the microsecond of base", r.CreatedAt)
	}
	got, err := s.Replay(ctx, "acme", r.ID)
	must(t, err, "replay")
	if diff := cmp.Diff(r, got, equalJSON); diff != "" {
		t.Errorf("Replay after create (-want +got):\n%s", diff)
	}

	dup := *r
	wantCode(t, s.CreateReplay(ctx, &dup, replayRecord(r, 1)), problem.Conflict, "same replay again")

	// A dry run, created without a time, is stamped by the store.
	dry := newReplay("acme", "wf_1", "triage@3", 1)
	dry.DryRun, dry.ReplayWorkflowID, dry.ReplayError, dry.CreatedAt = true, "", "the agent failed", time.Time{}
	dry.Steps, dry.Creator.Scopes = nil, nil
	must(t, s.CreateReplay(ctx, dry, nil), "create dry replay")
	if dry.CreatedAt.IsZero() {
		t.Error("CreatedAt of a replay created without one is still zero")
	}
	got, err = s.Replay(ctx, "acme", dry.ID)
	must(t, err, "dry replay")
	if diff := cmp.Diff(dry, got, equalJSON); diff != "" {
		t.Errorf("dry Replay (-want +got):\n%s", diff)
	}

	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query audit")
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want the one of the first create", len(recs))
	}
	if rec := recs[0]; rec.Action != "replay.create" || rec.Resource != (audit.Resource{Type: "replay", ID: r.ID}) ||
		rec.WorkflowID != "wf_1" || rec.Seq != 1 {
		t.Errorf("audit record = %s %+v workflow %q seq %d; want replay.create of %s, workflow wf_1, seq 1",
			rec.Action, rec.Resource, rec.WorkflowID, rec.Seq, r.ID)
	}
	verifyOK(t, s, "acme", 1)
}

// testReplayTenantIsolation checks that a tenant sees only its replays and
// that ReplayByID finds any tenant's.
func testReplayTenantIsolation(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	r := newReplay("acme", "wf_1", "triage@2", 0)
	must(t, s.CreateReplay(ctx, r, replayRecord(r, 0)), "create replay")

	_, err := s.Replay(ctx, "globex", r.ID)
	wantCode(t, err, problem.NotFound, "another tenant's replay")
	_, err = s.Replay(ctx, "acme", "rpl_nope")
	wantCode(t, err, problem.NotFound, "unknown replay")
	_, err = s.ReplayByID(ctx, "rpl_nope")
	wantCode(t, err, problem.NotFound, "unknown replay by id")
	got, err := s.ReplayByID(ctx, r.ID)
	must(t, err, "replay by id")
	if diff := cmp.Diff(r, got, equalJSON); diff != "" {
		t.Errorf("ReplayByID (-want +got):\n%s", diff)
	}
	if got, err := s.ListReplays(ctx, "globex", replay.ListFilter{}); err != nil || len(got) != 0 {
		t.Errorf("another tenant lists %v, %v; want none", replayIDs(got), err)
	}
	verifyOK(t, s, "acme", 1)
	verifyOK(t, s, "globex", 0)
}

func testReplayList(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	all := make([]*replay.Replay, 8) // oldest first
	// Created out of order: the list is ordered by id, not by insertion.
	for _, i := range []int{3, 0, 7, 5, 1, 6, 2, 4} {
		wf, target := "wf_a", "triage@2"
		if i%2 == 1 {
			wf = "wf_b"
		}
		if i%3 == 0 {
			target = "triage@3"
		}
		all[i] = newReplay("acme", wf, target, i)
		must(t, s.CreateReplay(ctx, all[i], nil), fmt.Sprintf("create replay %d", i))
	}
	other := newReplay("globex", "wf_a", "triage@2", 20)
	must(t, s.CreateReplay(ctx, other, nil), "create globex replay")
	pick := func(keep func(i int) bool) []string {
		var out []string
		for i := len(all) - 1; i >= 0; i-- {
			if keep(i) {
				out = append(out, all[i].ID)
			}
		}
		return out
	}
	tests := []struct {
		name string
		f    replay.ListFilter
		want []string
	}{
		{"all", replay.ListFilter{}, pick(func(int) bool { return true })},
		{"workflow", replay.ListFilter{WorkflowID: "wf_b"}, pick(func(i int) bool { return i%2 == 1 })},
		{"target", replay.ListFilter{Target: "triage@3"}, pick(func(i int) bool { return i%3 == 0 })},
		{"workflow and target", replay.ListFilter{WorkflowID: "wf_a", Target: "triage@3"}, pick(func(i int) bool { return i%2 == 0 && i%3 == 0 })},
		{"before", replay.ListFilter{Before: all[3].ID}, pick(func(i int) bool { return i < 3 })},
		{"workflow before", replay.ListFilter{WorkflowID: "wf_a", Before: all[4].ID}, pick(func(i int) bool { return i%2 == 0 && i < 4 })},
		{"limit", replay.ListFilter{Limit: 3}, pick(func(i int) bool { return i >= 5 })},
		{"no match", replay.ListFilter{Target: "nobody@1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListReplays(ctx, "acme", tc.f)
			must(t, err, "list")
			if diff := cmp.Diff(tc.want, replayIDs(got)); diff != "" {
				t.Errorf("ListReplays(%+v) (-want +got):\n%s", tc.f, diff)
			}
		})
	}

	// Paging by cursor visits every replay once, newest first.
	var paged []string
	f := replay.ListFilter{Limit: 3}
	for range 10 {
		page, err := s.ListReplays(ctx, "acme", f)
		must(t, err, "page")
		paged = append(paged, replayIDs(page)...)
		if len(page) < f.Limit {
			break
		}
		f.Before = page[len(page)-1].ID
	}
	if diff := cmp.Diff(pick(func(int) bool { return true }), paged); diff != "" {
		t.Errorf("paged ids (-want +got):\n%s", diff)
	}
	got, err := s.ListReplays(ctx, "acme", replay.ListFilter{Limit: 1})
	must(t, err, "list one")
	if diff := cmp.Diff([]*replay.Replay{all[7]}, got, equalJSON); diff != "" {
		t.Errorf("listed replay (-want +got):\n%s", diff)
	}
}
