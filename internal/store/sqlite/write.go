package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/internal/store/groupcommit"
)

// write runs fn in a write transaction and returns its error. The writer
// goroutine commits fn together with the other writes queued meanwhile; fn
// runs in its own savepoint, so its failure undoes only its own changes.
// write returns once the batch holding fn is committed (or failed), even if
// ctx is cancelled meanwhile, so a nil error always means durable. ctx only
// decides whether fn is taken: once it runs, its statements run to the end.
func (db *DB) write(ctx context.Context, fn func(tx dbtx) error) error {
	err := db.queue.Do(ctx, fn)
	if errors.Is(err, groupcommit.ErrClosed) {
		return errClosed
	}
	return err
}

// commit runs a batch in one BEGIN IMMEDIATE transaction and answers each
// request.
func (db *DB) commit(batch []*groupcommit.Write[func(tx dbtx) error]) {
	errs := make([]error, len(batch))
	answer := func() {
		for i, r := range batch {
			r.Answer(errs[i])
		}
	}
	ctx := context.Background()
	tx, err := db.begin(ctx)
	if err == nil {
		if err = db.heads.begin(ctx, tx); err != nil {
			tx.rollback()
		}
	}
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("begin write: %w", err)
		}
		answer()
		return
	}
	db.goals.reset()
	tx.goals = db.goals
	var broken error
	for i, r := range batch {
		if broken != nil {
			errs[i] = broken
			continue
		}
		if err := r.Ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if len(batch) == 1 {
			// Alone, it needs no savepoint: the transaction is rolled
			// back when it fails.
			if errs[i] = protect(tx, r.Fn); errs[i] != nil {
				broken = errs[i]
			} else {
				tx.heads.release()
			}
			continue
		}
		errs[i], broken = savepoint(ctx, tx, r.Fn)
	}
	if broken == nil && db.heads.tail >= db.auditMove {
		// A failed move leaves the records in the tail, where reads find
		// them, to be moved with the next ones.
		_, broken = savepoint(ctx, tx, func(tx dbtx) error { return moveAudit(ctx, tx) })
		db.heads.tail = 0
	}
	if broken == nil {
		// After every savepoint of the batch, so FTS5 writes them once.
		broken = db.goals.index(ctx, tx)
	}
	if broken != nil {
		tx.rollback()
		db.heads.rollback()
		for i := range errs {
			if errs[i] == nil {
				errs[i] = broken
			}
		}
		answer()
		return
	}
	if err := tx.commit(); err != nil {
		db.heads.forget()
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("commit write: %w", err)
			}
		}
	} else {
		db.heads.commit()
	}
	answer()
}

// moveIdle moves the audit tail to the indexed table when the writer has
// nothing else to do and the tail holds idleAuditMove records or more (or
// auditMove, when that is fewer): moved in a batch somebody waits for,
// they would hold up that batch (a few milliseconds for a few hundred
// records). It reports whether it moved them.
func (db *DB) moveIdle() bool {
	if db.heads.tail < min(idleAuditMove, db.auditMove) {
		return false
	}
	ctx := context.Background()
	tx, err := db.begin(ctx)
	if err != nil {
		return false // the next batch moves them
	}
	if err := moveAudit(ctx, tx); err != nil {
		tx.rollback()
		return false
	}
	if err := tx.commit(); err != nil {
		return false
	}
	db.heads.tail = 0
	return true
}

// begin starts a transaction on the writer's connection, as BEGIN
// IMMEDIATE: the writer takes the write lock at once and never upgrades a
// read lock. Statements run on the connection itself, prepared there once,
// rather than through a database/sql transaction, which binds a copy of
// every statement to itself and closes them all at its end.
func (db *DB) begin(ctx context.Context) (dbtx, error) {
	tx := dbtx{conn: db.wconn, stmts: db.wstmts, heads: db.heads, ctx: ctx}
	if _, err := tx.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return dbtx{}, err
	}
	return tx, nil
}

// commit commits the writer's transaction. A COMMIT that fails may leave
// the transaction open (SQLITE_BUSY does), so it is rolled back then: the
// next batch begins afresh either way.
func (t dbtx) commit() error {
	if _, err := t.ExecContext(t.ctx, "COMMIT"); err != nil {
		t.rollback()
		return err
	}
	return nil
}

// rollback rolls the writer's transaction back. Its error is not
// reported: SQLite refuses only when no transaction is open, which is the
// state rollback is for.
func (t dbtx) rollback() {
	t.ExecContext(t.ctx, "ROLLBACK")
}

// savepoint runs fn inside a savepoint of tx, rolling back to it when fn
// fails (or panics). broken is set when the transaction itself is no longer
// usable.
func savepoint(ctx context.Context, tx dbtx, fn func(tx dbtx) error) (err, broken error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	err = protect(tx, fn)
	if err != nil {
		tx.heads.rollbackSavepoint()
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
			return err, fmt.Errorf("roll back to savepoint: %w", rerr)
		}
	} else {
		tx.heads.release()
	}
	if _, rerr := tx.ExecContext(ctx, "RELEASE w"); rerr != nil {
		return err, fmt.Errorf("release savepoint: %w", rerr)
	}
	return err, nil
}

// protect turns a panic of fn into an error so the writer survives it.
func protect(tx dbtx, fn func(tx dbtx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.Join(err, fmt.Errorf("write panicked: %v", p))
		}
	}()
	return fn(tx)
}

// CommittedWrites returns how many writes this store has committed since
// it was opened (retention.WriteCounter).
func (db *DB) CommittedWrites() int64 { return db.queue.Committed() }
