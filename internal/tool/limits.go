package tool

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
)

// Limits protect a tool's backing API (SPEC §4 "Protecting the backing
// APIs"): a rate and a number of calls in flight shared by every replica,
// a time limit per call, retries of what is safe to repeat, and a circuit
// breaker. Every field is optional; a zero Limits limits nothing.
type Limits struct {
	// Rate is "<n>/s" or "<n>/m": calls over it wait their turn.
	Rate string `json:"rate,omitempty"`
	// Concurrency is the most calls in flight at once; 0 is no limit.
	Concurrency int `json:"concurrency,omitempty"`
	// Timeout bounds one call, its retries included (a Go duration).
	Timeout string         `json:"timeout,omitempty"`
	Retries *RetryLimits   `json:"retries,omitempty"`
	Circuit *CircuitLimits `json:"circuit,omitempty"`
}

// RetryLimits say how often a call that is safe to repeat is retried, and
// after which statuses (transport errors and time-outs of an attempt are
// always retried when the call is safe to repeat).
type RetryLimits struct {
	Max int   `json:"max"`
	On  []int `json:"on,omitempty"`
}

// CircuitLimits open a tool's circuit after Failures failures (5xx answers,
// time-outs, transport errors) within Window; it stays open for OpenFor,
// then lets one probe through.
type CircuitLimits struct {
	Failures int    `json:"failures"`
	Window   string `json:"window,omitempty"`
	OpenFor  string `json:"open_for,omitempty"`
}

// Bounds of limits.
const (
	MaxRetries     = 10
	maxConcurrency = 100000
	maxRatePerSec  = 1000000
	maxTimeout     = time.Hour
	// DefaultCircuitWindow and DefaultOpenFor apply when a circuit names
	// failures only.
	DefaultCircuitWindow = 30 * time.Second
	DefaultOpenFor       = 30 * time.Second
)

// DefaultRetryOn are the statuses retried when retries name none.
var DefaultRetryOn = []int{429, 502, 503, 504}

// IsZero reports whether l limits nothing.
func (l *Limits) IsZero() bool {
	return l == nil || l.Rate == "" && l.Concurrency == 0 && l.Timeout == "" && l.Retries == nil && l.Circuit == nil
}

// ParseRate reads "<n>/s" or "<n>/m" into a count per period.
func ParseRate(s string) (n int, per time.Duration, err error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	switch unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	default:
		ok = false
	}
	n, cerr := strconv.Atoi(num)
	if !ok || cerr != nil || n < 1 {
		return 0, 0, fmt.Errorf("must be <n>/s or <n>/m with n a positive whole number, e.g. \"50/s\", not %q", s)
	}
	if float64(n)/per.Seconds() > maxRatePerSec {
		return 0, 0, fmt.Errorf("is over %d calls a second", maxRatePerSec)
	}
	return n, per, nil
}

// duration parses a positive Go duration up to max; "" is 0.
func duration(s string, limit time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("must be a positive duration such as \"10s\" or \"1m30s\", not %q", s)
	}
	if d > limit {
		return 0, fmt.Errorf("must be at most %s", limit)
	}
	return d, nil
}

// validate appends what is wrong with l to add, fields under prefix.
func (l *Limits) validate(prefix string, add func(field, format string, args ...any)) {
	if l == nil {
		return
	}
	if l.Rate != "" {
		if _, _, err := ParseRate(l.Rate); err != nil {
			add(prefix+".rate", "%s", err)
		}
	}
	if l.Concurrency < 0 || l.Concurrency > maxConcurrency {
		add(prefix+".concurrency", "must be between 1 and %d (0 or absent: no limit)", maxConcurrency)
	}
	if _, err := duration(l.Timeout, maxTimeout); err != nil {
		add(prefix+".timeout", "%s", err)
	}
	if r := l.Retries; r != nil {
		if r.Max < 0 || r.Max > MaxRetries {
			add(prefix+".retries.max", "must be between 0 and %d", MaxRetries)
		}
		for i, st := range r.On {
			if st < 400 || st > 599 {
				add(fmt.Sprintf("%s.retries.on[%d]", prefix, i), "must be an HTTP error status (400-599), not %d", st)
			}
		}
	}
	if c := l.Circuit; c != nil {
		if c.Failures < 1 || c.Failures > 10000 {
			add(prefix+".circuit.failures", "must be between 1 and 10000")
		}
		if _, err := duration(c.Window, 24*time.Hour); err != nil {
			add(prefix+".circuit.window", "%s", err)
		}
		if _, err := duration(c.OpenFor, 24*time.Hour); err != nil {
			add(prefix+".circuit.open_for", "%s", err)
		}
	}
}

// validateLimits checks a registration's limits and operation_limits.
func validateLimits(reg *Registration, add func(field, format string, args ...any)) {
	reg.Limits.validate("limits", add)
	if len(reg.OperationLimits) > maxKindOverrides {
		add("operation_limits", "names %d operations, over the limit of %d", len(reg.OperationLimits), maxKindOverrides)
		return
	}
	for _, id := range slices.Sorted(maps.Keys(reg.OperationLimits)) {
		l := reg.OperationLimits[id]
		l.validate("operation_limits."+id, add)
	}
}

// checkOperationLimits refuses operation_limits naming no operation.
func checkOperationLimits(ops []Operation, limits map[string]Limits) error {
	var errs []problem.FieldError
	for _, id := range slices.Sorted(maps.Keys(limits)) {
		if !slices.ContainsFunc(ops, func(op Operation) bool { return op.ID == id }) {
			errs = append(errs, problem.FieldError{Field: "operation_limits." + id,
				Message: "names no operation of the document; GET /v1/tools/{id}/operations lists their ids"})
		}
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	return nil
}

// Effective is the limits of one operation's calls, parsed: the
// operation's own where operation_limits sets them, else the tool's. Key
// names what rate, concurrency and circuit are counted under: the tool,
// or the operation when it has its own.
type Effective struct {
	RateKey, ConcurrencyKey, CircuitKey string
	// Rate calls per Per; 0 is no limit.
	Rate int
	Per  time.Duration
	// Concurrency 0 is no limit.
	Concurrency int
	// Timeout 0 is the executor's default.
	Timeout time.Duration
	// Retries nil is the executor's default.
	Retries *RetryLimits
	// Failures 0 is no circuit.
	Failures        int
	Window, OpenFor time.Duration
}

// EffectiveLimits returns the limits of op's calls; nil when neither the
// tool nor the operation sets any (the common case costs nothing).
func (t *Tool) EffectiveLimits(op string) *Effective {
	own, hasOwn := t.OperationLimits[op]
	if t.Limits.IsZero() && (!hasOwn || own.IsZero()) {
		return nil
	}
	base := Limits{}
	if t.Limits != nil {
		base = *t.Limits
	}
	toolKey, opKey := t.ID, t.ID+"/"+op
	e := &Effective{RateKey: toolKey, ConcurrencyKey: toolKey, CircuitKey: toolKey}
	rate := base.Rate
	if own.Rate != "" {
		rate, e.RateKey = own.Rate, opKey
	}
	if rate != "" {
		e.Rate, e.Per, _ = ParseRate(rate)
	}
	e.Concurrency = base.Concurrency
	if own.Concurrency > 0 {
		e.Concurrency, e.ConcurrencyKey = own.Concurrency, opKey
	}
	timeout := base.Timeout
	if own.Timeout != "" {
		timeout = own.Timeout
	}
	e.Timeout, _ = duration(timeout, maxTimeout)
	e.Retries = base.Retries
	if own.Retries != nil {
		e.Retries = own.Retries
	}
	c := base.Circuit
	if own.Circuit != nil {
		c, e.CircuitKey = own.Circuit, opKey
	}
	if c != nil {
		e.Failures = c.Failures
		e.Window, _ = duration(c.Window, 24*time.Hour)
		e.OpenFor, _ = duration(c.OpenFor, 24*time.Hour)
		if e.Window == 0 {
			e.Window = DefaultCircuitWindow
		}
		if e.OpenFor == 0 {
			e.OpenFor = DefaultOpenFor
		}
	}
	return e
}

// storedLimits is how stores keep a tool's limits and redaction: one
// JSON column (named limits), kept in revision snapshots too, so a
// workflow on an earlier revision calls and masks as it started.
type storedLimits struct {
	Limits          *Limits           `json:"limits,omitempty"`
	OperationLimits map[string]Limits `json:"operation_limits,omitempty"`
	Redact          *redact.Config    `json:"redact,omitempty"`
	Refresh         string            `json:"refresh,omitempty"`
}

// EncodeLimits is t's limits, operation limits and redaction as the JSON
// a store keeps.
func (t *Tool) EncodeLimits() ([]byte, error) {
	data, err := json.Marshal(storedLimits{Limits: t.Limits, OperationLimits: t.OperationLimits, Redact: t.Redact, Refresh: t.Refresh})
	if err != nil {
		return nil, fmt.Errorf("encode tool limits: %w", err)
	}
	return data, nil
}

// DecodeLimits sets t's limits from what EncodeLimits made.
func (t *Tool) DecodeLimits(data []byte) error {
	var s storedLimits
	if len(data) > 0 {
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("decode tool limits: %w", err)
		}
	}
	t.Limits, t.OperationLimits, t.Redact, t.Refresh = s.Limits, s.OperationLimits, s.Redact, s.Refresh
	return nil
}
