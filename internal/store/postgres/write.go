package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/problem"
)

// maxBatch is how many queued writes one transaction takes at most.
const maxBatch = 64

// errClosed answers writes made after Close.
var errClosed = problem.New(problem.Unavailable, "the store is closed")

// writeReq is one write waiting for the writer.
type writeReq struct {
	ctx  context.Context
	fn   func(tx pgx.Tx) error
	done chan error
}

// write runs fn in a read-write transaction and returns its error once it
// is committed or failed. Writes queued meanwhile by this replica are
// committed together (group commit): one transaction, one fsync and one
// hold of each chain head's lock for many workflows' steps.
func (db *DB) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case db.writes <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-db.closing:
		return errClosed
	}
	return <-req.done
}

// writer commits queued writes in batches until the store closes.
func (db *DB) writer() {
	defer close(db.writerDone)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case r := <-db.writes:
			batch = append(batch[:0], r)
		case <-db.closing:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-db.writes:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		db.commit(batch)
		clear(batch)
	}
}

// commit runs the batch in one transaction. PostgreSQL aborts a
// transaction at its first error, so when any write fails (a conflict, a
// lost lease, a deadlock with another replica's batch) the batch is rolled
// back and each write runs again in a transaction of its own, as it would
// have unbatched: a failure stays its own write's.
func (db *DB) commit(batch []*writeReq) {
	if len(batch) == 1 {
		r := batch[0]
		r.done <- db.inTx(r.ctx, pgx.TxOptions{}, r.fn)
		return
	}
	err := db.inTx(context.Background(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, r := range batch {
			if err := r.ctx.Err(); err != nil {
				return err
			}
			if err := r.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, r := range batch {
			r.done <- nil
		}
		return
	}
	for _, r := range batch {
		r.done <- db.inTx(r.ctx, pgx.TxOptions{}, r.fn)
	}
}
