package siem

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/ids"
)

// Pusher defaults.
const (
	DefaultTick      = time.Second
	DefaultLease     = 30 * time.Second
	DefaultBatch     = 2000
	firstPushBackoff = time.Second
	maxPushBackoff   = 30 * time.Second
)

// Metrics are the sinks' Prometheus series.
type Metrics struct {
	lag    *prometheus.GaugeVec
	sent   *prometheus.CounterVec
	errors *prometheus.CounterVec
}

// NewMetrics registers the sinks' series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentplane_audit_sink_lag_records",
			Help: "Audit records not yet taken by the sink, over every tenant's chain, as of its last pass."}, []string{"sink"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentplane_audit_sink_sent_records_total",
			Help: "Audit records this replica delivered to the sink."}, []string{"sink"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentplane_audit_sink_errors_total",
			Help: "Failed deliveries of a batch to the sink (each retried with backoff)."}, []string{"sink"}),
	}
	reg.MustRegister(m.lag, m.sent, m.errors)
	return m
}

// Pusher pushes every tenant's audit chain to each sink. Every replica
// runs one; a lease per sink in the store lets one replica push it at a
// time, and the sink's cursor per tenant, moved after each delivered
// batch, makes delivery at least once and in seq order per tenant,
// resumed after a restart by whichever replica holds the lease. A sink
// that is down or slow only delays its own pushes: requests append to the
// store as always, and the sink's lag grows until it catches up.
type Pusher struct {
	Store   Store
	Sinks   []Sink
	Mapper  Mapper
	Metrics *Metrics
	// Owner names this replica in leases; default a new id.
	Owner string
	// Tick is how often a caught-up sink looks for new records; Lease how
	// long a pass holds a sink; Batch how many records of one tenant one
	// delivery carries.
	Tick  time.Duration
	Lease time.Duration
	Batch int
	Now   func() time.Time
	// Backoff is the wait after n failed passes in a row (default: 1 s
	// doubled up to 30 s, with jitter).
	Backoff func(n int) time.Duration
	Logger  *slog.Logger
}

func (p *Pusher) defaults() {
	if p.Owner == "" {
		p.Owner = ids.New("snk_")
	}
	if p.Tick <= 0 {
		p.Tick = DefaultTick
	}
	if p.Lease <= 0 {
		p.Lease = DefaultLease
	}
	if p.Batch <= 0 {
		p.Batch = DefaultBatch
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Backoff == nil {
		p.Backoff = pushBackoff
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
}

// Run pushes every sink until ctx is done, then releases their leases so
// another replica takes over at once.
func (p *Pusher) Run(ctx context.Context) {
	p.defaults()
	var wg sync.WaitGroup
	for _, s := range p.Sinks {
		wg.Go(func() { p.run(ctx, s) })
	}
	wg.Wait()
}

func (p *Pusher) run(ctx context.Context, s Sink) {
	defer func() {
		s.Close()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.Store.ReleaseSink(rctx, s.Name(), p.Owner); err != nil {
			p.Logger.Warn("audit sink lease not released", "sink", s.Name(), "error", err)
		}
	}()
	failures := 0
	for {
		more, err := p.Pass(ctx, s)
		wait := p.Tick
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			failures++
			wait = p.Backoff(failures)
			if p.Metrics != nil {
				p.Metrics.errors.WithLabelValues(s.Name()).Inc()
			}
			// The first failure and then one in ten: a sink down for an
			// hour does not fill the log.
			if failures == 1 || failures%10 == 0 {
				p.Logger.Warn("audit sink delivery failed; retrying", "sink", s.Name(), "failures", failures, "retry_in", wait.Round(time.Millisecond), "error", err)
			}
		default:
			if failures > 0 {
				p.Logger.Info("audit sink delivering again", "sink", s.Name(), "after_failures", failures)
			}
			failures = 0
			if more {
				wait = 0
			}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// Pass takes or renews the sink's lease, sets the sink's lag and, holding
// the lease, delivers one batch of each tenant whose chain is ahead of the
// sink's cursor, moving the cursor after each. more says some tenant had
// more than a batch.
func (p *Pusher) Pass(ctx context.Context, s Sink) (more bool, err error) {
	p.defaults()
	name := s.Name()
	now := p.Now()
	held, err := p.Store.ClaimSink(ctx, name, p.Owner, now, now.Add(p.Lease))
	if err != nil {
		return false, err
	}
	heads, err := p.Store.AuditHeads(ctx)
	if err != nil {
		return false, err
	}
	cursors, err := p.Store.SinkCursors(ctx, name)
	if err != nil {
		return false, err
	}
	lag := int64(0)
	var behind []string
	for tenant, head := range heads {
		if head > cursors[tenant] {
			lag += head - cursors[tenant]
			behind = append(behind, tenant)
		}
	}
	p.setLag(name, lag) // on every replica, holding the lease or not
	if !held {
		return false, nil
	}
	slices.Sort(behind)
	deadline := now.Add(p.Lease / 2)
	for _, tenant := range behind {
		if p.Now().After(deadline) {
			return true, nil // renew the lease before going on
		}
		b, err := p.Mapper.Read(ctx, p.Store, tenant, cursors[tenant], p.Batch)
		if err != nil {
			return false, err
		}
		if len(b.Lines) == 0 {
			continue
		}
		if err := s.Send(ctx, b); err != nil {
			return false, err
		}
		ok, err := p.Store.AdvanceSink(context.WithoutCancel(ctx), name, p.Owner, tenant, b.LastSeq, p.Now())
		if err != nil || !ok {
			return false, err // a lost lease: another replica goes on from the cursor
		}
		if p.Metrics != nil {
			p.Metrics.sent.WithLabelValues(name).Add(float64(len(b.Lines)))
		}
		lag -= min(b.LastSeq, heads[tenant]) - cursors[tenant]
		p.setLag(name, max(lag, 0))
		if len(b.Lines) == p.Batch {
			more = true
		}
	}
	return more, nil
}

func (p *Pusher) setLag(name string, lag int64) {
	if p.Metrics != nil {
		p.Metrics.lag.WithLabelValues(name).Set(float64(lag))
	}
}

// pushBackoff is the wait after n failed passes: 1 s doubled per failure
// up to 30 s, with full jitter over its upper half.
func pushBackoff(n int) time.Duration {
	b := firstPushBackoff << min(max(n-1, 0), 10)
	if b > maxPushBackoff || b <= 0 {
		b = maxPushBackoff
	}
	return b/2 + rand.N(b/2+1)
}
