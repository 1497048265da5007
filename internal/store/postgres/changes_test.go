package postgres

import (
	"context"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/netfault"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// feedEvent is one call of a Watch function.
type feedEvent struct {
	kind string
	ids  []string
	live bool
}

// watchInto runs db's change feed, sending what it calls to a channel.
func watchInto(t *testing.T, db *DB) <-chan feedEvent {
	t.Helper()
	ch := make(chan feedEvent, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.WatchChanges(ctx, workflow.Watch{
			Changed:   func(ids []string) { ch <- feedEvent{kind: changeChanged, ids: ids} },
			Cancelled: func(ids []string) { ch <- feedEvent{kind: changeCancelled, ids: ids} },
			Released:  func() { ch <- feedEvent{kind: changeReleased} },
			Live:      func(live bool) { ch <- feedEvent{kind: "live", live: live} },
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

// next returns the feed's next event, failing after a generous wait.
func next(t *testing.T, ch <-chan feedEvent, what string) feedEvent {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(20 * time.Second):
		t.Fatalf("no feed event: want %s", what)
		return feedEvent{}
	}
}

func runningWorkflow(owner string) *workflow.Workflow {
	now := time.Now().UTC()
	return &workflow.Workflow{ID: ids.New(ids.Workflow), Tenant: "acme", Agent: "triage", AgentVersion: "1",
		Status: workflow.Running, Goal: "g", Caller: workflow.Caller{Sub: "u", Tenant: "acme"}, MaxToolCalls: 5,
		StartedAt: now, Deadline: now.Add(time.Hour), Owner: owner, LeaseUntil: now.Add(time.Hour)}
}

func oneStep(wfID string, seq int) *workflow.Step {
	return &workflow.Step{WorkflowID: wfID, Seq: seq, Step: seq, Action: "a", Kind: "call", Status: "ok",
		StartedAt: time.Now()}
}

// TestChangeFeedTellsOtherReplicas checks that a replica hears another's
// steps, ends, cancels and releases through LISTEN/NOTIFY, in commit
// order, and not its own.
func TestChangeFeedTellsOtherReplicas(t *testing.T) {
	t.Parallel()
	url := NewTestDatabase(t)
	a, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	feed := watchInto(t, b)
	if e := next(t, feed, "live"); e.kind != "live" || !e.live {
		t.Fatalf("first event %+v, want live", e)
	}

	own, theirs := runningWorkflow("replica-b"), runningWorkflow("replica-a")
	must(t, b.CreateWorkflow(ctx, own, nil))
	must(t, a.CreateWorkflow(ctx, theirs, nil))
	// b's own step is sent first and skipped: the first event is a's.
	must(t, b.AppendSteps(ctx, "replica-b", workflow.StepWrite{Step: oneStep(own.ID, 1)}))
	must(t, a.AppendSteps(ctx, "replica-a", workflow.StepWrite{Step: oneStep(theirs.ID, 1)}))
	if e := next(t, feed, "a's step"); e.kind != changeChanged || !slices.Equal(e.ids, []string{theirs.ID}) {
		t.Fatalf("after a's step: %+v, want changed [%s]", e, theirs.ID)
	}

	if _, _, err := a.RequestCancel(ctx, "acme", own.ID, "replica-a", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if e := next(t, feed, "a's cancel"); e.kind != changeCancelled || !slices.Equal(e.ids, []string{own.ID}) {
		t.Fatalf("after a's cancel: %+v, want cancelled [%s]", e, own.ID)
	}

	must(t, a.ReleaseLease(ctx, "replica-a", theirs.ID))
	if e := next(t, feed, "a's release"); e.kind != changeReleased {
		t.Fatalf("after a's release: %+v, want released", e)
	}
}

// TestAnOutageIsUnavailableAndHealsByItself cuts the store's connections to
// the database (a TCP proxy between them; the shared server is left
// alone): reads and pings fail as unavailable (so /readyz says not ready),
// the change feed says it is down, and once the network is back the same
// handle reads, writes and listens again without being reopened.
func TestAnOutageIsUnavailableAndHealsByItself(t *testing.T) {
	t.Parallel()
	direct := NewTestDatabase(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := netfault.Listen(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	host, port, _ := net.SplitHostPort(proxy.Addr())
	u.Host = net.JoinHostPort(host, port)
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	db, err := Open(t.Context(), u.String(), WithWriteTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	feed := watchInto(t, db)
	if e := next(t, feed, "live"); !e.live {
		t.Fatalf("first event %+v, want live", e)
	}
	must(t, db.Ping(ctx))

	proxy.Cut()
	if e := next(t, feed, "the feed going down"); e.kind != "live" || e.live {
		t.Fatalf("after the cut: %+v, want not live", e)
	}
	if err := db.Ping(ctx); !problem.Is(err, problem.Unavailable) {
		t.Errorf("ping during the outage: %v, want unavailable", err)
	}
	if _, err := db.Workflow(ctx, "acme", "wf_x"); !problem.Is(err, problem.Unavailable) {
		t.Errorf("read during the outage: %v, want unavailable", err)
	}
	if err := db.CreateWorkflow(ctx, runningWorkflow("r"), nil); !problem.Is(err, problem.Unavailable) {
		t.Errorf("write during the outage: %v, want unavailable", err)
	}

	proxy.Restore()
	if e := next(t, feed, "the feed coming back"); e.kind != "live" || !e.live {
		t.Fatalf("after the restore: %+v, want live", e)
	}
	must(t, db.Ping(ctx))
	w := runningWorkflow("r")
	must(t, db.CreateWorkflow(ctx, w, nil))
	if _, err := db.Workflow(ctx, "acme", w.ID); err != nil {
		t.Errorf("read after the outage: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRenewalSkipsARowAWriteHolds checks that a lease renewal does not
// wait for a workflow whose row another transaction holds (a batch
// storing its end), which is how renewals and batches deadlocked: it
// answers at once and counts the workflow as still held.
func TestRenewalSkipsARowAWriteHolds(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := t.Context()
	held, free := runningWorkflow("replica-a"), runningWorkflow("replica-a")
	must(t, db.CreateWorkflow(ctx, held, nil))
	must(t, db.CreateWorkflow(ctx, free, nil))
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM workflows WHERE id = $1 FOR NO KEY UPDATE`, held.ID); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := db.RenewLease(rctx, "replica-a", []string{held.ID, free.ID}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("renewal while a row is held: %v", err)
	}
	if len(st.Lost) != 0 {
		t.Errorf("lost %v, want none (the held workflow is still this replica's)", st.Lost)
	}
}

// TestAPoolWithNoRoomForReadsIsRefused checks the pool-size rule: more
// connections than writers, said before anything is opened.
func TestAPoolWithNoRoomForReadsIsRefused(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), "postgres://127.0.0.1:1/x", WithMaxConns(2), WithWriters(2))
	if err == nil || !strings.Contains(err.Error(), "leaves none for reads") {
		t.Fatalf("2 connections for 2 writers: %v, want refused", err)
	}
}
