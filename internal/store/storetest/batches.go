package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
)

// batchReplay is the dry replay of workflow wfID for a batch, from outcome
// from to outcome to.
func batchReplay(tenant, wfID, from, to string, i int) *replay.Replay {
	r := newReplay(tenant, wfID, "triage@2", i)
	r.DryRun, r.ReplayWorkflowID = true, ""
	r.OriginalOutcome, r.ReplayOutcome = from, to
	return r
}

// testBatchLifecycle creates a batch of five workflows, replays them out of
// order, and checks the counts, the pending list, the once-only rule, the
// replay pages (changed first) and finishing.
func testBatchLifecycle(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	b := replay.NewBatch("acme", "triage@2", 5, replay.Creator{Sub: "user-1", Scopes: []string{"workflows:replay"}}, base)
	wfs := []string{"wf_a", "wf_b", "wf_c", "wf_d", "wf_e"}
	rec := record("acme", "replay_batch.create", 0)
	rec.Resource = audit.Resource{Type: "replay_batch", ID: b.ID}
	must(t, s.CreateBatch(ctx, b, wfs, "replica-1", base.Add(time.Minute), rec), "create batch")

	got, err := s.Batch(ctx, "acme", b.ID)
	must(t, err, "batch")
	if got.Status != replay.BatchRunning || got.Total != 5 || got.Done != 0 || got.Changed != 0 || len(got.OutcomeChanges) != 0 {
		t.Errorf("new batch = %+v", got)
	}
	if diff := cmp.Diff(b.Creator, got.Creator); diff != "" {
		t.Errorf("creator (-want +got):\n%s", diff)
	}
	wantCode(t, errOf(s.Batch(ctx, "other", b.ID)), problem.NotFound, "another tenant's batch")

	outcomes := [][2]string{{"routed", "routed"}, {"routed", "escalated"}, {"approved", "approved"}, {"routed", "escalated"}, {"approved", "declined"}}
	var first []replay.BatchReplay
	for _, pos := range []int{3, 0} {
		first = append(first, replay.BatchReplay{Position: pos, Replay: batchReplay("acme", wfs[pos], outcomes[pos][0], outcomes[pos][1], pos)})
	}
	if n, err := s.AddBatchReplays(ctx, b.ID, first); err != nil || n != 2 {
		t.Fatalf("add two replays: %d, %v", n, err)
	}
	// Once only: a second replay of a workflow (another lease holder's) is
	// skipped; the others of the same call are stored.
	again := []replay.BatchReplay{
		{Position: 3, Replay: batchReplay("acme", wfs[3], "routed", "routed", 9)},
		{Position: 4, Replay: batchReplay("acme", wfs[4], outcomes[4][0], outcomes[4][1], 4)},
	}
	if n, err := s.AddBatchReplays(ctx, b.ID, again); err != nil || n != 1 {
		t.Fatalf("add a replay twice and a new one: stored %d (want 1), %v", n, err)
	}
	if _, err := s.Replay(ctx, "acme", again[0].Replay.ID); !problem.Is(err, problem.NotFound) {
		t.Errorf("the skipped second replay was stored: %v", err)
	}

	pending, err := s.PendingItems(ctx, b.ID, -1, 10)
	must(t, err, "pending")
	if want := []replay.BatchItem{{Position: 1, WorkflowID: "wf_b"}, {Position: 2, WorkflowID: "wf_c"}}; !slices.Equal(pending, want) {
		t.Errorf("pending = %v, want %v", pending, want)
	}
	pending, err = s.PendingItems(ctx, b.ID, 1, 10)
	must(t, err, "pending after 1")
	if want := []replay.BatchItem{{Position: 2, WorkflowID: "wf_c"}}; !slices.Equal(pending, want) {
		t.Errorf("pending after 1 = %v, want %v", pending, want)
	}

	got, err = s.Batch(ctx, "acme", b.ID)
	must(t, err, "batch")
	want := []replay.OutcomeChange{{From: "approved", To: "declined", Count: 1}, {From: "routed", To: "escalated", Count: 1}, {From: "routed", To: "routed", Count: 1}}
	if got.Done != 3 || got.Changed != 2 || !slices.Equal(got.OutcomeChanges, want) {
		t.Errorf("counts: done %d changed %d matrix %v, want 3, 2, %v", got.Done, got.Changed, got.OutcomeChanges, want)
	}
	if d := got.DeltaTotals; d.StepsAdded != 3 || d.ToolCallsChanged != 6 {
		t.Errorf("delta totals = %+v, want 3 steps added, 6 calls changed", d)
	}

	page, err := s.BatchReplays(ctx, b.ID, false, 0, 10)
	must(t, err, "batch replays")
	var order []string
	for _, r := range page {
		order = append(order, r.WorkflowID)
	}
	if want := []string{"wf_d", "wf_e", "wf_a"}; !slices.Equal(order, want) {
		t.Errorf("replays %v, want changed first then in order %v", order, want)
	}
	page, err = s.BatchReplays(ctx, b.ID, true, 1, 10)
	must(t, err, "changed replays, second")
	if len(page) != 1 || page[0].WorkflowID != "wf_e" || page[0].ReplayOutcome != "declined" {
		t.Errorf("changed replays from offset 1 = %v", replayIDs(page))
	}

	ok, err := s.FinishBatch(ctx, b.ID, replay.BatchCancelled, "", base.Add(time.Second))
	must(t, err, "finish")
	if !ok {
		t.Error("finishing a running batch reported it was not running")
	}
	if ok, _ := s.FinishBatch(ctx, b.ID, replay.BatchCompleted, "", base.Add(2*time.Second)); ok {
		t.Error("a finished batch was finished again")
	}
	got, err = s.BatchByID(ctx, b.ID)
	must(t, err, "batch by id")
	if got.Status != replay.BatchCancelled || got.FinishedAt == nil || !got.FinishedAt.Equal(base.Add(time.Second)) {
		t.Errorf("finished batch: status %s, finished %v", got.Status, got.FinishedAt)
	}
}

// testListBatches lists a tenant's batches newest first, with their
// counts, by target and page; another tenant's are not listed.
func testListBatches(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	creator := replay.Creator{Sub: "user-1"}
	var ids []string
	for i, target := range []string{"triage@2", "triage@3", "triage@2"} {
		b := replay.NewBatch("acme", target, 2, creator, base.Add(time.Duration(i)*time.Second))
		must(t, s.CreateBatch(ctx, b, []string{"wf_a", "wf_b"}, "replica-1", base.Add(time.Minute), record("acme", "replay_batch.create", 0)), "create batch")
		ids = append(ids, b.ID)
	}
	other := replay.NewBatch("globex", "triage@2", 1, creator, base)
	must(t, s.CreateBatch(ctx, other, []string{"wf_z"}, "replica-1", base.Add(time.Minute), record("globex", "replay_batch.create", 0)), "create another tenant's batch")
	if n, err := s.AddBatchReplays(ctx, ids[0], []replay.BatchReplay{
		{Position: 0, Replay: batchReplay("acme", "wf_a", "routed", "escalated", 0)},
		{Position: 1, Replay: batchReplay("acme", "wf_b", "routed", "routed", 1)},
	}); err != nil || n != 2 {
		t.Fatalf("replay the first batch: %d, %v", n, err)
	}

	listed := func(f replay.BatchListFilter) []string {
		t.Helper()
		bs, err := s.ListBatches(ctx, "acme", f)
		must(t, err, "list batches")
		var got []string
		for _, b := range bs {
			got = append(got, b.ID)
			if b.ID == ids[0] && (b.Done != 2 || b.Changed != 1 || b.Total != 2 || b.Target != "triage@2") {
				t.Errorf("listed batch %+v, want 2 of 2 replayed, 1 changed", b)
			}
		}
		return got
	}
	if got, want := listed(replay.BatchListFilter{}), []string{ids[2], ids[1], ids[0]}; !slices.Equal(got, want) {
		t.Errorf("batches %v, want newest first %v", got, want)
	}
	if got, want := listed(replay.BatchListFilter{Target: "triage@2"}), []string{ids[2], ids[0]}; !slices.Equal(got, want) {
		t.Errorf("batches of triage@2 %v, want %v", got, want)
	}
	if got, want := listed(replay.BatchListFilter{Limit: 1, Before: ids[2]}), []string{ids[1]}; !slices.Equal(got, want) {
		t.Errorf("the page after %s: %v, want %v", ids[2], got, want)
	}
}

// testBatchLeases: a leased batch is not claimed until its lease expires;
// renewal needs the lease; a finished batch is never claimed.
func testBatchLeases(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	b := replay.NewBatch("acme", "triage@2", 1, replay.Creator{Sub: "u"}, base)
	must(t, s.CreateBatch(ctx, b, []string{"wf_a"}, "replica-1", base.Add(time.Minute), nil), "create batch")
	got, err := s.ClaimBatch(ctx, "replica-2", base.Add(30*time.Second), base.Add(90*time.Second))
	must(t, err, "claim")
	if got != nil {
		t.Fatalf("claimed a batch whose lease holds: %s", got.ID)
	}
	// The replica that accepted it starts it at once, lease or not.
	got, err = s.ClaimBatch(ctx, "replica-1", base.Add(time.Second), base.Add(time.Minute))
	must(t, err, "claim by its owner")
	if got == nil || got.ID != b.ID {
		t.Fatalf("the accepting replica could not claim its own batch: %+v", got)
	}
	must(t, s.RenewBatch(ctx, b.ID, "replica-1", base.Add(2*time.Minute)), "renew")
	wantCode(t, s.RenewBatch(ctx, b.ID, "replica-2", base.Add(2*time.Minute)), problem.Conflict, "renew by another")
	got, err = s.ClaimBatch(ctx, "replica-2", base.Add(3*time.Minute), base.Add(4*time.Minute))
	must(t, err, "claim expired")
	if got == nil || got.ID != b.ID || got.Tenant != "acme" {
		t.Fatalf("claim after expiry = %+v", got)
	}
	wantCode(t, s.RenewBatch(ctx, b.ID, "replica-1", base.Add(5*time.Minute)), problem.Conflict, "renew by the old owner")
	if _, err := s.FinishBatch(ctx, b.ID, replay.BatchCompleted, "", base.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err = s.ClaimBatch(ctx, "replica-3", base.Add(time.Hour), base.Add(2*time.Hour))
	must(t, err, "claim finished")
	if got != nil {
		t.Errorf("claimed a finished batch")
	}
}

// errOf is the error of a (value, error) pair.
func errOf[T any](_ T, err error) error { return err }

// testBatchCounters follows a batch's counters through its life: they
// start at nothing, count each replay stored once (a second replay of a
// workflow, another lease holder's, counts nothing) and those whose outcome
// changed, agree with the counts of the items at every step, are what the
// list shows, and stay as they were when the batch ends.
func testBatchCounters(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	wfs := []string{"wf_a", "wf_b", "wf_c", "wf_d"}
	b := replay.NewBatch("acme", "triage@2", len(wfs), replay.Creator{Sub: "user-1"}, base)
	must(t, s.CreateBatch(ctx, b, wfs, "replica-1", base.Add(time.Minute), nil), "create batch")
	other := replay.NewBatch("acme", "triage@2", 1, replay.Creator{Sub: "user-1"}, base.Add(time.Second))
	must(t, s.CreateBatch(ctx, other, []string{"wf_a"}, "replica-1", base.Add(time.Minute), nil), "create another batch")

	check := func(step string, want replay.Progress) {
		t.Helper()
		got, err := s.BatchProgress(ctx, "acme", b.ID)
		must(t, err, step+": progress")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: progress (-want +got):\n%s", step, diff)
		}
		full, err := s.Batch(ctx, "acme", b.ID)
		must(t, err, step+": batch")
		if full.Done != got.Done || full.Changed != got.Changed || full.Status != got.Status {
			t.Errorf("%s: counters %+v, but the items count %d done, %d changed (%s)", step, got, full.Done, full.Changed, full.Status)
		}
		bs, err := s.ListBatches(ctx, "acme", replay.BatchListFilter{})
		must(t, err, step+": list")
		for _, l := range bs {
			if l.ID == b.ID && (l.Done != want.Done || l.Changed != want.Changed || l.Total != want.Total) {
				t.Errorf("%s: listed %d of %d done, %d changed; want %+v", step, l.Done, l.Total, l.Changed, want)
			}
		}
	}
	check("created", replay.Progress{Status: replay.BatchRunning, Total: 4})

	add := func(step, batchID string, want int, rs ...replay.BatchReplay) {
		t.Helper()
		if n, err := s.AddBatchReplays(ctx, batchID, rs); err != nil || n != want {
			t.Fatalf("%s: stored %d, %v; want %d", step, n, err, want)
		}
	}
	add("first two", b.ID, 2,
		replay.BatchReplay{Position: 0, Replay: batchReplay("acme", "wf_a", "routed", "escalated", 0)},
		replay.BatchReplay{Position: 2, Replay: batchReplay("acme", "wf_c", "routed", "routed", 2)})
	check("two stored", replay.Progress{Status: replay.BatchRunning, Total: 4, Done: 2, Changed: 1})

	add("one again and a new one", b.ID, 1,
		replay.BatchReplay{Position: 0, Replay: batchReplay("acme", "wf_a", "routed", "routed", 5)},
		replay.BatchReplay{Position: 1, Replay: batchReplay("acme", "wf_b", "approved", "declined", 1)})
	check("three stored", replay.Progress{Status: replay.BatchRunning, Total: 4, Done: 3, Changed: 2})
	add("all again", b.ID, 0, replay.BatchReplay{Position: 1, Replay: batchReplay("acme", "wf_b", "approved", "approved", 6)})
	check("nothing new", replay.Progress{Status: replay.BatchRunning, Total: 4, Done: 3, Changed: 2})

	// Another batch's replays count in its own counters only.
	add("the other batch's", other.ID, 1, replay.BatchReplay{Position: 0, Replay: batchReplay("acme", "wf_a", "routed", "escalated", 7)})
	if got, err := s.BatchProgress(ctx, "acme", other.ID); err != nil || got != (replay.Progress{Status: replay.BatchRunning, Total: 1, Done: 1, Changed: 1}) {
		t.Errorf("the other batch's progress: %+v, %v", got, err)
	}
	check("beside another batch", replay.Progress{Status: replay.BatchRunning, Total: 4, Done: 3, Changed: 2})

	add("the last", b.ID, 1, replay.BatchReplay{Position: 3, Replay: batchReplay("acme", "wf_d", "routed", "routed", 3)})
	ok, err := s.FinishBatch(ctx, b.ID, replay.BatchCompleted, "", base.Add(time.Minute))
	if err != nil || !ok {
		t.Fatalf("finish: %v, %v", ok, err)
	}
	check("completed", replay.Progress{Status: replay.BatchCompleted, Total: 4, Done: 4, Changed: 2})

	wantCode(t, errOf(s.BatchProgress(ctx, "globex", b.ID)), problem.NotFound, "another tenant's batch progress")
	wantCode(t, errOf(s.BatchProgress(ctx, "acme", "rpb_missing")), problem.NotFound, "progress of no batch")
}
