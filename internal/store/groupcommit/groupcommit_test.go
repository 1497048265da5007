package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestBatchesAnswerEveryWrite checks that concurrent writes are committed
// in batches no larger than the limit and that each caller gets its own
// answer.
func TestBatchesAnswerEveryWrite(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	q := New(4, 1, func(batch []*Write[int]) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		mu.Unlock()
		for _, w := range batch {
			if w.Fn%2 == 0 {
				w.Answer(nil)
			} else {
				w.Answer(errors.New("odd"))
			}
		}
	})
	defer q.Close()
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() { errs[i] = q.Do(context.Background(), i) })
	}
	wg.Wait()
	for i, err := range errs {
		if (i%2 == 1) != (err != nil) {
			t.Errorf("write %d: %v", i, err)
		}
	}
	total := 0
	for _, n := range sizes {
		if n < 1 || n > 4 {
			t.Errorf("batch of %d writes, want 1 to 4", n)
		}
		total += n
	}
	if total != len(errs) {
		t.Errorf("%d writes committed, want %d", total, len(errs))
	}
}

func TestClosedAndCancelled(t *testing.T) {
	t.Parallel()
	q := New(8, 1, func(batch []*Write[int]) {
		for _, w := range batch {
			w.Answer(nil)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Either the write was taken before the cancellation was seen, or it
	// was refused with it; a refused one must say so.
	if err := q.Do(ctx, 1); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	q.Close()
	if err := q.Do(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v, want ErrClosed", err)
	}
}

// TestWritersCommitSideBySide checks that a queue of several writers has
// that many batches in flight at once, and that Close waits for them all.
func TestWritersCommitSideBySide(t *testing.T) {
	t.Parallel()
	const writers = 3
	inside := make(chan struct{}, writers)
	release := make(chan struct{})
	var committed sync.WaitGroup
	q := New(1, writers, func(batch []*Write[int]) {
		inside <- struct{}{}
		<-release
		for _, w := range batch {
			w.Answer(nil)
		}
		committed.Done()
	})
	var wg sync.WaitGroup
	for i := range writers {
		committed.Add(1)
		wg.Go(func() {
			if err := q.Do(context.Background(), i); err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		})
	}
	for range writers {
		<-inside // every writer holds a batch at the same moment
	}
	close(release)
	wg.Wait()
	q.Close()
	committed.Wait()
}

// TestQueuedCountsWritesNotYetTaken checks Queued: the writes waiting
// behind a busy writer, less one whose caller gave up, and none once the
// writer has taken them.
func TestQueuedCountsWritesNotYetTaken(t *testing.T) {
	t.Parallel()
	inside := make(chan struct{})
	release := make(chan struct{})
	q := New(8, 1, func(batch []*Write[int]) {
		if batch[0].Fn == 0 {
			close(inside)
			<-release
		}
		for _, w := range batch {
			w.Answer(nil)
		}
	})
	defer q.Close()
	var wg sync.WaitGroup
	wg.Go(func() { q.Do(context.Background(), 0) })
	<-inside
	ctx, cancel := context.WithCancel(context.Background())
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			c := context.Background()
			if i == 0 {
				c = ctx
			}
			errs[i] = q.Do(c, i+1)
		})
	}
	waitQueued(t, q, 3)
	cancel()
	waitQueued(t, q, 2)
	close(release)
	wg.Wait()
	if n := q.Queued(); n != 0 {
		t.Errorf("%d writes queued once all were answered, want 0", n)
	}
	if !errors.Is(errs[0], context.Canceled) || errs[1] != nil || errs[2] != nil {
		t.Errorf("answers %v, want the cancelled write refused and the others committed", errs)
	}
}

// waitQueued waits until q holds n writes not yet taken.
func waitQueued[F any](t *testing.T, q *Queue[F], n int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for q.Queued() != n {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d writes queued after 10 s, want %d", q.Queued(), n)
		}
	}
}

// recorder commits batches by recording their writes' values.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
}

func (r *recorder) commit(batch []*Write[int]) {
	r.mu.Lock()
	var b []int
	for _, w := range batch {
		b = append(b, w.Fn)
	}
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	for _, w := range batch {
		w.Answer(nil)
	}
}

func (r *recorder) seen() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// TestLaterRidesWithTheNextWrite checks that a write queued by Later is
// committed in the batch of the next write waited for, not on its own.
func TestLaterRidesWithTheNextWrite(t *testing.T) {
	t.Parallel()
	var r recorder
	q := New(8, 1, r.commit)
	q.linger = time.Hour // only the next write can take it
	defer q.Close()
	var got []error
	var mu sync.Mutex
	done := func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() }
	q.Later(1, done)
	q.Later(2, done)
	if b := r.seen(); len(b) != 0 {
		t.Fatalf("committed before any write: %v", b)
	}
	if err := q.Do(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if b := r.seen(); len(b) != 1 || !slices.Equal(b[0], []int{1, 2, 3}) {
		t.Errorf("batches %v, want one [1 2 3]", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != nil || got[1] != nil {
		t.Errorf("done called with %v, want two nils", got)
	}
}

// TestLaterAloneAfterLinger checks that a write queued by Later with no
// other write to go with is committed once it has waited the linger, and
// that Flush commits at once what Later queued.
func TestLaterAloneAfterLinger(t *testing.T) {
	t.Parallel()
	var r recorder
	q := New(8, 1, r.commit)
	q.linger = 5 * time.Millisecond
	defer q.Close()
	committed := make(chan error, 1)
	q.Later(1, func(err error) { committed <- err })
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lingering write was never committed")
	}

	q.linger = time.Hour
	q.Later(2, func(error) {})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if b := r.seen(); len(b) != 2 || !slices.Equal(b[1], []int{2}) {
		t.Errorf("batches %v, want [[1] [2]]", b)
	}
	if err := q.Flush(ctx); err != nil {
		t.Errorf("flush with nothing queued: %v", err)
	}
}

// TestLaterBeyondABatch checks that more Later writes than a batch holds
// are all committed, in order, in batches of at most the limit.
func TestLaterBeyondABatch(t *testing.T) {
	t.Parallel()
	var r recorder
	q := New(3, 2, r.commit)
	q.linger = time.Millisecond
	defer q.Close()
	for i := range 10 {
		q.Later(i, func(error) {})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var all []int
	for _, b := range r.seen() {
		if len(b) > 3 {
			t.Errorf("batch of %d, limit 3", len(b))
		}
		all = append(all, b...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("committed %v, want 0..9 once each", all)
	}
}

// TestCloseCommitsLater checks that Close commits what Later queued and
// that Later after Close answers ErrClosed.
func TestCloseCommitsLater(t *testing.T) {
	t.Parallel()
	var r recorder
	q := New(8, 1, r.commit)
	q.linger = time.Hour
	var first error = errors.New("not answered")
	q.Later(1, func(err error) { first = err })
	q.Close()
	if first != nil {
		t.Errorf("queued before Close: %v, want committed", first)
	}
	if b := r.seen(); len(b) != 1 || !slices.Equal(b[0], []int{1}) {
		t.Errorf("batches %v, want [[1]]", b)
	}
	var after error
	q.Later(2, func(err error) { after = err })
	if !errors.Is(after, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", after)
	}
}

// TestCommittedCountsSucceededWrites: Committed counts the writes answered
// nil, each by the time its Do returns, and not the failed ones.
func TestCommittedCountsSucceededWrites(t *testing.T) {
	t.Parallel()
	q := New(8, 1, func(batch []*Write[bool]) {
		for _, w := range batch {
			if w.Fn {
				w.Answer(nil)
			} else {
				w.Answer(errors.New("failed"))
			}
		}
	})
	defer q.Close()
	for _, tc := range []struct {
		ok   bool
		want int64
	}{{true, 1}, {false, 1}, {true, 2}} {
		_ = q.Do(context.Background(), tc.ok)
		if got := q.Committed(); got != tc.want {
			t.Errorf("after a write that succeeded=%v Committed() = %d, want %d", tc.ok, got, tc.want)
		}
	}
}

// TestIdleWorkRunsBetweenWrites checks that a writer with no write to take
// does its idle work, again while the work reports it did something, and
// then waits without calling it; a write queued during the work is taken
// once the work returns.
func TestIdleWorkRunsBetweenWrites(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		calls   int
		started = make(chan struct{})
		release = make(chan struct{})
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
	q := New(8, 1, func(batch []*Write[string]) {
		for _, w := range batch {
			w.Answer(nil)
		}
	}, Idle(func() bool {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			close(started)
			<-release
			return true
		}
		return false
	}))
	defer q.Close()
	<-started // nothing queued: the writer works
	done := make(chan error, 1)
	go func() { done <- q.Do(context.Background(), "write") }()
	waitQueued(t, q, 1) // queued, and left there while the idle work runs
	select {
	case err := <-done:
		t.Fatalf("the write was taken (%v) while the idle work ran", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); count() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no idle work after the write")
		}
	}
	q.Close() // the writer has stopped: it called the work as often as it will
	if n := count(); n != 2 {
		t.Errorf("idle work called %d times, want 2 (once more after the write, which found nothing)", n)
	}
}
