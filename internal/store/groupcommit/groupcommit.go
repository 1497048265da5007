// Package groupcommit queues a store's writes for goroutines that each
// commit those queued together in one transaction: one commit (and its
// sync) for many callers' writes, each caller answered once its batch is
// committed. How a batch becomes a transaction is the store's: the commit
// function given to New. A store with one writer (SQLite) starts one
// committing goroutine; a database that runs transactions side by side
// (PostgreSQL) starts several, each taking the writes queued while the
// others commit.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrClosed answers writes made after Close.
var ErrClosed = errors.New("the store is closed")

// Write is one queued write: the caller's context and its function.
type Write[F any] struct {
	Ctx  context.Context
	Fn   F
	done chan error
}

// Answer tells the caller how its write ended; a batch's commit function
// answers every write of the batch exactly once.
func (w *Write[F]) Answer(err error) { w.done <- err }

// Queue is the write queue and its committing goroutines.
type Queue[F any] struct {
	writes   chan *Write[F]
	queued   atomic.Int64
	done     atomic.Int64
	closing  chan struct{}
	stopped  chan struct{}
	once     sync.Once
	running  sync.WaitGroup
	maxBatch int
	commit   func(batch []*Write[F])
}

// New starts a queue whose writers (at least one) call commit, each with
// batches of up to maxBatch writes: the writes queued while it was busy.
// commit is called by several goroutines at once when writers > 1.
func New[F any](maxBatch, writers int, commit func(batch []*Write[F])) *Queue[F] {
	q := &Queue[F]{writes: make(chan *Write[F]), closing: make(chan struct{}), stopped: make(chan struct{}),
		maxBatch: max(1, maxBatch), commit: commit}
	for range max(1, writers) {
		q.running.Go(q.run)
	}
	go func() { q.running.Wait(); close(q.stopped) }()
	return q
}

// Do queues fn and returns its error once its batch is committed (or
// failed), even if ctx is cancelled meanwhile, so a nil error always means
// durable. A cancelled ctx before fn is taken, or a closed queue, returns
// at once.
func (q *Queue[F]) Do(ctx context.Context, fn F) error {
	w := &Write[F]{Ctx: ctx, Fn: fn, done: make(chan error, 1)}
	q.queued.Add(1)
	var err error
	select {
	case q.writes <- w:
	case <-ctx.Done():
		err = ctx.Err()
	case <-q.closing:
		err = ErrClosed
	}
	q.queued.Add(-1)
	if err != nil {
		return err
	}
	if err = <-w.done; err == nil {
		q.done.Add(1)
	}
	return err
}

// Committed returns how many writes Do has returned nil for: how many were
// committed since New. A caller's own write is counted by the time its Do
// returns.
func (q *Queue[F]) Committed() int64 { return q.done.Load() }

// Queued returns how many writes wait for a writer to take them.
func (q *Queue[F]) Queued() int { return int(q.queued.Load()) }

// Closing is closed once Close has been called.
func (q *Queue[F]) Closing() <-chan struct{} { return q.closing }

// Close stops the queue after the batches being committed; later writes
// get ErrClosed.
func (q *Queue[F]) Close() {
	q.once.Do(func() { close(q.closing) })
	<-q.stopped
}

func (q *Queue[F]) run() {
	batch := make([]*Write[F], 0, q.maxBatch)
	for {
		select {
		case w := <-q.writes:
			batch = append(batch[:0], w)
		case <-q.closing:
			return
		}
	drain:
		for len(batch) < q.maxBatch {
			select {
			case w := <-q.writes:
				batch = append(batch, w)
			default:
				break drain
			}
		}
		q.commit(batch)
		clear(batch)
	}
}
