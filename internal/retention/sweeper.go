package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/audit"
)

// Sweeper defaults.
const (
	DefaultEvery      = time.Minute
	DefaultBatch      = 100
	DefaultAuditBatch = 2000
	DefaultTarget     = 5 * time.Millisecond
	DefaultShare      = 0.05
	DefaultPause      = 2 * time.Millisecond
	leaseName         = "retention"
)

// SystemActor is the actor of the records the sweeper appends.
var SystemActor = audit.Actor{Sub: "agentplane:retention"}

// Sweeper deletes what Policy no longer keeps, every Every, on the one
// replica holding the store's "retention" lease, yielding to the requests
// being served. Each batch is one transaction of at most Batch workflows
// (AuditBatch audit records), sized so that its statements hold the
// store's writer for about Target (Swept.Took): halved after a batch over
// it, doubled after a full one under half of it; on a store whose batches
// hold no writer (Beside), full. After a batch the sweeper
// waits Pause, or, when the store committed other writes since the
// previous batch (Writes, the sweeper's own left out), long enough that
// its batches take Share of the writing time.
type Sweeper struct {
	Store  Store
	Policy Policy
	// Writes counts the store's committed writes; without it the sweeper
	// always paces as under load.
	Writes WriteCounter
	// Owner names this replica in the lease.
	Owner      string
	Every      time.Duration
	Batch      int
	AuditBatch int
	// Target is how long a batch's statements should take (DefaultTarget
	// when 0).
	Target time.Duration
	// Share is the part of the writing time batches take under load,
	// over 0 and at most 1 (DefaultShare when 0).
	Share float64
	// Pause is the wait after a batch without load (DefaultPause when 0,
	// none when negative).
	Pause  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
	// Sleep waits d or until ctx ends (a timer when nil).
	Sleep func(ctx context.Context, d time.Duration) error
	// Deleted, when set, counts what is deleted by kind (a Counts field
	// name, or audit_records).
	Deleted *prometheus.CounterVec
}

// NewDeletedCounter registers agentplane_retention_deleted_total on reg.
func NewDeletedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentplane_retention_deleted_total",
		Help: "Rows deleted by retention (the sweep and DELETE /v1/workflows/{id}), by kind: workflows, steps, completions, replays, idempotency_records, …, audit_records.",
	}, []string{"kind"})
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			return are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return c
}

// Count adds c to the deleted counter d, when d is set.
func Count(d *prometheus.CounterVec, c Counts) {
	if d == nil {
		return
	}
	for _, f := range c.Fields() {
		if *f.N > 0 {
			d.WithLabelValues(f.Name).Add(float64(*f.N))
		}
	}
}

func (s *Sweeper) defaults() {
	if s.Every <= 0 {
		s.Every = DefaultEvery
	}
	if s.Batch <= 0 {
		s.Batch = DefaultBatch
	}
	if s.AuditBatch <= 0 {
		s.AuditBatch = DefaultAuditBatch
	}
	if s.Target <= 0 {
		s.Target = DefaultTarget
	}
	if s.Share <= 0 || s.Share > 1 {
		s.Share = DefaultShare
	}
	if s.Pause == 0 {
		s.Pause = DefaultPause
	}
	s.Pause = max(s.Pause, 0)
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Sleep == nil {
		s.Sleep = sleep
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run sweeps every Every until ctx ends. It does nothing when the policy
// deletes nothing.
func (s *Sweeper) Run(ctx context.Context) {
	s.defaults()
	if !s.Policy.Enabled() {
		return
	}
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.Logger.Warn("retention sweep failed", "error", err)
		}
		if res.Workflows.Workflows > 0 || res.AuditRecords > 0 {
			s.Logger.Info("retention sweep", "workflows", res.Workflows.Workflows, "audit_records", res.AuditRecords,
				"batches", res.Batches)
		}
	}
}

// Result is what one sweep deleted.
type Result struct {
	// Held reports whether this replica held the lease and swept.
	Held         bool
	Workflows    Counts
	AuditRecords int64
	// Batches is how many transactions deleted them.
	Batches int
}

// Sweep runs one pass: it takes the lease (or returns, Held false, when
// another replica holds it), deletes the expired workflows of each scope
// batch by batch, then trims each tenant's audit chain. The lease is
// renewed before every batch; losing it ends the pass.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	s.defaults()
	var res Result
	load := newLoadMeter(s.Writes)
	held, err := s.renew(ctx, load)
	if err != nil || !held {
		return res, err
	}
	res.Held = true
	target := s.Target
	if b, ok := s.Store.(Beside); ok && b.SweepsBesideWrites() {
		target = 0
	}
	pace := newPacer(target, s.Batch, s.Share, s.Pause)
	for _, sc := range s.Policy.scopes(s.Now()) {
		for {
			size := pace.size
			got, err := s.Store.SweepWorkflows(ctx, sc, size, s.sweepRecord(sc))
			if err != nil {
				return res, fmt.Errorf("sweep workflows: %w", err)
			}
			load.wrote()
			var n int64
			for _, c := range got.Counts {
				res.Workflows.Add(c)
				Count(s.Deleted, c)
				n += c.Workflows
			}
			res.Batches++
			if n < int64(size) {
				break
			}
			pause := pace.next(got.Took, load.busy())
			if held, err := s.next(ctx, pause, load); err != nil || !held {
				return res, err
			}
		}
	}
	if s.Policy.Audit <= 0 {
		return res, nil
	}
	tenants, err := s.Store.AuditTenants(ctx)
	if err != nil {
		return res, fmt.Errorf("list audit chains: %w", err)
	}
	before := s.Now().Add(-s.Policy.Audit)
	pace = newPacer(target, s.AuditBatch, s.Share, s.Pause)
	for _, tenant := range tenants {
		for {
			size := pace.size
			trimmed, err := s.Store.TrimAudit(ctx, tenant, before, size, checkpointRecord)
			if err != nil {
				return res, fmt.Errorf("trim the audit chain of %q: %w", tenant, err)
			}
			n := trimmed.Removed
			load.wrote()
			res.AuditRecords += n
			if s.Deleted != nil && n > 0 {
				s.Deleted.WithLabelValues("audit_records").Add(float64(n))
			}
			if n < int64(size) {
				break
			}
			pause := pace.next(trimmed.Took, load.busy())
			if held, err := s.next(ctx, pause, load); err != nil || !held {
				return res, err
			}
		}
	}
	return res, nil
}

// next waits pause and renews the lease.
func (s *Sweeper) next(ctx context.Context, pause time.Duration, load *loadMeter) (bool, error) {
	if pause > 0 {
		if err := s.Sleep(ctx, pause); err != nil {
			return false, err
		}
	}
	return s.renew(ctx, load)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *Sweeper) renew(ctx context.Context, load *loadMeter) (bool, error) {
	now := s.Now()
	held, err := s.Store.TakeLease(ctx, leaseName, s.Owner, now, now.Add(2*s.Every))
	if err != nil {
		return false, fmt.Errorf("take the retention lease: %w", err)
	}
	load.wrote()
	return held, nil
}

// sweepRecord is the retention.sweep record of a batch in sc.
func (s *Sweeper) sweepRecord(sc Scope) SweepRecord {
	return func(tenant string, c Counts) *audit.Record {
		return &audit.Record{
			Tenant: tenant, Actor: SystemActor, Action: "retention.sweep",
			Resource: audit.Resource{Type: "workflow"}, Outcome: audit.Success,
			Details: audit.Details(sweepDetails{Counts: c, FinishedBefore: sc.Before.UTC().Format(time.RFC3339)}),
		}
	}
}

type sweepDetails struct {
	Counts
	FinishedBefore string `json:"finished_before"`
}

func checkpointRecord(tenant string, seq int64, hash string, removed int64) *audit.Record {
	return &audit.Record{
		Tenant: tenant, Actor: SystemActor, Action: "audit.checkpoint",
		Resource: audit.Resource{Type: "audit"}, Outcome: audit.Success,
		Details: audit.Details(audit.Checkpoint{ThroughSeq: seq, ThroughHash: hash, Removed: removed}),
	}
}

// Service deletes one workflow on request, counting what it deleted.
type Service struct {
	Store   Store
	Deleted *prometheus.CounterVec
}

// Delete deletes one finished workflow of tenant now; see Store.DeleteWorkflow.
func (s *Service) Delete(ctx context.Context, tenant, id string, rec *audit.Record) (Counts, error) {
	c, err := s.Store.DeleteWorkflow(ctx, tenant, id, rec)
	if err == nil {
		Count(s.Deleted, c)
	}
	return c, err
}
