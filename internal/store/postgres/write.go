package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

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
// have unbatched: a failure stays its own write's.
func (db *DB) commit(batch []*groupcommit.Write[func(tx pgx.Tx) error]) {
	if len(batch) == 1 {
		w := batch[0]
		w.Answer(db.inTx(w.Ctx, pgx.TxOptions{}, w.Fn))
		return
	}
	err := db.inTx(context.Background(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, w := range batch {
			if err := w.Ctx.Err(); err != nil {
				return err
			}
			if err := w.Fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	for _, w := range batch {
		if err == nil {
			w.Answer(nil)
		} else {
			w.Answer(db.inTx(w.Ctx, pgx.TxOptions{}, w.Fn))
		}
	}
}
