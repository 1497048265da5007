package workflow_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

// stuckRecovery is the SQLite store, except that recovery's query blocks
// until the runner stops; renewed receives the workflows of each lease
// renewal and whether the lease was still held.
type stuckRecovery struct {
	*sqlite.DB
	renewed chan renewal
}

type renewal struct {
	ids  []string
	lost []string
}

func (s *stuckRecovery) ClaimExpired(ctx context.Context, _ string, _, _ time.Time, _ int) ([]*workflow.Workflow, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stuckRecovery) RenewLease(ctx context.Context, owner string, ids []string, until time.Time) (workflow.LeaseStatus, error) {
	st, err := s.DB.RenewLease(ctx, owner, ids, until)
	select {
	case s.renewed <- renewal{ids: ids, lost: st.Lost}:
	default:
	}
	return st, err
}

// TestLeasesAreRenewedWhileRecoveryIsStuck checks that a store whose
// recovery queries hang does not hold lease renewals back: a workflow
// running here keeps its lease, so no other replica takes it over.
func TestLeasesAreRenewedWhileRecoveryIsStuck(t *testing.T) {
	t.Parallel()
	db := setup(t)
	st := &stuckRecovery{DB: db, renewed: make(chan renewal, 16)}
	api := &ledger{hold: true, held: make(chan struct{}, 1)}
	const lease = 300 * time.Millisecond
	r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Owner: "replica-a", Lease: lease})
	ctx := context.Background()
	wf, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	<-api.held // the write is in flight: the workflow runs here

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		r.Run(runCtx)
	}()
	defer func() {
		stop()
		<-ran
		r.Close(ctx)
	}()
	timeout := time.After(10 * time.Second)
	for renewed := 0; renewed < 3; {
		select {
		case rn := <-st.renewed:
			if !slices.Contains(rn.ids, wf.ID) {
				continue
			}
			if len(rn.lost) > 0 {
				t.Fatalf("lease of %v lost", rn.lost)
			}
			renewed++
		case <-timeout:
			t.Fatalf("%d lease renewals of %s in 10 s with a lease of %s while recovery is stuck", renewed, wf.ID, lease)
		}
	}
}

// heldFeed is a store with a change feed whose watch, once its context
// ends, returns only when released.
type heldFeed struct {
	workflow.Store
	release chan struct{}
}

func (*heldFeed) ClaimExpired(context.Context, string, time.Time, time.Time, int) ([]*workflow.Workflow, error) {
	return nil, nil
}

func (*heldFeed) DueApprovals(context.Context, time.Time, int) ([]*workflow.Approval, error) {
	return nil, nil
}

func (s *heldFeed) WatchChanges(ctx context.Context, _ workflow.Watch) error {
	<-ctx.Done()
	<-s.release
	return ctx.Err()
}

// TestRunReturnsAfterItsGoroutines checks that Run owns what it starts: it
// returns only once the change feed's watch and the lease renewals have
// returned, so nothing of the runner touches the store after Run.
func TestRunReturnsAfterItsGoroutines(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &heldFeed{release: make(chan struct{})}
		r := workflow.New(workflow.Options{Store: st, Owner: "replica-a"})
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			r.Run(ctx)
		}()
		synctest.Wait()
		cancel()
		synctest.Wait() // everything is blocked or has returned
		select {
		case <-ran:
			t.Error("Run returned while the change feed's watch still runs")
		default:
		}
		close(st.release)
		<-ran
	})
}
