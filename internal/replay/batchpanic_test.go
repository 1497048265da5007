package replay_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

// explodingHistory is the SQLite store, except that reading the steps of
// the workflow boom panics, as a broken decoder of a record would.
type explodingHistory struct {
	*sqlite.DB
	boom string
}

func (s explodingHistory) Steps(ctx context.Context, id string, after int) ([]workflow.Step, error) {
	if id == s.boom {
		panic("the record's decoder broke")
	}
	return s.DB.Steps(ctx, id, after)
}

// notesBatch stores three finished workflows of an agent notes and
// returns their ids.
func notesBatch(t *testing.T, db *sqlite.DB) []string {
	t.Helper()
	ctx := context.Background()
	def := json.RawMessage(`{"tools": [], "steps": [{"action": "note", "set": {"x": "1"}}], "outcome": "'noted'"}`)
	if err := db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "notes", Definition: def, DeployedAt: time.Now()}, false, nil); err != nil {
		t.Fatal(err)
	}
	var wfIDs []string
	for range 3 {
		now := time.Now().UTC().Truncate(time.Microsecond)
		wf := &workflow.Workflow{ID: ids.NewAt(ids.Workflow, now), Tenant: "acme", Agent: "notes", AgentVersion: "1",
			Status: workflow.Running, Goal: "note", Context: json.RawMessage(`{}`), MaxToolCalls: 5,
			Caller:    workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}},
			StartedAt: now, Deadline: now.Add(time.Minute), Owner: "replica-a", LeaseUntil: now.Add(time.Minute)}
		if err := db.CreateWorkflow(ctx, wf, nil); err != nil {
			t.Fatal(err)
		}
		wf.Status, wf.Outcome, wf.FinishedAt = workflow.Completed, "noted", now
		if err := db.FinishWorkflow(ctx, "replica-a", wf, nil); err != nil {
			t.Fatal(err)
		}
		wfIDs = append(wfIDs, wf.ID)
	}
	return wfIDs
}

// runBatch runs a batch of the workflows on a runner over svc and st until
// the batch is over, and returns it.
func runBatch(t *testing.T, db *sqlite.DB, svc *replay.Service, st replay.BatchStore, wfIDs []string) *replay.Batch {
	t.Helper()
	return runBatchChecked(t, db, svc, st, wfIDs, replay.Spec{})
}

// runBatchChecked is runBatch of a batch that checks what spec asks.
func runBatchChecked(t *testing.T, db *sqlite.DB, svc *replay.Service, st replay.BatchStore, wfIDs []string, spec replay.Spec) *replay.Batch {
	t.Helper()
	ctx := context.Background()
	runner := &replay.BatchRunner{Service: svc, Store: st, Owner: "replica-a", Workers: 2, Lease: time.Minute}
	b := replay.NewBatch("acme", "notes@1", len(wfIDs), replay.Creator{Sub: "alice"}, time.Now().UTC())
	b.Spec = spec
	if err := db.CreateBatch(ctx, b, wfIDs, "replica-a", runner.LeaseUntil(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); runner.Run(runCtx) }()
	defer func() { stop(); <-ran }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := db.Batch(ctx, "acme", b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != replay.BatchRunning {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch is still running after 10 s: %+v", got)
		}
	}
}

// TestABatchGoesOnPastAPanic checks that a workflow whose replay panics
// gets a failed replay with error code internal, and the batch replays
// the others and completes.
func TestABatchGoesOnPastAPanic(t *testing.T) {
	db := sqlite.NewTestDB(t)
	ctx := context.Background()
	wfIDs := notesBatch(t, db)
	programs := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db})
	svc := &replay.Service{Workflows: explodingHistory{DB: db, boom: wfIDs[1]}, Versions: db, Programs: programs, Store: db}
	got := runBatch(t, db, svc, db, wfIDs)
	if got.Status != replay.BatchCompleted || got.Done != 3 {
		t.Fatalf("batch %s, %d done, error %q; want completed with 3", got.Status, got.Done, got.Error)
	}
	rps, err := db.BatchReplays(ctx, got.ID, false, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, rp := range rps {
		want, code := "noted", ""
		if rp.WorkflowID == wfIDs[1] {
			want, code = agent.OutcomeFailed, workflow.ErrorCodeInternal
		}
		if rp.ReplayOutcome != want || rp.ReplayErrorCode != code {
			t.Errorf("replay of %s: %s (%q, code %q), want %s with code %q", rp.WorkflowID, rp.ReplayOutcome, rp.ReplayError, rp.ReplayErrorCode, want, code)
		}
	}
}

// explodingReplays is the SQLite store, except that storing a batch's
// replays panics.
type explodingReplays struct{ *sqlite.DB }

func (explodingReplays) AddBatchReplays(context.Context, string, []replay.BatchReplay) (int, error) {
	panic("the replay's encoder broke")
}

// TestABatchWhoseReplaysCannotBeStoredFails checks that a panic while
// storing a batch's replays fails the batch, so that it is not claimed
// again into the same panic.
func TestABatchWhoseReplaysCannotBeStoredFails(t *testing.T) {
	db := sqlite.NewTestDB(t)
	wfIDs := notesBatch(t, db)
	programs := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db})
	svc := &replay.Service{Workflows: db, Versions: db, Programs: programs, Store: db}
	got := runBatch(t, db, svc, explodingReplays{db}, wfIDs)
	if got.Status != replay.BatchFailed || got.Error != "the server failed while storing the batch's replays" {
		t.Errorf("batch %s, error %q; want failed by the server", got.Status, got.Error)
	}
}

// slowRenewal is the SQLite store, except that a lease renewal, once its
// context ends, returns only when the test lets it; storing replays waits
// until a renewal is under way, and finishing the batch is reported.
type slowRenewal struct {
	*sqlite.DB
	entered, release, finished chan struct{}
	once                       *sync.Once
}

func (s slowRenewal) RenewBatch(ctx context.Context, id, owner string, until time.Time) error {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	<-s.release
	return ctx.Err()
}

func (s slowRenewal) AddBatchReplays(ctx context.Context, id string, rs []replay.BatchReplay) (int, error) {
	<-s.entered
	return s.DB.AddBatchReplays(ctx, id, rs)
}

func (s slowRenewal) FinishBatch(ctx context.Context, id, status, msg string, at time.Time) (bool, error) {
	defer close(s.finished)
	return s.DB.FinishBatch(ctx, id, status, msg, at)
}

// TestABatchIsFinishedOnlyAfterItsLeaseRenewalStops checks that the lease
// renewal of a batch is stopped and waited for before the batch is
// finished: a renewal landing after the end would hold a lease on a batch
// no one runs.
func TestABatchIsFinishedOnlyAfterItsLeaseRenewalStops(t *testing.T) {
	db := sqlite.NewTestDB(t)
	wfIDs := notesBatch(t, db)
	programs := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db})
	svc := &replay.Service{Workflows: db, Versions: db, Programs: programs, Store: db}
	st := slowRenewal{DB: db, entered: make(chan struct{}), release: make(chan struct{}), finished: make(chan struct{}), once: &sync.Once{}}
	runner := &replay.BatchRunner{Service: svc, Store: st, Owner: "replica-a", Workers: 2, Lease: 30 * time.Millisecond}
	b := replay.NewBatch("acme", "notes@1", len(wfIDs), replay.Creator{Sub: "alice"}, time.Now().UTC())
	if err := db.CreateBatch(context.Background(), b, wfIDs, "replica-a", time.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); runner.Run(ctx) }()
	released := false
	defer func() {
		if !released {
			close(st.release)
		}
		stop()
		<-ran
	}()

	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no lease renewal within 10 s")
	}
	// The replays are stored; the renewal in flight has not returned, so
	// the batch must not be finished yet.
	select {
	case <-st.finished:
		t.Fatal("the batch was finished while its lease renewal was still under way")
	case <-time.After(200 * time.Millisecond):
	}
	close(st.release)
	released = true
	select {
	case <-st.finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch was not finished within 10 s of its renewal returning")
	}
}
