package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var fivePerMinute = Limit{Rate: 5, Burst: 5, Period: time.Minute}

// allowN calls Allow n times and returns the results.
func allowN(t *testing.T, l Limiter, key string, lim Limit, n int) []Result {
	t.Helper()
	var out []Result
	for range n {
		res, err := l.Allow(context.Background(), key, lim)
		if err != nil {
			t.Fatalf("Allow(%q): %v", key, err)
		}
		out = append(out, res)
	}
	return out
}

func TestMemoryCountsDownThenRefuses(t *testing.T) {
	clock := newFakeClock()
	m := newMemory(clock.Now)

	got := allowN(t, m, "tenant:a", fivePerMinute, 6)

	// One token comes back every 12 s; the quota is whole 12 s after each use.
	want := []Result{
		{Allowed: true, Limit: 5, Remaining: 4, Reset: 12 * time.Second},
		{Allowed: true, Limit: 5, Remaining: 3, Reset: 24 * time.Second},
		{Allowed: true, Limit: 5, Remaining: 2, Reset: 36 * time.Second},
		{Allowed: true, Limit: 5, Remaining: 1, Reset: 48 * time.Second},
		{Allowed: true, Limit: 5, Remaining: 0, Reset: 60 * time.Second},
		{Allowed: false, Limit: 5, Remaining: 0, Reset: 60 * time.Second, RetryAfter: 12 * time.Second},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestMemoryRefusalTakesNothing(t *testing.T) {
	clock := newFakeClock()
	m := newMemory(clock.Now)
	allowN(t, m, "k", fivePerMinute, 5)

	// Refused requests at 0 s and 6 s must not push the refill further out.
	refused := allowN(t, m, "k", fivePerMinute, 1)[0]
	clock.Advance(6 * time.Second)
	refusedLater := allowN(t, m, "k", fivePerMinute, 1)[0]
	clock.Advance(6 * time.Second)
	allowed := allowN(t, m, "k", fivePerMinute, 1)[0]

	want := []Result{
		{Allowed: false, Limit: 5, Remaining: 0, Reset: 60 * time.Second, RetryAfter: 12 * time.Second},
		{Allowed: false, Limit: 5, Remaining: 0, Reset: 54 * time.Second, RetryAfter: 6 * time.Second},
		{Allowed: true, Limit: 5, Remaining: 0, Reset: 60 * time.Second},
	}
	if diff := cmp.Diff(want, []Result{refused, refusedLater, allowed}); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestMemoryKeysAreIndependent(t *testing.T) {
	clock := newFakeClock()
	m := newMemory(clock.Now)
	allowN(t, m, "tenant:a", fivePerMinute, 5)

	a := allowN(t, m, "tenant:a", fivePerMinute, 1)[0]
	b := allowN(t, m, "tenant:b", fivePerMinute, 1)[0]

	if a.Allowed {
		t.Errorf("tenant:a allowed after its quota was used: %+v", a)
	}
	if want := (Result{Allowed: true, Limit: 5, Remaining: 4, Reset: 12 * time.Second}); b != want {
		t.Errorf("tenant:b = %+v, want %+v", b, want)
	}
}

func TestMemoryFollowsAChangedLimit(t *testing.T) {
	clock := newFakeClock()
	m := newMemory(clock.Now)
	allowN(t, m, "k", fivePerMinute, 5)

	bigger := Limit{Rate: 60, Burst: 10, Period: time.Minute}
	got := allowN(t, m, "k", bigger, 1)[0]

	// The bucket keeps its 0 tokens; the new limit refills one a second.
	want := Result{Allowed: false, Limit: 10, Remaining: 0, Reset: 10 * time.Second, RetryAfter: time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestMemoryDefaultsAndInvalidLimits(t *testing.T) {
	m := newMemory(newFakeClock().Now)

	got := allowN(t, m, "k", Limit{Rate: 2}, 1)[0]
	if want := (Result{Allowed: true, Limit: 2, Remaining: 1, Reset: 30 * time.Second}); got != want {
		t.Errorf("Limit{Rate: 2} = %+v, want %+v (burst = rate, period a minute)", got, want)
	}
	if _, err := m.Allow(context.Background(), "k", Limit{Rate: 0}); err == nil {
		t.Error("Allow with rate 0: got nil error")
	}
}

func TestMemorySweepDropsOnlyIdleFullBuckets(t *testing.T) {
	clock := newFakeClock()
	m := newMemory(clock.Now)
	slow := Limit{Rate: 1, Burst: 5, Period: time.Minute}

	allowN(t, m, "refilled", fivePerMinute, 5) // whole again after 60 s
	allowN(t, m, "still-empty", slow, 5)       // whole again after 5 min
	clock.Advance(61 * time.Second)
	allowN(t, m, "recent", fivePerMinute, 1) // used just now

	m.sweep()

	var kept []string
	for key := range m.buckets {
		kept = append(kept, key)
	}
	if diff := cmp.Diff([]string{"recent", "still-empty"}, kept, sortStrings); diff != "" {
		t.Errorf("buckets kept (-want +got):\n%s", diff)
	}

	// A dropped key starts over with a full bucket.
	got := allowN(t, m, "refilled", fivePerMinute, 1)[0]
	if got.Remaining != 4 {
		t.Errorf("Remaining after eviction = %d, want 4", got.Remaining)
	}
}

func TestMemoryConcurrentUseAllowsExactlyTheBurst(t *testing.T) {
	m := NewMemory()
	t.Cleanup(func() { m.Close() })
	lim := Limit{Rate: 50, Burst: 50, Period: time.Hour}

	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			res, err := m.Allow(context.Background(), "shared", lim)
			if err != nil {
				t.Errorf("Allow: %v", err)
				return
			}
			if res.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()

	if got := allowed.Load(); got != 50 {
		t.Errorf("allowed %d of 200 concurrent requests, want 50", got)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
