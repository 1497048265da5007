package workflow_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// countingReads is a store counting the reads a follower makes; it hides
// the store's change feed, if any.
type countingReads struct {
	workflow.Store
	reads atomic.Int64
}

func (s *countingReads) Workflow(ctx context.Context, tenant, id string) (*workflow.Workflow, error) {
	s.reads.Add(1)
	return s.Store.Workflow(ctx, tenant, id)
}

func (s *countingReads) Steps(ctx context.Context, id string, after int) ([]workflow.Step, error) {
	s.reads.Add(1)
	return s.Store.Steps(ctx, id, after)
}

// countingFeed is countingReads with a change feed the test drives, as
// feedStore is.
type countingFeed struct {
	*countingReads
	watches chan workflow.Watch
}

func (s countingFeed) WatchChanges(ctx context.Context, w workflow.Watch) error {
	s.watches <- w
	<-ctx.Done()
	return ctx.Err()
}

// slowAPI answers each call once delay has passed or release is closed.
type slowAPI struct {
	delay   time.Duration // 0: only release answers
	release chan struct{}
}

func (a slowAPI) Call(ctx context.Context, _ tool.CallRequest) (tool.CallResult, error) {
	var after <-chan time.Time
	if a.delay > 0 {
		after = time.After(a.delay)
	}
	select {
	case <-after:
	case <-a.release:
	case <-ctx.Done():
		return tool.CallResult{}, ctx.Err()
	}
	return tool.CallResult{Status: 200, Body: json.RawMessage(`{"amount": 42}`)}, nil
}

// follow collects a follower's event ids on a channel, closed at its end.
func follow(ctx context.Context, t *testing.T, r *workflow.Runner, id string) <-chan int {
	events := make(chan int, 16)
	go func() {
		defer close(events)
		for ev, err := range r.Follow(ctx, "acme", id, 0) {
			if err != nil {
				t.Errorf("follow: %v", err)
				return
			}
			events <- ev.ID
		}
	}()
	return events
}

func within(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

// TestAFollowerWithoutAChangeFeedReadsWhenWoken checks that a follower of
// a store without a change feed (SQLite: every write is made here) reads
// the store only when a local write wakes it, not on a timer: over a
// workflow whose two calls take a second each, it reads the workflow and
// its steps at the start and once per wake-up, and still gets every step
// and the end.
func TestAFollowerWithoutAChangeFeedReadsWhenWoken(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	st := &countingReads{Store: db}
	r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: slowAPI{delay: time.Second},
		Owner: "replica-a", Lease: time.Minute})
	defer r.Close(ctx)
	wf, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	before := st.reads.Load()
	var got []int
	for id := range follow(ctx, t, r, wf.ID) {
		got = append(got, id)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	// Two reads at the start and two per wake-up, at most one wake-up per
	// event: a follower polling every 200 ms makes about twenty.
	if reads := st.reads.Load() - before; reads > int64(2*(1+len(got))) {
		t.Errorf("the follower made %d store reads for %d events; want at most %d", reads, len(got), 2*(1+len(got)))
	}
}

// TestAFollowerWaitsForALiveChangeFeedAndPollsWhileItIsDown checks a
// follower of a shared store (PostgreSQL's change feed, driven by the test
// here): while the feed is live and nothing changes, it does not read the
// store at all; once the feed goes down it polls; and it still follows the
// workflow to its end.
func TestAFollowerWaitsForALiveChangeFeedAndPollsWhileItIsDown(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	st := countingFeed{countingReads: &countingReads{Store: db}, watches: make(chan workflow.Watch, 1)}
	api := slowAPI{release: make(chan struct{})}
	r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Owner: "replica-a", Lease: time.Hour})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go r.Run(runCtx)
	defer r.Close(ctx)
	w := <-st.watches
	w.Live(true)

	wf, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	before := st.reads.Load()
	events := follow(ctx, t, r, wf.ID)
	within(t, "the follower's first read", 5*time.Second, func() bool { return st.reads.Load() >= before+2 })
	// The first call is held, so nothing changes for a while: longer than
	// a follower's poll with the feed live used to be (2 s).
	<-time.After(3 * time.Second)
	if reads := st.reads.Load() - before; reads != 2 {
		t.Errorf("%d store reads while the feed was live and nothing changed; want 2, the first", reads)
	}

	w.Live(false)
	within(t, "the follower polling while the feed is down", 5*time.Second, func() bool { return st.reads.Load() >= before+8 })
	close(api.release)
	var got []int
	for id := range events {
		got = append(got, id)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// pgReads is countingReads over PostgreSQL, with its change feed.
type pgReads struct {
	*countingReads
	db *postgres.DB
}

func (s pgReads) WatchChanges(ctx context.Context, w workflow.Watch) error {
	return s.db.WatchChanges(ctx, w)
}

// TestAFollowerOnPostgreSQLWaitsForTheChangeFeed checks, on PostgreSQL's
// own change feed, that a follower of a workflow waiting for approval does
// not read the store while nothing changes, and that a decision made on
// another replica (a handle of its own) reaches it through the feed, up to
// the workflow's end.
func TestAFollowerOnPostgreSQLWaitsForTheChangeFeed(t *testing.T) {
	t.Parallel()
	url := postgres.NewTestDatabase(t)
	ctx := context.Background()
	open := func() *postgres.DB {
		db, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	dbA, dbB := open(), open()
	seedRefund(t, dbA, refundApproval)
	st := pgReads{countingReads: &countingReads{Store: dbA}, db: dbA}
	a := workflow.New(workflow.Options{Store: st, Versions: dbA, Tools: dbA, Caller: &ledger{}, Owner: "replica-a", Lease: time.Hour})
	b := refundRunner(dbB, "replica-b", &ledger{}, time.Hour)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go a.Run(runCtx)
	defer a.Close(ctx)
	defer b.Close(ctx)
	wf := invokeRefund(t, a)
	// Replica a listens once its LISTEN shows in pg_stat_activity (it
	// marks the feed live as that statement returns).
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	within(t, "replica a listening", 10*time.Second, func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n)
		return err == nil && n > 0
	})

	before := st.reads.Load()
	events := follow(ctx, t, a, wf.ID)
	within(t, "the follower's first events", 5*time.Second, func() bool { return len(events) == 2 })
	first := st.reads.Load() - before
	<-time.After(3 * time.Second)
	if reads := st.reads.Load() - before - first; reads != 0 {
		t.Errorf("%d store reads while the feed was live and nothing changed; want none", reads)
	}
	if _, err := b.Decide(ctx, workflow.DecideRequest{Tenant: "acme", WorkflowID: wf.ID, Step: 2, Decision: agent.DecisionApprove,
		Approver: approver("bob", "approve:refunds")}); err != nil {
		t.Fatal(err)
	}
	var got []int
	for id := range events {
		got = append(got, id)
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
