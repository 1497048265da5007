package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/migrate"
	"github.com/agentplane/agentplane/internal/store/storetest"
)

// testWriters is how many writers a test's store has: more than one, as
// on a server, and the same on every machine, so the pools of the tests
// running side by side on one PostgreSQL server stay small.
const testWriters = 2

// newTestDB opens a store on a fresh clone of the migrated template, with
// testWriters writers and a pool of two more connections.
func newTestDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), NewTestDatabase(t), WithWriters(testWriters), WithMaxConns(testWriters+2))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Store { return newTestDB(t) }, storetest.Hooks{
		TamperAudit: func(t *testing.T, s storetest.Store, tenant string, seq int64) {
			_, err := s.(*DB).pool.Exec(t.Context(), `UPDATE audit_records SET action = 'tampered' WHERE tenant = $1 AND seq = $2`, tenant, seq)
			if err != nil {
				t.Fatalf("tamper: %v", err)
			}
		},
		UseTool: func(t *testing.T, s storetest.Store, tenant, agent, version, toolName string) {
			_, err := s.(*DB).pool.Exec(t.Context(), `INSERT INTO agent_version_tools (tenant, agent, version, tool_name)
				VALUES ($1, $2, $3, $4)`, tenant, agent, version, toolName)
			if err != nil {
				t.Fatalf("use tool: %v", err)
			}
		},
	})
}

// TestConcurrentOpen opens one database from several replicas at once: the
// advisory lock lets exactly one apply the migrations.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	url := NewTestDatabase(t)
	ctx := t.Context()
	// Start from an empty database, not the migrated clone.
	admin, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	admin.Close()

	var wg sync.WaitGroup
	errs := make([]error, 4)
	dbs := make([]*DB, 4)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = Open(ctx, url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	var n int
	if err := dbs[0].pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Errorf("%d migrations recorded, want %d", n, len(ms))
	}
	if err := dbs[1].Ping(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// TestGroupCommitIsolation checks that writes committed together keep their
// failures to themselves: a failing write (an error, a constraint violation,
// which aborts the whole PostgreSQL transaction) leaves nothing behind, and
// every other write of its batch commits, audit records included.
func TestGroupCommitIsolation(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := t.Context()
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 120)
	for i := range errs {
		wg.Go(func() {
			rec := &audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "u"}, Action: "test.write",
				Resource: audit.Resource{Type: "t"}, Outcome: audit.Success}
			db.prepareAudit(rec)
			errs[i] = db.write(ctx, func(tx *wtx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO server_secrets (name, value) VALUES ($1, $2)`,
					strconv.Itoa(i), []byte("v")); err != nil {
					return err
				}
				tx.Audit(rec)
				switch i % 4 {
				case 1:
					return errBoom
				case 2:
					// A statement error aborts the transaction it runs in.
					_, err := tx.Exec(ctx, `INSERT INTO server_secrets (name, value) VALUES ('dup', 'a'), ('dup', 'b')`)
					return err
				}
				return nil
			})
		})
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		switch i % 4 {
		case 1:
			if !errors.Is(err, errBoom) {
				t.Errorf("write %d: %v, want boom", i, err)
			}
		case 2:
			if !isUnique(err) {
				t.Errorf("write %d: %v, want a unique violation", i, err)
			}
		default:
			want++
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		}
	}
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM server_secrets WHERE name <> 'dup'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%d rows committed, want %d", n, want)
	}
	rep, err := audit.Verify(ctx, db, "acme")
	if err != nil || !rep.OK || rep.RecordsChecked != int64(want) {
		t.Errorf("audit chain: %+v, %v; want ok with %d records", rep, err, want)
	}
}

// TestCallerCancelledMidWriteSparesItsBatch checks that a caller whose
// context ends while its write runs neither aborts the batch nor loses its
// own write once taken, and that a caller gone before its write was taken
// is answered with its context's error and nothing else changes.
func TestCallerCancelledMidWriteSparesItsBatch(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := t.Context()
	release := make(chan struct{})
	held := make(chan struct{}, testWriters)
	var wg sync.WaitGroup
	// Every writer busy, one at a time (each taken write goes to an idle
	// writer), so the writes below queue.
	for range testWriters {
		wg.Go(func() {
			db.write(ctx, func(*wtx) error { held <- struct{}{}; <-release; return nil })
		})
		<-held
	}
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			rec := &audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "u"}, Action: "test.write",
				Resource: audit.Resource{Type: "t"}, Outcome: audit.Success}
			db.prepareAudit(rec)
			errs[i] = db.write(ctx, func(tx *wtx) error { tx.Audit(rec); return nil })
		})
	}
	var slowErr, goneErr error
	wg.Go(func() {
		slow, cancel := context.WithCancel(ctx)
		defer cancel()
		slowErr = db.write(slow, func(tx *wtx) error {
			time.AfterFunc(5*time.Millisecond, cancel)
			_, err := tx.Exec(slow, `SELECT pg_sleep(0.2)`)
			return err
		})
	})
	gone, cancelGone := context.WithCancel(ctx)
	wg.Go(func() {
		goneErr = db.write(gone, func(tx *wtx) error {
			_, err := tx.Exec(ctx, `INSERT INTO server_secrets (name, value) VALUES ('gone', 'v')`)
			return err
		})
	})
	// Every write waits for a writer: the batched ones, the slow one, the gone one.
	storetest.WaitUntil(t, "every write queued", func() bool { return db.queue.Queued() == len(errs)+2 })
	cancelGone()
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d, batched with cancelled callers: %v", i, err)
		}
	}
	if slowErr != nil {
		t.Errorf("a write cancelled while it ran: %v, want it run to the end", slowErr)
	}
	if !errors.Is(goneErr, context.Canceled) {
		t.Errorf("a write whose caller left before it was taken: %v, want context.Canceled", goneErr)
	}
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM server_secrets WHERE name = 'gone'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the abandoned write stored %d rows (%v)", n, err)
	}
	rep, err := audit.Verify(ctx, db, "acme")
	if err != nil || !rep.OK || rep.RecordsChecked != int64(len(errs)) {
		t.Errorf("audit chain: %+v, %v; want ok with %d records", rep, err, len(errs))
	}
}

// TestPurgeIdempotencyInChunks checks that a purge of more entries than one
// statement deletes takes them all, and only the expired ones.
func TestPurgeIdempotencyInChunks(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := t.Context()
	now := time.Now()
	if _, err := db.pool.Exec(ctx, `INSERT INTO idempotency_entries
		(tenant, principal, method, path, key, fingerprint, state, created_at, expires_at, locked_until)
		SELECT 'acme', 'u', 'POST', '/v1/tools', 'k' || i, 'f', 'complete', $1, $1, $1
		FROM generate_series(1, $2::int) AS i`, now.Add(-time.Hour), 2*purgeChunk+5); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO idempotency_entries
		(tenant, principal, method, path, key, fingerprint, state, created_at, expires_at, locked_until)
		VALUES ('acme', 'u', 'POST', '/v1/tools', 'live', 'f', 'complete', $1, $2, $1)`, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	n, err := db.PurgeIdempotency(ctx, now)
	if err != nil || n != 2*purgeChunk+5 {
		t.Fatalf("purged %d (%v), want %d", n, err, 2*purgeChunk+5)
	}
	var left int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_entries`).Scan(&left); err != nil || left != 1 {
		t.Errorf("%d entries left (%v), want the live one", left, err)
	}
}

// TestReadsOfAnUnreachableDatabaseAreUnavailable checks that a read that
// cannot reach the database is a 503 (problem.Unavailable), not a 500.
func TestReadsOfAnUnreachableDatabaseAreUnavailable(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	db.pool.Close()
	_, err := db.ToolByName(t.Context(), "acme", "pets")
	if !problem.Is(err, problem.Unavailable) {
		t.Errorf("read with the pool closed: %v, want unavailable", err)
	}
}

// TestAStuckWriteIsAbandoned checks that a write transaction that does not
// finish within the write timeout fails instead of holding the writer, and
// that the writes after it go through.
func TestAStuckWriteIsAbandoned(t *testing.T) {
	t.Parallel()
	db, err := Open(t.Context(), NewTestDatabase(t), WithWriteTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	// A write left to finish would sleep its minute and succeed.
	err = db.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(ctx, `SELECT pg_sleep(60)`)
		return err
	})
	if err == nil {
		t.Fatal("a write stuck for a minute succeeded, want it abandoned after its 200 ms")
	}
	if err := db.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(ctx, `INSERT INTO server_secrets (name, value) VALUES ('after', 'v')`)
		return err
	}); err != nil {
		t.Errorf("the write after: %v", err)
	}
}

// TestWorkflowListPlans checks that each filter of the console's workflow
// list walks an index. The table is nearly empty, so sequential scans are
// priced out (enable_seqscan=off) to show what the planner can use; the
// console benchmark shows the plans chosen at 100,000 workflows.
func TestWorkflowListPlans(t *testing.T) {
	t.Parallel()
	db, err := Open(t.Context(), NewTestDatabase(t)+"&enable_seqscan=off")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	storetest.CheckListPlans(t, db, func(line string) bool { return strings.Contains(line, "Seq Scan on workflows") }, "")
	var def string
	if err := db.pool.QueryRow(t.Context(), `SELECT indexdef FROM pg_indexes WHERE indexname = 'workflows_goal_trgm'`).Scan(&def); err != nil {
		t.Fatalf("the goal's trigram index: %v", err)
	}
	if !strings.Contains(def, "gin (goal") || !strings.Contains(def, "gin_trgm_ops") {
		t.Errorf("the goal's trigram index is %s", def)
	}
}
