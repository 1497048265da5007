package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// sweepEvery is how often Memory looks for idle buckets to drop.
const sweepEvery = time.Minute

// Memory is a Limiter that keeps one token bucket per key in this process.
// Buckets that are full again and have not been used for a period are
// dropped by a background sweep, so memory follows the number of active
// keys, not the number ever seen. Close stops the sweep.
type Memory struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket

	stop      chan struct{}
	closeOnce sync.Once
}

// bucket is one key's token bucket and the Limit it was built for.
type bucket struct {
	mu    sync.Mutex
	lim   *rate.Limiter
	limit Limit
	last  time.Time
	// dropped is set by sweep when it removes the bucket from the map.
	dropped bool
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an in-process Limiter. Call Close when done with it.
func NewMemory() *Memory {
	m := newMemory(time.Now)
	go m.sweepLoop(sweepEvery)
	return m
}

// newMemory returns a Memory on the given clock, without the background sweep.
func newMemory(now func() time.Time) *Memory {
	return &Memory{
		now:     now,
		buckets: make(map[string]*bucket),
		stop:    make(chan struct{}),
	}
}

// Allow takes one request from key's bucket if a whole token is there; a
// refused request takes nothing.
func (m *Memory) Allow(_ context.Context, key string, l Limit) (Result, error) {
	l = l.normalize()
	if err := l.validate(); err != nil {
		return Result{}, err
	}
	now := m.now()
	b := m.lockedBucket(key, l, now)
	defer b.mu.Unlock()
	if b.limit != l {
		b.lim.SetLimitAt(now, rate.Limit(l.perSecond()))
		b.lim.SetBurstAt(now, l.Burst)
		b.limit = l
	}
	allowed := b.lim.AllowN(now, 1)
	tokens := b.lim.TokensAt(now)
	b.last = now

	perSec := l.perSecond()
	res := Result{
		Allowed:   allowed,
		Limit:     l.Burst,
		Remaining: max(int(math.Floor(tokens)), 0),
		Reset:     durationOf((float64(l.Burst) - tokens) / perSec),
	}
	if !allowed {
		res.RetryAfter = max(durationOf((1-tokens)/perSec), time.Nanosecond)
	}
	return res, nil
}

// lockedBucket returns key's bucket, locked, creating a full one when there
// is none. A bucket the sweep dropped in the meantime is not returned.
func (m *Memory) lockedBucket(key string, l Limit, now time.Time) *bucket {
	for {
		b := m.bucket(key, l, now)
		b.mu.Lock()
		if !b.dropped {
			return b
		}
		b.mu.Unlock()
	}
}

// bucket returns key's bucket, creating a full one when there is none.
func (m *Memory) bucket(key string, l Limit, now time.Time) *bucket {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.perSecond()), l.Burst), limit: l, last: now}
		m.buckets[key] = b
	}
	return b
}

// Len returns the number of buckets held, for tests and metrics.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}

// Close stops the background sweep. Allow keeps working afterwards.
func (m *Memory) Close() error {
	m.closeOnce.Do(func() { close(m.stop) })
	return nil
}

// sweepLoop drops idle buckets every interval until Close.
func (m *Memory) sweepLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sweep()
		}
	}
}

// sweep drops the buckets that are full and were last used more than a
// period ago: forgetting them changes no answer, since a new bucket starts full.
func (m *Memory) sweep() {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, b := range m.buckets {
		b.mu.Lock()
		if now.Sub(b.last) > b.limit.Period && b.lim.TokensAt(now) >= float64(b.limit.Burst) {
			b.dropped = true
			delete(m.buckets, key)
		}
		b.mu.Unlock()
	}
}
