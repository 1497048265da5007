package groupcommit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestBatchesAnswerEveryWrite checks that concurrent writes are committed
// in batches no larger than the limit and that each caller gets its own
// answer.
func TestBatchesAnswerEveryWrite(t *testing.T) {
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

// TestCommittedCountsSucceededWrites: Committed counts the writes answered
// nil, each by the time its Do returns, and not the failed ones.
func TestCommittedCountsSucceededWrites(t *testing.T) {
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
