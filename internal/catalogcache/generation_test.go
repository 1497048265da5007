package catalogcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gated reads the generation as it stands when a read begins, then holds
// the read until the test lets it end.
type gated struct {
	gen     atomic.Int64
	reads   atomic.Int64
	began   chan int64
	release chan error
}

func newGated() *gated {
	g := &gated{began: make(chan int64, 16), release: make(chan error)}
	g.gen.Store(1)
	return g
}

func (g *gated) CatalogGeneration(ctx context.Context, tenant string) (int64, error) {
	g.reads.Add(1)
	gen := g.gen.Load()
	g.began <- gen
	if err := <-g.release; err != nil {
		return 0, err
	}
	return gen, nil
}

// waitNext waits until the read that follows the running one is shared by n
// callers besides its maker.
func (c *Cache) waitNext(t *testing.T, tenant string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		r := c.reading[tenant]
		ok := r != nil && r.next != nil && r.next.sharers == n
		c.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the next read of %s was never shared by %d callers", tenant, n)
}

type result struct {
	gen int64
	err error
}

// TestGenerationReadsAreSharedAfterArrival: callers arriving while a read
// is made share the next one, which begins after it, so a change committed
// before they arrived is what they see; a caller that leaves stops waiting.
func TestGenerationReadsAreSharedAfterArrival(t *testing.T) {
	g := newGated()
	c := New(g, 0)
	ctx := context.Background()
	call := func(ctx context.Context) chan result {
		out := make(chan result, 1)
		go func() {
			gen, err := c.generation(ctx, "acme")
			out <- result{gen, err}
		}()
		return out
	}

	first := call(ctx)
	if got := <-g.began; got != 1 {
		t.Fatalf("first read began at generation %d, want 1", got)
	}
	g.gen.Store(2) // a change commits while the first read is made
	const sharers = 8
	maker := call(ctx)
	c.waitNext(t, "acme", 0)
	var shared []chan result
	for range sharers {
		shared = append(shared, call(ctx))
	}
	leaving, leave := context.WithCancel(ctx)
	gone := call(leaving)
	c.waitNext(t, "acme", sharers+1)
	leave()
	if r := <-gone; !errors.Is(r.err, context.Canceled) {
		t.Errorf("a caller that left got %+v, want its context's error", r)
	}

	g.release <- nil
	if r := <-first; r != (result{gen: 1}) {
		t.Errorf("first caller got %+v, want generation 1", r)
	}
	if got := <-g.began; got != 2 {
		t.Fatalf("the second read began at generation %d, want 2: it must begin after the first ended", got)
	}
	g.release <- nil
	for i, ch := range append(shared, maker) {
		if r := <-ch; r != (result{gen: 2}) {
			t.Errorf("caller %d got %+v, want generation 2, read after it arrived", i, r)
		}
	}
	if n := g.reads.Load(); n != 2 {
		t.Errorf("%d reads for %d callers, want 2", n, sharers+3)
	}
	c.mu.Lock()
	left := len(c.reading)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d tenants still noted as reading after the reads ended", left)
	}

	// A read that fails fails for those who shared it: At gives them the
	// context as it was, and their reads go to the store.
	failing := call(ctx)
	<-g.began
	var wg sync.WaitGroup
	var withoutGen atomic.Int64
	wg.Go(func() {
		if _, ok := c.At(ctx, "acme").Value(atKey{}).(at); !ok {
			withoutGen.Add(1)
		}
	})
	c.waitNext(t, "acme", 0)
	g.release <- nil
	<-failing
	<-g.began
	g.release <- errors.New("database is closed")
	wg.Wait()
	if withoutGen.Load() != 1 {
		t.Error("At after a failed read carries a generation")
	}
}
