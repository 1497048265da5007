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
	ctx := context.Background()
	alone := func(w *groupcommit.Write[func(tx pgx.Tx) error]) error {
		if err := w.Ctx.Err(); err != nil {
			return err
		}
		return db.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error { return w.Fn(detachedTx{tx}) })
	}
	if len(batch) == 1 {
		batch[0].Answer(alone(batch[0]))
		return
	}
	skipped := make([]error, len(batch))
	err := db.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for i, w := range batch {
			if skipped[i] = w.Ctx.Err(); skipped[i] != nil {
				continue
			}
			if err := w.Fn(detachedTx{tx}); err != nil {
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

// detachedTx runs a write's statements without its caller's cancellation.
type detachedTx struct{ pgx.Tx }

func (t detachedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(context.WithoutCancel(ctx), sql, args...)
}

func (t detachedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(context.WithoutCancel(ctx), sql, args...)
}

func (t detachedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(context.WithoutCancel(ctx), sql, args...)
}

func (t detachedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.Tx.SendBatch(context.WithoutCancel(ctx), b)
}

func (t detachedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.Tx.CopyFrom(context.WithoutCancel(ctx), table, cols, src)
}
