package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/groupcommit"
)

// maxBatch is how many queued writes one transaction takes at most.
const maxBatch = 64

// DefaultWriters is how many write transactions one replica runs at once:
// half its CPUs, at least one. Where the database shares the machine's
// CPUs, more writers make smaller batches and more commits for the same
// work; where it is across a network, more writers hide the round trips
// (see docs/operations.md).
func DefaultWriters() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// rollbackTimeout bounds the rollback of a failed write.
const rollbackTimeout = 5 * time.Second

// errClosed answers writes made after Close.
var errClosed = problem.New(problem.Unavailable, "the store is closed")

// write runs fn in a read-write transaction and returns its error once it
// is committed or failed. Writes queued meanwhile are committed together
// (group commit) by one of the replica's writers, each its own transaction
// on its own connection: one commit and one hold of each chain head's lock
// for many workflows' steps, and several such transactions in flight.
func (db *DB) write(ctx context.Context, fn func(tx *wtx) error) error {
	err := db.queue.Do(ctx, fn)
	if errors.Is(err, groupcommit.ErrClosed) {
		return errClosed
	}
	return err
}

// writeAlone runs fn as a transaction of its own on a pooled connection of
// its own, beside the group-committed writes and never in one of their
// batches: a long write (a retention batch) neither holds a writer nor
// makes the requests' writes batched with it wait for its statements. Like
// every write it seals its audit records at commit, locking its tenants'
// chain heads last, so a batch that chains onto them waits for its commit
// only. It is cancelled only before it starts, as a batched write is.
func (db *DB) writeAlone(ctx context.Context, fn func(tx *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-db.queue.Closing():
		return errClosed
	default:
	}
	if err := db.runTx(fn); err != nil {
		return err
	}
	db.alone.Add(1)
	return nil
}

// SweepsBesideWrites reports that retention batches run beside the
// requests' writes (writeAlone; retention.Beside).
func (db *DB) SweepsBesideWrites() bool { return true }

// CommittedWrites returns how many writes this replica has committed since
// the store was opened, batched or alone (retention.WriteCounter).
func (db *DB) CommittedWrites() int64 { return db.queue.Committed() + db.alone.Load() }

// commit runs the batch in one transaction. PostgreSQL aborts a
// transaction at its first error, so when any write fails (a conflict, a
// lost lease, a deadlock with another replica's batch) the batch is rolled
// back and each write runs again in a transaction of its own, as it would
// have unbatched: a failure stays its own write's. A caller's context only
// decides whether its write is taken: a write already running is not
// cancelled with it, which would abort the batch for every other caller.
func (db *DB) commit(batch []*groupcommit.Write[func(tx *wtx) error]) {
	alone := func(w *groupcommit.Write[func(tx *wtx) error]) error {
		if err := w.Ctx.Err(); err != nil {
			return err
		}
		return db.runTx(w.Fn)
	}
	if len(batch) == 1 {
		batch[0].Answer(alone(batch[0]))
		return
	}
	skipped := make([]error, len(batch))
	err := db.runTx(func(tx *wtx) error {
		for i, w := range batch {
			if skipped[i] = w.Ctx.Err(); skipped[i] != nil {
				continue
			}
			if err := w.Fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	for i, w := range batch {
		switch {
		case skipped[i] != nil:
			w.Answer(skipped[i])
		case err == nil:
			w.Answer(nil)
		default:
			w.Answer(alone(w))
		}
	}
}

// runTx runs fn and commits what it wrote on a connection of its own,
// bounded by the write timeout (a hung connection must not hold a writer
// for good) and under the writer's context, not a caller's.
func (db *DB) runTx(fn func(tx *wtx) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), db.writeTimeout)
	defer cancel()
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	// A connection left inside a transaction (a failed rollback) is closed
	// by the pool on release rather than reused.
	defer c.Release()
	for retried := false; ; retried = true {
		tx := &wtx{conn: c.Conn(), ctx: ctx, heads: db.heads, origin: db.origin}
		err := fn(tx)
		if err == nil {
			err = tx.commit()
		}
		if err == nil {
			return nil
		}
		tx.rollback()
		moved := isHeadsMoved(err)
		if tx.speculated != nil {
			db.heads.forget(tx.speculated, moved)
		}
		if !moved || retried {
			return err
		}
		// Sealed on heads another transaction moved: again, reading them.
	}
}

// wtx is a write transaction. Statements given to Queue wait to be sent
// with the next statement that runs at once (Exec, Query, …) or with the
// commit, in one round trip; BEGIN itself waits so. Audit records given to
// Audit are sealed and inserted at commit, after every other statement
// (see appendAudit): a batch whose writes only queue statements and
// records (a workflow's steps, its start and end, a request's record)
// costs one round trip ending with COMMIT when the replica knows its
// tenants' chain heads, two otherwise.
type wtx struct {
	conn  *pgx.Conn
	ctx   context.Context
	heads *knownHeads
	// speculated are the tenants whose audit records were sealed on the
	// heads this replica knew (one round trip); sealed are the heads the
	// records moved to when they were sealed on heads read under lock (two).
	speculated []string
	sealed     map[string]head
	begun      bool
	queued     []queuedStmt
	audit      []*audit.Record
	// origin and notes are the notifications sent with the commit (see
	// notify).
	origin string
	notes  map[string][]string
}

// queuedStmt is a statement waiting to be sent and what reads its result.
type queuedStmt struct {
	sql  string
	args []any
	read func(br pgx.BatchResults) error
}

// Queue adds a statement to send with the next round trip. check, when not
// nil, turns its error (nil when it succeeded) into the write's. A queued
// statement may be sent with the COMMIT, so what it succeeded at cannot
// stop the commit: a condition the write depends on must fail the
// statement in SQL (see require_rows), not be checked in its result.
func (t *wtx) Queue(check func(error) error, sql string, args ...any) {
	t.queued = append(t.queued, queuedStmt{sql: sql, args: args, read: func(br pgx.BatchResults) error {
		_, err := br.Exec()
		if check != nil {
			return check(err)
		}
		return err
	}})
}

// wrapErr is a Queue check that only says what failed.
func wrapErr(what string) func(error) error {
	return func(err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

// queueRows adds a statement whose rows each call scan.
func (t *wtx) queueRows(scan func(pgx.CollectableRow) error, sql string, args ...any) {
	t.queued = append(t.queued, queuedStmt{sql: sql, args: args, read: func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		_, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) { return struct{}{}, scan(row) })
		return err
	}})
}

// Audit adds records to append at commit, in this order within each tenant.
func (t *wtx) Audit(recs ...*audit.Record) {
	for _, r := range recs {
		if r != nil {
			t.audit = append(t.audit, r)
		}
	}
}

// flush sends what is queued, BEGIN first if it has not been sent, and
// reads every result.
func (t *wtx) flush() error {
	if !t.begun {
		t.queued = append([]queuedStmt{{sql: "BEGIN", read: func(br pgx.BatchResults) error {
			_, err := br.Exec()
			return err
		}}}, t.queued...)
		t.begun = true
	}
	if len(t.queued) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, q := range t.queued {
		b.Queue(q.sql, q.args...)
	}
	br := t.conn.SendBatch(t.ctx, b)
	var err error
	for _, q := range t.queued {
		if err = q.read(br); err != nil {
			break
		}
	}
	t.queued = t.queued[:0]
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && unreachable(err) {
		return problem.Wrap(problem.Unavailable, err, "the database is unreachable")
	}
	return err
}

// commit appends the audit records and commits.
func (t *wtx) commit() error {
	if !t.begun && len(t.queued) == 0 && len(t.audit) == 0 {
		return nil // nothing was written
	}
	if len(t.audit) > 0 {
		if err := t.appendAudit(); err != nil {
			return err
		}
	}
	t.queueNotes()
	t.Queue(nil, "COMMIT")
	if err := t.flush(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if t.sealed != nil {
		t.heads.settle(t.sealed)
	}
	return nil
}

// rollback ends a failed transaction. Should it fail too, the connection
// is left in its transaction and the pool closes it on release.
func (t *wtx) rollback() {
	t.queued = nil
	if t.begun && !t.conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), rollbackTimeout)
		defer cancel()
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
	}
}

// The statements below run at once, after what is queued.

func (t *wtx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.flush(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(t.ctx, sql, args...)
}

func (t *wtx) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	return t.conn.Query(t.ctx, sql, args...)
}

func (t *wtx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if err := t.flush(); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(t.ctx, sql, args...)
}

func (t *wtx) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.flush(); err != nil {
		return errBatch{err}
	}
	return t.conn.SendBatch(t.ctx, b)
}

func (t *wtx) CopyFrom(_ context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(t.ctx, table, cols, src)
}

// errRow is a row whose statement was never sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errBatch is a batch that was never sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
