// Package ratelimit decides whether a request may proceed under a per-key
// token-bucket quota (SPEC §5): per tenant for authenticated traffic, per
// client IP for unauthenticated traffic.
//
// Two implementations satisfy Limiter: Memory keeps one bucket per key in
// this process; Redis shares the quota between replicas through a GCRA
// script in Redis. Both answer with a Result that carries everything the
// HTTP layer needs for the X-RateLimit-* and Retry-After headers.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// DefaultPeriod is the period of a Limit that names none.
const DefaultPeriod = time.Minute

// Limiter takes one request from the quota of key, if there is one left.
//
// An error means the limiter could not decide (Redis unreachable, say); it is
// never a refusal. The caller decides whether to fail open or closed; the HTTP
// layer answers 503 unavailable.
type Limiter interface {
	Allow(ctx context.Context, key string, l Limit) (Result, error)
}

// Limit is a quota: Rate requests per Period, with at most Burst at once.
type Limit struct {
	// Rate is the number of requests a Period refills.
	Rate int
	// Burst is the size of the bucket: the most requests allowed at once.
	// Zero means Rate.
	Burst int
	// Period is the time Rate is counted over. Zero means DefaultPeriod.
	Period time.Duration
}

// String formats l as "rate/period burst N", for logs and flag help.
func (l Limit) String() string {
	l = l.normalize()
	return fmt.Sprintf("%d/%s burst %d", l.Rate, l.Period, l.Burst)
}

// normalize fills in the defaults of the zero fields.
func (l Limit) normalize() Limit {
	if l.Period <= 0 {
		l.Period = DefaultPeriod
	}
	if l.Burst <= 0 {
		l.Burst = l.Rate
	}
	return l
}

// validate reports a Limit no bucket can be built from.
func (l Limit) validate() error {
	if l.Rate <= 0 {
		return fmt.Errorf("rate limit: rate must be positive, got %d", l.Rate)
	}
	return nil
}

// perSecond is the refill rate in tokens a second.
func (l Limit) perSecond() float64 {
	return float64(l.Rate) / l.Period.Seconds()
}

// Result is the outcome of one Allow.
type Result struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Limit is the size of the quota (the Limit's Burst): what Remaining
	// counts down from.
	Limit int
	// Remaining is the number of requests that would be allowed right now.
	Remaining int
	// RetryAfter is how long to wait before the next request can be allowed;
	// zero when Allowed.
	RetryAfter time.Duration
	// Reset is how long until the quota is whole again (Remaining == Limit).
	Reset time.Duration
}

// SetHeaders writes X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (whole seconds, rounded up) and, when the request was
// refused, Retry-After (whole seconds, rounded up, at least 1).
func (r Result) SetHeaders(h http.Header) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(r.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(r.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(r.Reset), 10))
	if !r.Allowed {
		h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(r.RetryAfter), 1), 10))
	}
}

// Err returns the 429 rate-limited problem for a refused request, or nil
// when it was allowed.
func (r Result) Err() error {
	if r.Allowed {
		return nil
	}
	return &problem.Error{
		Code:       problem.RateLimited,
		Detail:     fmt.Sprintf("over the limit of %d requests; retry in %d s", r.Limit, max(ceilSeconds(r.RetryAfter), 1)),
		RetryAfter: r.RetryAfter,
	}
}

// ceilSeconds rounds d up to whole seconds; negative durations count as zero.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// durationOf converts seconds to a Duration, never below zero.
func durationOf(seconds float64) time.Duration {
	if seconds <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(seconds * float64(time.Second)))
}
