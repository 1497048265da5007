package replay_test

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

// heldHistory is the SQLite store, except that reading workflow held waits
// until release is closed: the batch's replay of it cannot end before.
type heldHistory struct {
	*sqlite.DB
	held    string
	release chan struct{}
}

func (s heldHistory) Workflow(ctx context.Context, tenant, id string) (*workflow.Workflow, error) {
	if id == s.held {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.DB.Workflow(ctx, tenant, id)
}

// nextProgress is the next progress a follower yields; it fails t when the
// follow ended or failed first.
func nextProgress(t *testing.T, next func() (replay.Progress, error, bool), what string) replay.Progress {
	t.Helper()
	p, err, ok := next()
	if err != nil || !ok {
		t.Fatalf("%s: the follow ended (%v) before yielding", what, err)
	}
	return p
}

// TestFollowIsWokenByTheRunner follows a batch of three workflows whose
// last one's replay is held, with a fallback poll of an hour: the replays
// stored by the runner reach the follower while the batch still runs, so
// by the runner's word and not by a poll, and the batch's end does too.
func TestFollowIsWokenByTheRunner(t *testing.T) {
	db := sqlite.NewTestDB(t)
	wfIDs := notesBatch(t, db)
	programs := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db})
	held := heldHistory{DB: db, held: wfIDs[2], release: make(chan struct{})}
	svc := &replay.Service{Workflows: held, Versions: db, Programs: programs, Store: db}
	runner := &replay.BatchRunner{Service: svc, Store: db, Owner: "replica-a", Workers: 1, Lease: time.Minute, FollowPoll: time.Hour}
	b := replay.NewBatch("acme", "notes@1", len(wfIDs), replay.Creator{Sub: "alice"}, time.Now().UTC())
	if err := db.CreateBatch(context.Background(), b, wfIDs, "replica-a", runner.LeaseUntil(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a broken wake-up from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next, stop := iter.Pull2(runner.Follow(ctx, "acme", b.ID))
	defer stop()
	if p := nextProgress(t, next, "first"); p != (replay.Progress{Status: replay.BatchRunning, Total: 3}) {
		t.Fatalf("first progress %+v, want the batch running with nothing done", p)
	}

	ran := make(chan struct{})
	go func() { defer close(ran); runner.Run(ctx) }()
	released := false
	defer func() {
		if !released {
			close(held.release)
		}
		cancel()
		<-ran
	}()
	// The first two replays, stored while the third is held.
	for done := 0; done < 2; {
		p := nextProgress(t, next, "while the third replay is held")
		if !p.Running() || p.Done <= done || p.Done > 2 {
			t.Fatalf("progress %+v after %d done; want the batch running with more done, at most 2", p, done)
		}
		done = p.Done
	}
	close(held.release)
	released = true
	var p replay.Progress
	for p = nextProgress(t, next, "after the release"); p.Running(); p = nextProgress(t, next, "after the release") {
	}
	if want := (replay.Progress{Status: replay.BatchCompleted, Total: 3, Done: 3}); p != want {
		t.Errorf("last progress %+v, want %+v", p, want)
	}
	if _, _, ok := next(); ok {
		t.Error("the follow went on after the batch ended")
	}
}

// TestFollowPollsForAnotherReplicasChanges follows, on a runner that does
// not run the batch (another replica's, in effect), a batch the first
// runner replays: no word reaches the follower, whose fallback poll sees
// the batch to its end.
func TestFollowPollsForAnotherReplicasChanges(t *testing.T) {
	db := sqlite.NewTestDB(t)
	wfIDs := notesBatch(t, db)
	programs := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db})
	svc := &replay.Service{Workflows: db, Versions: db, Programs: programs, Store: db}
	runner := &replay.BatchRunner{Service: svc, Store: db, Owner: "replica-a", Workers: 1, Lease: time.Minute}
	elsewhere := &replay.BatchRunner{Service: svc, Store: db, Owner: "replica-b", FollowPoll: 10 * time.Millisecond}
	b := replay.NewBatch("acme", "notes@1", len(wfIDs), replay.Creator{Sub: "alice"}, time.Now().UTC())
	if err := db.CreateBatch(context.Background(), b, wfIDs, "replica-a", runner.LeaseUntil(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran := make(chan struct{})
	go func() { defer close(ran); runner.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	var last replay.Progress
	for p, err := range elsewhere.Follow(ctx, "acme", b.ID) {
		if err != nil {
			t.Fatal(err)
		}
		last = p
	}
	if want := (replay.Progress{Status: replay.BatchCompleted, Total: 3, Done: 3}); last != want {
		t.Errorf("last progress %+v, want %+v", last, want)
	}
}

// heldBatchReads is the SQLite store, except that a read of a whole batch
// is counted, reported on entered, and waits until release is closed.
type heldBatchReads struct {
	*sqlite.DB
	reads            atomic.Int32
	entered, release chan struct{}
}

func (s *heldBatchReads) Batch(ctx context.Context, tenant, id string) (*replay.Batch, error) {
	s.reads.Add(1)
	s.entered <- struct{}{}
	<-s.release
	return s.DB.Batch(ctx, tenant, id)
}

// TestEndedIsOneReadForTheFollowersAskingTogether checks that the
// followers of a batch that ended, asking for it whole at once, share one
// read, which the first asker's going away does not fail.
func TestEndedIsOneReadForTheFollowersAskingTogether(t *testing.T) {
	db := sqlite.NewTestDB(t)
	ctx := context.Background()
	b := replay.NewBatch("acme", "notes@1", 1, replay.Creator{Sub: "alice"}, time.Now().UTC())
	if err := db.CreateBatch(ctx, b, []string{"wf_1"}, "replica-a", time.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FinishBatch(ctx, b.ID, replay.BatchCancelled, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	st := &heldBatchReads{DB: db, entered: make(chan struct{}, 10), release: make(chan struct{})}
	runner := &replay.BatchRunner{Store: st, Owner: "replica-a"}

	firstCtx, leave := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { _, err := runner.Ended(firstCtx, "acme", b.ID); first <- err }()
	<-st.entered // the read is under way, and held
	type got struct {
		b   *replay.Batch
		err error
	}
	others := make(chan got, 4)
	for range 4 {
		go func() { b, err := runner.Ended(ctx, "acme", b.ID); others <- got{b, err} }()
	}
	leave()
	if err := <-first; err == nil {
		t.Error("the first asker, gone, got the batch")
	}
	close(st.release)
	var shared *replay.Batch
	for range 4 {
		g := <-others
		if g.err != nil || g.b == nil || g.b.Status != replay.BatchCancelled {
			t.Fatalf("an asker got %+v, %v; want the cancelled batch", g.b, g.err)
		}
		if shared != nil && g.b != shared {
			t.Error("the askers got batches of reads of their own")
		}
		shared = g.b
	}
	if n := st.reads.Load(); n != 1 {
		t.Errorf("%d reads of the batch for five askers, want 1", n)
	}
}
