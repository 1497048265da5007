package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

// feedStore is the SQLite store with a change feed the test drives: the
// runner's Watch is handed over on watches.
type feedStore struct {
	*sqlite.DB
	watches chan workflow.Watch
}

func (s feedStore) WatchChanges(ctx context.Context, w workflow.Watch) error {
	s.watches <- w
	<-ctx.Done()
	return ctx.Err()
}

// TestTheChangeFeedActsAtOnce checks what a runner does with what another
// replica tells it: a cancel stops a workflow running here, and a release
// (a replica draining) has its workflows taken over, both at once rather
// than at the next lease renewal (20 minutes away here).
func TestTheChangeFeedActsAtOnce(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	st := feedStore{DB: db, watches: make(chan workflow.Watch, 1)}
	l := &ledger{hold: true, held: make(chan struct{}, 1)}
	a := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: l, Owner: "replica-a", Lease: time.Hour})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go a.Run(runCtx)
	defer a.Close(ctx)
	w := <-st.watches
	w.Live(true)

	wf, err := a.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	<-l.held // the write is in flight on replica a
	if _, _, err := db.RequestCancel(ctx, "acme", wf.ID, "replica-b", time.Now()); err != nil {
		t.Fatal(err)
	}
	w.Cancelled([]string{wf.ID})
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done, err := a.Wait(wctx, "acme", wf.ID)
	if err != nil || done.Status != workflow.Cancelled {
		t.Fatalf("after a cancel heard on the feed: %+v, %v; want cancelled", done, err)
	}

	// Replica b starts a workflow and drains: a takes it over when told.
	lb := &ledger{hold: true, held: make(chan struct{}, 1)}
	b := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: lb, Owner: "replica-b", Lease: time.Hour})
	wf2, err := b.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	<-lb.held
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.hold = false
	l.mu.Unlock()
	w.Released()
	done, err = a.Wait(wctx, "acme", wf2.ID)
	if err != nil || done.Status != workflow.Completed {
		t.Fatalf("after a release heard on the feed: %+v, %v; want completed by replica a", done, err)
	}
}
