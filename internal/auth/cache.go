package auth

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// CachingVerifier remembers tokens it has verified, so a client sending the
// same access token on every request pays for one signature check a
// minute rather than one a request. Entries live until the token's expiry
// or for ttl, whichever is sooner; failures are never cached.
type CachingVerifier struct {
	next Verifier
	ttl  time.Duration
	max  int
	now  func() time.Time

	mu      sync.Mutex
	entries map[[32]byte]cached
}

type cached struct {
	p     Principal
	until time.Time
}

// NewCachingVerifier wraps next. A token whose signing key is rotated out
// of the key set stays accepted for at most ttl.
func NewCachingVerifier(next Verifier, ttl time.Duration, max int, now func() time.Time) *CachingVerifier {
	if now == nil {
		now = time.Now
	}
	return &CachingVerifier{next: next, ttl: ttl, max: max, now: now, entries: map[[32]byte]cached{}}
}

// Verify returns the cached principal of raw, or verifies it.
func (c *CachingVerifier) Verify(ctx context.Context, raw string) (Principal, error) {
	key := sha256.Sum256([]byte(raw))
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.p, nil
	}
	p, err := c.next.Verify(ctx, raw)
	if err != nil {
		return p, err
	}
	until := now.Add(c.ttl)
	if exp, ok := p.expiry(); ok && exp.Before(until) {
		until = exp
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		for k, v := range c.entries { // drop the expired, or one at random
			if !now.Before(v.until) || len(c.entries) >= c.max {
				delete(c.entries, k)
			}
			if len(c.entries) < c.max/2 {
				break
			}
		}
	}
	c.entries[key] = cached{p: p, until: until}
	c.mu.Unlock()
	return p, nil
}
