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
	DefaultPause      = 20 * time.Millisecond
	leaseName         = "retention"
)

// SystemActor is the actor of the records the sweeper appends.
var SystemActor = audit.Actor{Sub: "agentplane:retention"}

// Sweeper deletes what Policy no longer keeps, every Every, on the one
// replica holding the store's "retention" lease. Each batch is one short
// transaction of at most Batch workflows (AuditBatch audit records), and
// after each the sweeper waits as long as it took (at least Pause), so a
// sweep of a large backlog takes at most half of the database's writing
// time and shares it with the requests being served.
type Sweeper struct {
	Store  Store
	Policy Policy
	// Owner names this replica in the lease.
	Owner      string
	Every      time.Duration
	Batch      int
	AuditBatch int
	Pause      time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
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
	if s.Pause < 0 {
		s.Pause = 0
	}
	if s.Now == nil {
		s.Now = time.Now
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
			s.Logger.Info("retention sweep", "workflows", res.Workflows.Workflows, "audit_records", res.AuditRecords)
		}
	}
}

// Result is what one sweep deleted.
type Result struct {
	// Held reports whether this replica held the lease and swept.
	Held         bool
	Workflows    Counts
	AuditRecords int64
}

// Sweep runs one pass: it takes the lease (or returns, Held false, when
// another replica holds it), deletes the expired workflows of each scope
// batch by batch, then trims each tenant's audit chain. The lease is
// renewed before every batch; losing it ends the pass.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	s.defaults()
	var res Result
	held, err := s.renew(ctx)
	if err != nil || !held {
		return res, err
	}
	res.Held = true
	for _, sc := range s.Policy.scopes(s.Now()) {
		for {
			t0 := time.Now()
			got, err := s.Store.SweepWorkflows(ctx, sc, s.Batch, s.sweepRecord(sc))
			if err != nil {
				return res, fmt.Errorf("sweep workflows: %w", err)
			}
			var n int64
			for _, c := range got {
				res.Workflows.Add(c)
				Count(s.Deleted, c)
				n += c.Workflows
			}
			if n < int64(s.Batch) {
				break
			}
			if held, err := s.next(ctx, time.Since(t0)); err != nil || !held {
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
	for _, tenant := range tenants {
		for {
			t0 := time.Now()
			n, err := s.Store.TrimAudit(ctx, tenant, before, s.AuditBatch, checkpointRecord)
			if err != nil {
				return res, fmt.Errorf("trim the audit chain of %q: %w", tenant, err)
			}
			res.AuditRecords += n
			if s.Deleted != nil && n > 0 {
				s.Deleted.WithLabelValues("audit_records").Add(float64(n))
			}
			if n < int64(s.AuditBatch) {
				break
			}
			if held, err := s.next(ctx, time.Since(t0)); err != nil || !held {
				return res, err
			}
		}
	}
	return res, nil
}

// next pauses after a batch that took took, as long again (at least
// Pause), and renews the lease.
func (s *Sweeper) next(ctx context.Context, took time.Duration) (bool, error) {
	if pause := max(s.Pause, took); pause > 0 {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(pause):
		}
	}
	return s.renew(ctx)
}

func (s *Sweeper) renew(ctx context.Context) (bool, error) {
	now := s.Now()
	held, err := s.Store.TakeLease(ctx, leaseName, s.Owner, now, now.Add(2*s.Every))
	if err != nil {
		return false, fmt.Errorf("take the retention lease: %w", err)
	}
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
