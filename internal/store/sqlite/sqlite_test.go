package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/migrate"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	// Audit records wait in the tail until enough have come to move: the
	// default keeps nearly every test's records in the tail; a move after
	// every record, or every few, puts them in the indexed table or across
	// both.
	for _, move := range []int{DefaultAuditMove, 1, 5} {
		t.Run(fmt.Sprintf("audit-move-%d", move), func(t *testing.T) {
			t.Parallel()
			conformance(t, WithAuditMove(move))
		})
	}
}

func conformance(t *testing.T, opts ...Option) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return NewTestDB(t, opts...) }, storetest.Hooks{
		TamperAudit: func(t *testing.T, s storetest.Store, tenant string, seq int64) {
			err := s.(*DB).write(t.Context(), func(tx dbtx) error {
				for _, table := range []string{"audit_records", "audit_tail"} {
					_, err := tx.ExecContext(t.Context(), `UPDATE `+table+` SET action = 'tampered' WHERE tenant = ? AND seq = ?`, tenant, seq)
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("tamper: %v", err)
			}
		},
		UseTool: func(t *testing.T, s storetest.Store, tenant, agent, version, toolName string) {
			err := s.(*DB).write(t.Context(), func(tx dbtx) error {
				_, err := tx.ExecContext(t.Context(), `INSERT INTO agent_version_tools (tenant, agent, version, tool_name) VALUES (?, ?, ?, ?)`,
					tenant, agent, version, toolName)
				return err
			})
			if err != nil {
				t.Fatalf("use tool: %v", err)
			}
		},
	})
}

// TestGroupCommitIsolation checks that a failing write in a batch rolls back
// only its own changes while the others in the batch commit.
func TestGroupCommitIsolation(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			errs[i] = db.write(ctx, func(tx dbtx) error {
				if _, err := tx.ExecContext(t.Context(), `INSERT INTO server_secrets (name, value) VALUES (?, ?)`, i, []byte("v")); err != nil {
					return err
				}
				if i%3 == 0 {
					return errBoom
				}
				if i%7 == 0 {
					panic("write panics")
				}
				return nil
			})
		})
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		switch {
		case i%3 == 0:
			if !errors.Is(err, errBoom) {
				t.Errorf("write %d: err = %v, want boom", i, err)
			}
		case i%7 == 0:
			if err == nil {
				t.Errorf("write %d panicked but returned no error", i)
			}
		default:
			want++
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		}
	}
	var n int
	if err := db.rdb.QueryRow(`SELECT count(*) FROM server_secrets`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%d rows committed, want %d", n, want)
	}
}

func TestReopenKeepsDataAndMigrations(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nested", "dir", "agentplane.db")
	ctx := t.Context()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ServerSecret(ctx, "s", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(ctx); !problem.Is(err, problem.Unavailable) {
		t.Errorf("ping after close: %v, want unavailable", err)
	}
	if _, err := db.ServerSecret(ctx, "s", nil); !problem.Is(err, problem.Unavailable) {
		t.Errorf("write after close: %v, want unavailable", err)
	}

	db, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	v, err := db.ServerSecret(ctx, "s", []byte("v2"))
	if err != nil || string(v) != "v1" {
		t.Errorf("secret after reopen = %q, %v; want v1", v, err)
	}
	var versions int
	if err := db.rdb.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if versions != len(ms) {
		t.Errorf("%d migrations recorded after reopen, want %d", versions, len(ms))
	}
}

func TestWriteCancelledBeforeRun(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	err := db.write(ctx, func(dbtx) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Errorf("write with a cancelled context: err %v, ran %v; want context.Canceled without running", err, ran)
	}
}

func auditRec(tenant, action string) *audit.Record {
	return &audit.Record{Tenant: tenant, Actor: audit.Actor{Sub: "u"}, Action: action,
		Resource: audit.Resource{Type: "t"}, Outcome: audit.Success}
}

func verifyChain(t *testing.T, db *DB, tenant string, want int) {
	t.Helper()
	rep, err := audit.Verify(t.Context(), db, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.RecordsChecked != int64(want) {
		t.Errorf("verify %s: %+v, want ok with %d records", tenant, rep, want)
	}
}

// TestAuditHeadsFollowSavepoints checks that a write failing after it
// appended a record leaves no trace in the chain heads the writer keeps:
// the next records continue the chain without a gap.
func TestAuditHeadsFollowSavepoints(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 120)
	for i := range errs {
		wg.Go(func() {
			tenant := []string{"ten_a", "ten_b"}[i%2]
			rec := auditRec(tenant, "test.write")
			db.prepareAudit(rec)
			errs[i] = db.write(ctx, func(tx dbtx) error {
				if err := appendAudit(ctx, tx, rec); err != nil {
					return err
				}
				if i%3 == 0 {
					return errBoom
				}
				return nil
			})
		})
	}
	wg.Wait()
	ok := map[string]int{}
	for i, err := range errs {
		if i%3 == 0 != errors.Is(err, errBoom) || (i%3 != 0 && err != nil) {
			t.Errorf("write %d: %v", i, err)
		}
		if err == nil {
			ok[[]string{"ten_a", "ten_b"}[i%2]]++
		}
	}
	if err := db.AppendAudit(ctx, auditRec("ten_a", "test.after")); err != nil {
		t.Fatal(err)
	}
	verifyChain(t, db, "ten_a", ok["ten_a"]+1)
	verifyChain(t, db, "ten_b", ok["ten_b"])
}

// TestAuditChainSharedWithAnotherConnection checks that appends from
// another store on the same file (the CLI adding a client while the server
// runs) and from this one interleave into one unbroken chain.
func TestAuditChainSharedWithAnotherConnection(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentplane.db")
	ctx := t.Context()
	open := func() *DB {
		db, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	server, cli := open(), open()
	for i := range 10 {
		for _, db := range []*DB{server, server, cli} {
			if err := db.AppendAudit(ctx, auditRec("ten_a", fmt.Sprintf("test.%d", i))); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
	verifyChain(t, server, "ten_a", 30)
}

// TestAuditMigrationKeepsTheChain upgrades a database holding records
// written before migration 3 (with audit_heads and the old table) and
// checks that the chain verifies and goes on where it stopped.
func TestAuditMigrationKeepsTheChain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentplane.db")
	raw, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Run(ctx, target{raw}, ms[:2]); err != nil {
		t.Fatal(err)
	}
	head := chainHead{hash: audit.Genesis}
	for i := range 5 {
		r := auditRec("ten_a", fmt.Sprintf("old.%d", i))
		r.ID, r.Time, r.Details = fmt.Sprintf("aud_%d", i), time.Now().UTC(), audit.Details(nil)
		if err := r.Seal(head.seq+1, head.hash); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, `INSERT INTO audit_records (`+sqlrow.AuditColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Tenant, r.Seq, sqlrow.FormatTime(r.Time), r.Actor.Sub, r.Actor.ClientID, r.Action,
			r.Resource.Type, r.Resource.ID, r.Outcome, r.Status, r.RequestID, r.TraceID,
			r.WorkflowID, string(r.Details), r.PrevHash, r.Hash); err != nil {
			t.Fatal(err)
		}
		head = chainHead{seq: r.Seq, hash: r.Hash}
	}
	if _, err := raw.ExecContext(ctx, `INSERT INTO audit_heads (tenant, seq, hash) VALUES (?, ?, ?)`,
		"ten_a", head.seq, head.hash); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	db, err := Open(ctx, path, WithAuditMove(3))
	if err != nil {
		t.Fatalf("open and migrate: %v", err)
	}
	defer db.Close()
	for i := range 4 {
		if err := db.AppendAudit(ctx, auditRec("ten_a", fmt.Sprintf("new.%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	verifyChain(t, db, "ten_a", 9)
	recs, err := db.QueryAudit(ctx, "ten_a", audit.Filter{Action: "old.2"})
	if err != nil || len(recs) != 1 || recs[0].Seq != 3 {
		t.Errorf("query of a migrated record: %v, %v", recs, err)
	}
}

// TestLoneWriteFailureRollsBack checks a write committed alone (no
// savepoint around it): when it fails or panics, nothing it did remains,
// its audit record included, and the chain goes on without a gap.
func TestLoneWriteFailureRollsBack(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	if err := db.AppendAudit(ctx, auditRec("ten_b", "test.ok")); err != nil {
		t.Fatal(err)
	}
	for i, fail := range []func() error{
		func() error { return errors.New("boom") },
		func() error { panic("write panics") },
	} {
		rec := auditRec("ten_a", "test.failed")
		db.prepareAudit(rec)
		err := db.write(ctx, func(tx dbtx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO server_secrets (name, value) VALUES (?, ?)`, i, []byte("v")); err != nil {
				return err
			}
			if err := appendAudit(ctx, tx, rec); err != nil {
				return err
			}
			return fail()
		})
		if err == nil {
			t.Fatalf("write %d: no error", i)
		}
		if err := db.AppendAudit(ctx, auditRec("ten_a", "test.ok")); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.rdb.QueryRow(`SELECT count(*) FROM server_secrets`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows of failed writes remain (%v)", n, err)
	}
	verifyChain(t, db, "ten_a", 2)
	// A rollback leaves the heads of earlier commits cached.
	if _, ok := db.heads.committed["ten_b"]; !ok {
		t.Error("a rolled-back write dropped another chain's committed head")
	}
}

// TestForkedAppendIsRefused checks that a record claiming a seq the chain
// already has (a stale head) is refused, and that the chain goes on.
func TestForkedAppendIsRefused(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	for range 3 {
		if err := db.AppendAudit(ctx, auditRec("ten_a", "test.ok")); err != nil {
			t.Fatal(err)
		}
	}
	rec := auditRec("ten_a", "test.fork")
	db.prepareAudit(rec)
	err := db.write(ctx, func(tx dbtx) error {
		tx.heads.set("ten_a", chainHead{seq: 1, hash: audit.Genesis}) // stale
		return appendAudit(ctx, tx, rec)
	})
	if err == nil {
		t.Fatal("a record with a taken seq was stored")
	}
	if err := db.AppendAudit(ctx, auditRec("ten_a", "test.after")); err != nil {
		t.Fatal(err)
	}
	verifyChain(t, db, "ten_a", 4)
}

// TestCallerCancelledMidWriteSparesItsBatch checks that a caller whose
// context ends while its write's statement runs does not take the other
// writes of its batch down with it: SQLite rolls back the whole
// transaction when a statement is interrupted.
func TestCallerCancelledMidWriteSparesItsBatch(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	if err := db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE scratch (x INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Hold the writer so the writes below queue up and go in one batch.
	release := make(chan struct{})
	held := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		db.write(ctx, func(dbtx) error { close(held); <-release; return nil })
	})
	<-held
	recs := make([]*audit.Record, 5)
	errs := make([]error, len(recs))
	for i := range recs {
		wg.Go(func() {
			recs[i] = auditRec("ten_a", "test.write")
			db.prepareAudit(recs[i])
			errs[i] = db.write(ctx, func(tx dbtx) error { return appendAudit(ctx, tx, recs[i]) })
		})
	}
	var slowErr error
	wg.Go(func() {
		slow, cancel := context.WithCancel(ctx)
		defer cancel()
		slowErr = db.write(slow, func(tx dbtx) error {
			// The caller goes away while its statement runs.
			time.AfterFunc(5*time.Millisecond, cancel)
			_, err := tx.ExecContext(slow, `INSERT INTO scratch
				WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300000)
				SELECT x FROM c`)
			return err
		})
	})
	// Release the writer once every write waits for it, so they go in one batch.
	storetest.WaitUntil(t, "every write queued", func() bool { return db.queue.Queued() == len(recs)+1 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d, batched with a cancelled caller: %v", i, err)
		}
	}
	if slowErr != nil {
		t.Errorf("the cancelled caller's write, taken before its context ended: %v", slowErr)
	}
	verifyChain(t, db, "ten_a", len(recs))
}

// TestMigrationAppliedMeanwhileIsSkipped checks that a migration another
// process applied after this one read the applied versions is not run
// again (it would fail on tables that exist).
func TestMigrationAppliedMeanwhileIsSkipped(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if err := (target{db.wconn}).Apply(t.Context(), ms[0]); err != nil {
		t.Errorf("apply %04d again: %v", ms[0].Version, err)
	}
}

func TestNewerDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentplane.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.wconn.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err := Open(t.Context(), path); err == nil {
		db.Close()
		t.Fatal("opened a database migrated by a newer binary")
	} else if !strings.Contains(err.Error(), "newer agentplane") {
		t.Errorf("error %q does not say to run a newer agentplane", err)
	}
}

// TestWorkflowListPlans checks that each filter of the console's workflow
// list walks an index, goal words through the trigram index.
func TestWorkflowListPlans(t *testing.T) {
	t.Parallel()
	tableScan := regexp.MustCompile(`^SCAN workflows$`)
	storetest.CheckListPlans(t, NewTestDB(t), tableScan.MatchString, "workflow_goals")
}

// TestWriterCheckpointsLargeWAL checks that the writer's connection
// checkpoints at walCheckpointPages, not SQLite's 1,000 (dsn).
func TestWriterCheckpointsLargeWAL(t *testing.T) {
	t.Parallel()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "agentplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages int
	if err := db.wconn.QueryRowContext(t.Context(), "PRAGMA wal_autocheckpoint").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != walCheckpointPages {
		t.Errorf("wal_autocheckpoint = %d, want %d", pages, walCheckpointPages)
	}
}

// TestIdleWriterMovesTheAuditTail checks that a writer with nothing to
// commit moves the audit tail to the indexed table once idleAuditMove
// records have gathered, far below the in-batch threshold, and that the
// chain reads the same after.
func TestIdleWriterMovesTheAuditTail(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	recs := make([]*audit.Record, idleAuditMove)
	for i := range recs {
		recs[i] = auditRec("ten_a", fmt.Sprintf("test.%d", i))
	}
	if err := db.AppendAudit(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	count := func(table string) int {
		var n int
		if err := db.rdb.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	storetest.WaitUntil(t, "the tail moved", func() bool { return count("audit_tail") == 0 })
	if n := count("audit_records"); n != idleAuditMove {
		t.Errorf("%d records indexed, want %d", n, idleAuditMove)
	}
	verifyChain(t, db, "ten_a", idleAuditMove)
}

// TestUncountedRolloutWorkflowsWalksActiveRollouts: the rollout sweep,
// which every replica runs each minute, starts from the active rollouts
// and reads only their agents' workflows since each began, never every
// finished workflow of every tenant.
func TestUncountedRolloutWorkflowsWalksActiveRollouts(t *testing.T) {
	plan := queryPlan(t, NewTestDB(t), uncountedRolloutWorkflows, "2026-01-01T00:00:00Z", 100)
	joined := strings.Join(plan, "\n")
	if !strings.Contains(joined, "r USING INDEX rollouts_active") ||
		!strings.Contains(joined, "SEARCH w USING INDEX workflows_agent (tenant=? AND agent=? AND id>?)") {
		t.Errorf("the sweep's plan does not walk from the active rollouts to their agents' newer workflows:\n%s", joined)
	}
	for _, p := range plan {
		if strings.HasPrefix(p, "SCAN w") || strings.Contains(p, "workflows_lease") || strings.Contains(p, "workflows_finished") {
			t.Errorf("the sweep reads every finished workflow: %s\n%s", p, joined)
		}
	}
}

// TestToolCallsRangeTheTenantsWorkflows: a tool revision's impact reads
// the tenant's workflows of its period by id, not every one it has.
func TestToolCallsRangeTheTenantsWorkflows(t *testing.T) {
	plan := queryPlan(t, NewTestDB(t), toolCalls, "pets", "acme", "wf_", "2026-01-01T00:00:00Z", 10001)
	if joined := strings.Join(plan, "\n"); !strings.Contains(joined, "workflows USING INDEX workflows_tenant (tenant=? AND id>?)") {
		t.Errorf("the impact's plan reads every workflow of the tenant:\n%s", joined)
	}
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of query, a line a step.
func queryPlan(t *testing.T, db *DB, query string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestFailedCommitLeavesNoTransactionOpen checks that a batch whose COMMIT
// fails (a deferred foreign key, which leaves SQLite's transaction open)
// is rolled back, so the writer's connection begins the next batch afresh.
func TestFailedCommitLeavesNoTransactionOpen(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	err := db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tool_operations (tenant, tool_id, op_id, kind, summary, description, data)
			VALUES ('ten_a', 'tool_missing', 'op', 'read', '', '', '{}')`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "commit write") {
		t.Fatalf("write with a dangling reference: %v, want its commit refused", err)
	}
	for i := range 3 {
		if err := db.AppendAudit(ctx, auditRec("ten_a", "test.ok")); err != nil {
			t.Fatalf("append %d after the failed commit: %v", i, err)
		}
	}
	verifyChain(t, db, "ten_a", 3)
	var n int
	if err := db.rdb.QueryRow(`SELECT count(*) FROM tool_operations`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows of the failed commit remain (%v)", n, err)
	}
}
