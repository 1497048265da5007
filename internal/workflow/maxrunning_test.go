package workflow_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// renewals is the SQLite store recording the workflows whose leases were
// renewed.
type renewals struct {
	*sqlite.DB
	mu      sync.Mutex
	renewed map[string]bool
}

func (s *renewals) RenewLease(ctx context.Context, owner string, ids []string, until time.Time) (workflow.LeaseStatus, error) {
	s.mu.Lock()
	for _, id := range ids {
		s.renewed[id] = true
	}
	s.mu.Unlock()
	return s.DB.RenewLease(ctx, owner, ids, until)
}

func (s *renewals) wasRenewed(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed[id]
}

// countedAPI answers after release is closed, counting the calls made.
type countedAPI struct {
	slowAPI
	calls atomic.Int32
}

func (a *countedAPI) Call(ctx context.Context, req tool.CallRequest) (tool.CallResult, error) {
	a.calls.Add(1)
	return a.slowAPI.Call(ctx, req)
}

// TestExecutionsBeyondMaxRunningQueue checks that with MaxRunning
// executions running, further ones wait without calling anything, keep
// their leases renewed, can be cancelled, start in turn once a slot
// frees, and do not hold a shutdown up (their leases are released for the
// next start).
func TestExecutionsBeyondMaxRunningQueue(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	st := &renewals{DB: db, renewed: map[string]bool{}}
	api := &countedAPI{slowAPI: slowAPI{release: make(chan struct{})}}
	r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Owner: "replica-a",
		Lease: 300 * time.Millisecond, MaxRunning: 1})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go r.Run(runCtx)
	defer r.Close(ctx)
	executions := func(running, queued int) func() bool {
		return func() bool {
			gotRunning, gotQueued := r.Executions()
			return gotRunning == running && gotQueued == queued
		}
	}

	first, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the first call", 5*time.Second, func() bool { return api.calls.Load() == 1 })
	cancelled, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	queued, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	within(t, "one running, two queued", 5*time.Second, executions(1, 2))
	within(t, "the queued workflow's lease renewed", 5*time.Second, func() bool { return st.wasRenewed(queued.ID) })

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if wf, err := r.Cancel(wctx, "acme", cancelled.ID); err != nil || wf.Status != workflow.Cancelled {
		t.Fatalf("cancel a queued workflow: %+v, %v; want cancelled", wf, err)
	}
	within(t, "one running, one queued", 5*time.Second, executions(1, 1))
	if n := api.calls.Load(); n != 1 {
		t.Errorf("%d calls while one workflow ran; want 1", n)
	}

	close(api.release)
	for _, id := range []string{first.ID, queued.ID} {
		if wf, err := r.Wait(wctx, "acme", id); err != nil || wf.Status != workflow.Completed {
			t.Fatalf("workflow %s: %+v, %v; want completed", id, wf, err)
		}
	}
	within(t, "nothing running", 5*time.Second, executions(0, 0))
	if steps, err := db.Steps(ctx, cancelled.ID, 0); err != nil || slices.ContainsFunc(steps, func(s workflow.Step) bool { return s.Tool != "" }) {
		t.Errorf("the cancelled queued workflow recorded %+v, %v; want no call", steps, err)
	}
}

// TestAShutdownReleasesQueuedExecutions checks that Close stops queued
// executions at once and releases their leases, so a restart resumes them.
func TestAShutdownReleasesQueuedExecutions(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	api := &countedAPI{slowAPI: slowAPI{release: make(chan struct{})}}
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-a",
		Lease: time.Hour, MaxRunning: 1})
	if _, err := r.Start(ctx, request("settle")); err != nil {
		t.Fatal(err)
	}
	queued, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	within(t, "one queued", 5*time.Second, func() bool { _, q := r.Executions(); return q == 1 })
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		t.Fatalf("close with a queued execution: %v", err)
	}
	wf, err := db.Workflow(ctx, "acme", queued.ID)
	if err != nil || wf.Status != workflow.Running || wf.Owner != "" {
		t.Errorf("the queued workflow after shutdown: %+v, %v; want running with its lease released", wf, err)
	}
}

// TestASaturatedReplicaClaimsNothing checks that a replica running
// MaxRunning executions leaves other replicas' expired workflows to the
// replicas that have room, and claims them itself once it has.
func TestASaturatedReplicaClaimsNothing(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	api := &countedAPI{slowAPI: slowAPI{release: make(chan struct{})}}
	rounds := roundCounter{Store: db, done: make(chan struct{}, 1)}
	a := workflow.New(workflow.Options{Store: rounds, Versions: db, Tools: db, Caller: api, Owner: "replica-a",
		Lease: 300 * time.Millisecond, MaxRunning: 1})
	defer a.Close(ctx)
	running, err := a.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	within(t, "replica a's call", 5*time.Second, func() bool { return api.calls.Load() == 1 })

	// Replica d starts a workflow and stops in its first call, giving its
	// lease up: any replica may claim it now.
	d := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: slowAPI{release: make(chan struct{})},
		Owner: "replica-d", Lease: 300 * time.Millisecond})
	orphan, err := d.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go a.Run(runCtx)
	// Several recovery rounds (a third of the lease each): a, full, claims
	// nothing. Each round ends looking for approvals due, so three such
	// looks follow at least three rounds.
	for range 3 {
		select {
		case <-rounds.done:
		case <-time.After(30 * time.Second):
			t.Fatal("replica a made no recovery round within 30 s")
		}
	}
	if wf, err := db.Workflow(ctx, "acme", orphan.ID); err != nil || wf.Owner == "replica-a" {
		t.Fatalf("the orphan is owned by %q (%v) while replica a runs its MaxRunning executions; want it left alone", wf.Owner, err)
	}
	if running, queued := a.Executions(); running != 1 || queued != 0 {
		t.Errorf("replica a runs %d and queues %d; want 1 and 0", running, queued)
	}

	close(api.release)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, id := range []string{running.ID, orphan.ID} {
		if wf, err := a.Wait(wctx, "acme", id); err != nil || wf.Status != workflow.Completed {
			t.Fatalf("workflow %s: %+v, %v; want completed by replica a once it has room", id, wf, err)
		}
	}
}

// roundCounter signals done each time a runner's recovery round ends, as
// it looks for approvals due.
type roundCounter struct {
	workflow.Store
	done chan struct{}
}

func (c roundCounter) DueApprovals(ctx context.Context, now time.Time, limit int) ([]*workflow.Approval, error) {
	defer func() {
		select {
		case c.done <- struct{}{}:
		default:
		}
	}()
	return c.Store.DueApprovals(ctx, now, limit)
}
