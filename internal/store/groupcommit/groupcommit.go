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
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed answers writes made after Close.
var ErrClosed = errors.New("the store is closed")

// Write is one queued write: the caller's context and its function.
type Write[F any] struct {
	Ctx  context.Context
	Fn   F
	done chan error
	// later is set on a write queued by Later: its caller does not wait,
	// and later tells it how the write ended.
	later func(error)
	q     *Queue[F]
}

// Answer tells the caller how its write ended; a batch's commit function
// answers every write of the batch exactly once.
func (w *Write[F]) Answer(err error) {
	if w.later == nil {
		w.done <- err
		return
	}
	w.q.answered(w)
	w.later(err)
	close(w.done)
}

// Queue is the write queue and its committing goroutines.
type Queue[F any] struct {
	writes    chan *Write[F]
	queued    atomic.Int64
	committed atomic.Int64
	closing   chan struct{}
	stopped   chan struct{}
	once      sync.Once
	running   sync.WaitGroup
	maxBatch  int
	commit    func(batch []*Write[F])
	// idle is work a writer does when no write waits (see Idle).
	idle func() bool

	// Writes queued by Later: pending until a writer takes them, and
	// unanswered until their batch is committed.
	linger     time.Duration
	mu         sync.Mutex
	pending    []*Write[F]
	unanswered []*Write[F]
	timer      *time.Timer
	kick       chan struct{}
}

// DefaultLinger is how long a write queued by Later waits for another
// write to be committed with before it is committed on its own.
const DefaultLinger = 10 * time.Millisecond

// New starts a queue whose writers (at least one) call commit, each with
// batches of up to maxBatch writes: the writes queued while it was busy.
// commit is called by several goroutines at once when writers > 1.
func New[F any](maxBatch, writers int, commit func(batch []*Write[F]), opts ...Option) *Queue[F] {
	q := &Queue[F]{writes: make(chan *Write[F]), closing: make(chan struct{}), stopped: make(chan struct{}),
		maxBatch: max(1, maxBatch), commit: commit, linger: DefaultLinger, kick: make(chan struct{}, 1)}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	q.idle = o.idle
	for range max(1, writers) {
		q.running.Go(q.run)
	}
	go func() { q.running.Wait(); close(q.stopped) }()
	return q
}

// Option configures a Queue.
type Option func(*options)

type options struct{ idle func() bool }

// Idle gives the writers work to do when no write waits for them: upkeep
// that would otherwise hold up a batch somebody waits for (moving
// records to their indexes, say). A writer with no write to take calls
// work, and again for as long as it returns true (it did something); a
// write queued meanwhile waits until work returns. work runs on the
// writer's goroutine, so it may use what the commit function uses.
func Idle(work func() bool) Option { return func(o *options) { o.idle = work } }

// Do queues fn and returns its error once its batch is committed (or
// failed), even if ctx is cancelled meanwhile, so a nil error always means
// durable. A cancelled ctx before fn is taken, or a closed queue, returns
// at once.
func (q *Queue[F]) Do(ctx context.Context, fn F) error {
	w := &Write[F]{Ctx: ctx, Fn: fn, done: make(chan error, 1)}
	q.queued.Add(1) // the writer that takes w counts it off (see take)
	var err error
	select {
	case q.writes <- w:
	case <-ctx.Done():
		err = ctx.Err()
	case <-q.closing:
		err = ErrClosed
	}
	if err != nil {
		q.queued.Add(-1)
		return err
	}
	if err = <-w.done; err == nil {
		q.committed.Add(1)
	}
	return err
}

// Later queues fn to be committed with the next batch a writer takes, or in
// a batch of its own once it has waited the linger (DefaultLinger), and
// returns at once: a write nobody waits for (an audit record of a request
// already answered) shares the commit of the next one somebody does. done
// is called with its error once it is committed (or failed); after Close it
// is called at once with ErrClosed. Flush waits for such writes, and Close
// commits those still queued.
func (q *Queue[F]) Later(fn F, done func(error)) {
	w := &Write[F]{Ctx: context.Background(), Fn: fn, done: make(chan error), later: done, q: q}
	q.mu.Lock()
	select {
	case <-q.closing:
		q.mu.Unlock()
		done(ErrClosed)
		return
	default:
	}
	q.pending = append(q.pending, w)
	q.unanswered = append(q.unanswered, w)
	if q.timer == nil {
		q.timer = time.AfterFunc(q.linger, q.lingered)
	}
	q.mu.Unlock()
}

// Flush commits the writes queued by Later so far, if no batch has taken
// them yet, and waits until they are committed or ctx ends: a read after
// Flush sees them.
func (q *Queue[F]) Flush(ctx context.Context) error {
	q.mu.Lock()
	wait := slices.Clone(q.unanswered)
	q.mu.Unlock()
	if len(wait) == 0 {
		return nil
	}
	q.wake()
	for _, w := range wait {
		select {
		case <-w.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// wake has a writer commit the pending writes on their own.
func (q *Queue[F]) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// lingered wakes a writer for the pending writes once the first of them
// has waited the linger.
func (q *Queue[F]) lingered() {
	q.mu.Lock()
	q.timer = nil
	q.mu.Unlock()
	q.wake()
}

// takeLater moves up to n pending writes into batch.
func (q *Queue[F]) takeLater(batch []*Write[F], n int) []*Write[F] {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.pending))
	batch = append(batch, q.pending[:n]...)
	q.pending = append(q.pending[:0], q.pending[n:]...)
	switch {
	case len(q.pending) > 0:
		q.wake() // more than a batch: the next one takes them
	case q.timer != nil:
		q.timer.Stop()
		q.timer = nil
	}
	return batch
}

// answered forgets w once its batch has answered it.
func (q *Queue[F]) answered(w *Write[F]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.unanswered, w); i >= 0 {
		q.unanswered = slices.Delete(q.unanswered, i, i+1)
	}
}

// Committed returns how many writes Do has returned nil for: how many were
// committed since New. A caller's own write is counted by the time its Do
// returns.
func (q *Queue[F]) Committed() int64 { return q.committed.Load() }

// Queued returns how many writes wait for a writer to take them.
func (q *Queue[F]) Queued() int { return int(q.queued.Load()) }

// Closing is closed once Close has been called.
func (q *Queue[F]) Closing() <-chan struct{} { return q.closing }

// Close stops the queue after the batches being committed and those
// queued by Later; later writes get ErrClosed.
func (q *Queue[F]) Close() {
	q.once.Do(func() {
		q.mu.Lock()
		close(q.closing)
		q.mu.Unlock()
	})
	<-q.stopped
	for {
		batch := q.takeLater(nil, q.maxBatch)
		if len(batch) == 0 {
			return
		}
		q.commit(batch)
	}
}

func (q *Queue[F]) run() {
	batch := make([]*Write[F], 0, q.maxBatch)
	for {
		// Idle work while no write waits to be taken and no kick to be
		// answered; a write queued meanwhile waits for it.
		if q.idle != nil && q.queued.Load() == 0 && len(q.kick) == 0 && q.idle() {
			continue
		}
		select {
		case w := <-q.writes:
			// Writes queued by Later go first: their callers were
			// answered before these writes were taken, so what they
			// record (an audit chain's order) comes first.
			batch = append(q.takeLater(batch[:0], q.maxBatch-1), q.take(w))
		case <-q.kick:
			if batch = q.takeLater(batch[:0], q.maxBatch); len(batch) == 0 {
				continue
			}
		case <-q.closing:
			return
		}
	drain:
		for len(batch) < q.maxBatch {
			select {
			case w := <-q.writes:
				batch = append(batch, q.take(w))
			default:
				break drain
			}
		}
		q.commit(batch)
		clear(batch)
	}
}

// take counts w off the writes waiting to be taken, as its writer takes it.
func (q *Queue[F]) take(w *Write[F]) *Write[F] {
	q.queued.Add(-1)
	return w
}
