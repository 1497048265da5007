package call

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/agentplane/agentplane/internal/tool"
)

// Limiter shares tools' rate and concurrency limits between calls: in
// process (NewMemoryLimiter) or across replicas (NewRedisLimiter).
type Limiter interface {
	// Wait takes one call from key's rate of n per per, waiting for it
	// while ctx allows; an error when the turn comes too late for ctx.
	Wait(ctx context.Context, key string, n int, per time.Duration) error
	// Acquire takes one of key's n slots, waiting for one while ctx
	// allows; release gives it back.
	Acquire(ctx context.Context, key string, n int) (release func(), err error)
}

// Metrics receives what the executor observes of each tool; the tool label
// is the tool's id (bounded by registrations, unlike arguments).
type Metrics interface {
	// ObserveToolCall records a finished call: code is "" for a success.
	ObserveToolCall(toolID, code string, attempts int, d time.Duration)
	// ObserveToolSlotWait records how long a call waited for its rate turn
	// and its concurrency slot.
	ObserveToolSlotWait(toolID string, d time.Duration)
	// SetToolCircuit records a circuit's state: 0 closed, 1 half-open, 2 open.
	SetToolCircuit(circuit string, state int)
}

// errNoTurn is a limiter's refusal: no turn or slot within the context's time.
var errNoTurn = errors.New("no turn within the call's time")

// MemoryLimiter keeps limits in this process.
type MemoryLimiter struct {
	mu    sync.Mutex
	rates map[string]*rate.Limiter
	slots map[string]chan struct{}
}

// NewMemoryLimiter returns an in-process Limiter.
func NewMemoryLimiter() *MemoryLimiter {
	return &MemoryLimiter{rates: map[string]*rate.Limiter{}, slots: map[string]chan struct{}{}}
}

// Wait implements Limiter. A burst of one spaces calls evenly: at most n+1
// fall in any window of per.
func (m *MemoryLimiter) Wait(ctx context.Context, key string, n int, per time.Duration) error {
	want := rate.Limit(float64(n) / per.Seconds())
	m.mu.Lock()
	lim, ok := m.rates[key]
	if !ok {
		lim = rate.NewLimiter(want, 1)
		m.rates[key] = lim
	} else if lim.Limit() != want {
		lim.SetLimit(want)
	}
	m.mu.Unlock()
	if err := lim.Wait(ctx); err != nil {
		return errNoTurn
	}
	return nil
}

// Acquire implements Limiter. A changed n starts a new set of slots.
func (m *MemoryLimiter) Acquire(ctx context.Context, key string, n int) (func(), error) {
	k := key + "#" + strconv.Itoa(n)
	m.mu.Lock()
	sem, ok := m.slots[k]
	if !ok {
		sem = make(chan struct{}, n)
		m.slots[k] = sem
	}
	m.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, errNoTurn
	}
}

// breakers are the executor's circuit breakers, one per tool (or operation
// with its own circuit), rebuilt when the circuit's settings change.
type breakers struct {
	mu      sync.Mutex
	m       map[string]*breaker
	metrics Metrics
}

type breaker struct {
	settings string
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
}

// errExcluded marks an attempt that says nothing of the API's health: the
// call stopped before sending, or was cancelled.
var errExcluded = errors.New("not counted")

// errFailure marks an attempt that counts against the circuit.
var errFailure = errors.New("failure")

func (b *breakers) get(l *tool.Effective) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	settings := fmt.Sprint(l.Failures, l.Window, l.OpenFor)
	b.mu.Lock()
	defer b.mu.Unlock()
	if x, ok := b.m[l.CircuitKey]; ok && x.settings == settings {
		return x.cb
	}
	failures := uint32(l.Failures)
	bucket := l.Window / 10
	if bucket < time.Millisecond {
		bucket = 0
	}
	metrics := b.metrics
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         l.CircuitKey,
		MaxRequests:  1, // one probe when half-open
		Interval:     l.Window,
		BucketPeriod: bucket,
		Timeout:      l.OpenFor,
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.TotalFailures >= failures },
		IsExcluded:   func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: func(name string, _, to gobreaker.State) {
			if metrics != nil {
				metrics.SetToolCircuit(name, circuitState(to))
			}
		},
	})
	if b.m == nil {
		b.m = map[string]*breaker{}
	}
	b.m[l.CircuitKey] = &breaker{settings: settings, cb: cb}
	return cb
}

func circuitState(s gobreaker.State) int {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

// forget drops a tool's circuits.
func (b *breakers) forget(toolID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.m {
		if k == toolID || len(k) > len(toolID) && k[:len(toolID)+1] == toolID+"/" {
			delete(b.m, k)
		}
	}
}

// enter lets one attempt of a call with limits l go: its circuit must be
// closed (or this the half-open probe), then it waits its rate turn and a
// slot. done reports the attempt's answer status and error, and frees the
// slot.
func (e *Executor) enter(ctx context.Context, t *tool.Tool, l *tool.Effective) (done func(status int, err error), err error) {
	report := func(error) {}
	if l.Failures > 0 {
		report, err = e.breakers.get(l).Allow()
		if err != nil {
			return nil, &Error{Code: tool.CodeCircuitOpen, Msg: fmt.Sprintf(
				"the circuit of tool %q is open after %d failures within %s: the call was not sent; it lets a probe through %s after it opened",
				t.Name, l.Failures, l.Window, l.OpenFor), Err: err}
		}
	}
	start := time.Now()
	refuse := func(what string) (func(int, error), error) {
		report(errExcluded)
		return nil, &Error{Code: tool.CodeRateLimited, Msg: fmt.Sprintf(
			"the call of tool %q got no %s within its time: the tool's limits allow fewer calls than the workflows make; raise them or the tool's limits.timeout", t.Name, what)}
	}
	if l.Rate > 0 {
		if err := e.opts.Limiter.Wait(ctx, l.RateKey, l.Rate, l.Per); err != nil {
			if !errors.Is(err, errNoTurn) {
				report(errExcluded)
				return nil, &Error{Msg: "the tool's rate limiter is unavailable", Err: err}
			}
			return refuse("turn of its rate limit (" + strconv.Itoa(l.Rate) + " per " + l.Per.String() + ")")
		}
	}
	release := func() {}
	if l.Concurrency > 0 {
		if release, err = e.opts.Limiter.Acquire(ctx, l.ConcurrencyKey, l.Concurrency); err != nil {
			if !errors.Is(err, errNoTurn) {
				report(errExcluded)
				return nil, &Error{Msg: "the tool's concurrency limiter is unavailable", Err: err}
			}
			return refuse("slot of its concurrency limit (" + strconv.Itoa(l.Concurrency) + ")")
		}
	}
	if e.opts.Metrics != nil && (l.Rate > 0 || l.Concurrency > 0) {
		e.opts.Metrics.ObserveToolSlotWait(t.ID, time.Since(start))
	}
	return func(status int, err error) {
		release()
		report(breakerOutcome(ctx, status, err))
	}, nil
}

// breakerOutcome is what an attempt tells the circuit: 5xx answers,
// time-outs and transport errors are failures; any other answer (a 4xx,
// a 429 included: it slows calls down, it does not open the circuit) is a
// success; a cancelled call says nothing.
func breakerOutcome(ctx context.Context, status int, err error) error {
	switch {
	case status >= 500:
		return errFailure
	case status != 0:
		return nil
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		return errExcluded
	}
	switch tool.ErrorCode(err) {
	case tool.CodeTransport, tool.CodeTimeout:
		return errFailure
	}
	return errExcluded
}

// backoff is the wait before retry number attempt (1 for the first):
// base × 4^(attempt-1), with full jitter over its upper half.
func backoff(base time.Duration, attempt int) time.Duration {
	d := base << (2 * (attempt - 1))
	if d <= 0 || d > time.Minute {
		d = time.Minute
	}
	return d/2 + rand.N(d/2+1)
}
