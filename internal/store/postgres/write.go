package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/groupcommit"
)

// maxBatch is how many queued writes one transaction takes at most.
const maxBatch = 64

// errClosed answers writes made after Close.
var errClosed = problem.New(problem.Unavailable, "the store is closed")

// write runs fn in a read-write transaction and returns its error once it
// is committed or failed. Writes queued meanwhile by this replica are
// committed together (group commit): one transaction, one fsync and one
// hold of each chain head's lock for many workflows' steps.
func (db *DB) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := db.queue.Do(ctx, fn)
	if errors.Is(err, groupcommit.ErrClosed) {
		return errClosed
	}
	return err
}

// commit runs the batch in one transaction. PostgreSQL aborts a
// transaction at its first error, so when any write fails (a conflict, a
// lost lease, a deadlock with another replica's batch) the batch is rolled
// back and each write runs again in a transaction of its own, as it would
// have unbatched: a failure stays its own write's. A caller's context only
// decides whether its write is taken: a write already running is not
// cancelled with it, which would abort the batch for every other caller.
func (db *DB) commit(batch []*groupcommit.Write[func(tx pgx.Tx) error]) {
	// One bound for the batch and for each write run again alone: a hung
	// connection must not hold up the writer for good.
	run := func(fn func(tx pgx.Tx) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), db.writeTimeout)
		defer cancel()
		return db.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error { return fn(detachedTx{tx, ctx}) })
	}
	alone := func(w *groupcommit.Write[func(tx pgx.Tx) error]) error {
		if err := w.Ctx.Err(); err != nil {
			return err
		}
		return run(w.Fn)
	}
	if len(batch) == 1 {
		batch[0].Answer(alone(batch[0]))
		return
	}
	skipped := make([]error, len(batch))
	err := run(func(tx pgx.Tx) error {
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

// detachedTx runs a write's statements under the writer's context, ignoring
// the one each is given (its caller's).
type detachedTx struct {
	pgx.Tx
	ctx context.Context
}

func (t detachedTx) Begin(context.Context) (pgx.Tx, error) {
	tx, err := t.Tx.Begin(t.ctx)
	if err != nil {
		return nil, err
	}
	return detachedTx{tx, t.ctx}, nil
}

func (t detachedTx) Prepare(_ context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.Tx.Prepare(t.ctx, name, sql)
}

func (t detachedTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(t.ctx, sql, args...)
}

func (t detachedTx) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(t.ctx, sql, args...)
}

func (t detachedTx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(t.ctx, sql, args...)
}

func (t detachedTx) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.Tx.SendBatch(t.ctx, b)
}

func (t detachedTx) CopyFrom(_ context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.Tx.CopyFrom(t.ctx, table, cols, src)
}
