// Package retention deletes what agentplane no longer keeps (SPEC §4 "Data
// lifecycle and governance"): finished workflows older than a tenant's
// retention, with everything recorded of them, and audit records older than
// the audit retention, behind a checkpoint that keeps the chain verifiable.
// A Sweeper does it in small batches on one replica at a time.
package retention

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
)

// Audit actions of this package.
const (
	ActionDelete     = "workflow.delete"
	ActionSweep      = "retention.sweep"
	ActionCheckpoint = audit.ActionCheckpoint
)

// Counts are the rows one deletion removed, by what they were.
type Counts struct {
	Workflows          int64 `json:"workflows"`
	Steps              int64 `json:"steps"`
	Completions        int64 `json:"completions"`
	Intents            int64 `json:"intents"`
	Approvals          int64 `json:"approvals"`
	Replays            int64 `json:"replays"`
	IdempotencyRecords int64 `json:"idempotency_records"`
	BatchItems         int64 `json:"batch_items"`
	JournalEntries     int64 `json:"journal_entries"`
	DatasetItems       int64 `json:"dataset_items"`
	WebhookDeliveries  int64 `json:"webhook_deliveries"`
	ScheduleRuns       int64 `json:"schedule_runs_unlinked"`
	PushConfigs        int64 `json:"push_configs"`
}

// Add adds o to c, count by count.
func (c *Counts) Add(o Counts) {
	theirs := o.Fields()
	for i, f := range c.Fields() {
		*f.N += *theirs[i].N
	}
}

// Fields lists each count with its JSON name, in the order above: what a
// store fills, one statement per field, and what metrics are labelled by.
func (c *Counts) Fields() []Field {
	return []Field{
		{"workflows", &c.Workflows}, {"steps", &c.Steps}, {"completions", &c.Completions},
		{"intents", &c.Intents}, {"approvals", &c.Approvals}, {"replays", &c.Replays},
		{"idempotency_records", &c.IdempotencyRecords}, {"batch_items", &c.BatchItems},
		{"journal_entries", &c.JournalEntries}, {"dataset_items", &c.DatasetItems},
		{"webhook_deliveries", &c.WebhookDeliveries}, {"schedule_runs_unlinked", &c.ScheduleRuns},
		{"push_configs", &c.PushConfigs},
	}
}

// Field is one count of Counts.
type Field struct {
	Name string
	N    *int64
}

// Scope selects the finished workflows a sweep batch deletes: those of
// Tenant (every tenant but Except when Tenant is "") that finished before
// Before.
type Scope struct {
	Tenant string
	Except []string
	Before time.Time
}

// Swept is what one sweep batch deleted.
type Swept struct {
	// Counts are by tenant.
	Counts map[string]Counts
	// Took is how long the batch's statements ran in the store's write
	// transaction: how long it held the writer, not counting its wait for
	// the writer nor the commit it shared with other writes.
	Took time.Duration
}

// Trimmed is what one audit trim removed.
type Trimmed struct {
	Removed int64
	// Took is as Swept's.
	Took time.Duration
}

// SweepRecord builds the audit record of a sweep batch's deletions in one
// tenant.
type SweepRecord func(tenant string, c Counts) *audit.Record

// CheckpointRecord builds the audit.checkpoint record of a trim that removes
// a chain's records up to throughSeq, whose hash is throughHash.
type CheckpointRecord func(tenant string, throughSeq int64, throughHash string, removed int64) *audit.Record

// Store deletes workflows and old audit records.
type Store interface {
	// DeleteWorkflow deletes one finished workflow of tenant with what is
	// recorded of it (see Counts) and the finished workflows of its
	// replays; problem.NotFound when tenant has none by that id,
	// problem.Conflict while it is running or waiting (or a replay of it
	// is). rec, its Details set to the counts, is appended in the same
	// transaction.
	DeleteWorkflow(ctx context.Context, tenant, id string, rec *audit.Record) (Counts, error)
	// SweepWorkflows deletes up to limit finished workflows of sc, oldest
	// first, as DeleteWorkflow does, in one transaction that appends
	// rec's record for each tenant it deleted from; it returns the counts
	// by tenant and how long its statements took.
	SweepWorkflows(ctx context.Context, sc Scope, limit int, rec SweepRecord) (Swept, error)
	// TakeLease gives owner the named lease until until when it is free,
	// lapsed or owner's already, and reports whether owner holds it.
	TakeLease(ctx context.Context, name, owner string, now, until time.Time) (bool, error)
	// AuditTenants lists the tenants that have an audit chain.
	AuditTenants(ctx context.Context) ([]string, error)
	// TrimAudit removes up to limit of the oldest records of tenant's chain,
	// in seq order, stopping at the first one not older than before. In
	// one transaction it first appends cp's checkpoint, naming the last
	// record removed, then removes; the chain's newest record is never
	// removed. It returns how many it removed and how long its statements
	// took.
	TrimAudit(ctx context.Context, tenant string, before time.Time, limit int, cp CheckpointRecord) (Trimmed, error)
}

// MinRetention is the shortest retention accepted: anything shorter is
// almost certainly a mistake (minutes for days) that would delete what is
// still being looked at.
const MinRetention = time.Hour

// ParseDuration parses a retention: a whole number of days ("90d"), a Go
// duration ("720h"), or "0" for keep forever (returned as 0).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a number of days, a duration (720h) or 0 for keep forever", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a number of days (90d), a duration (720h) or 0 for keep forever", s)
		}
	}
	if d < MinRetention {
		return 0, fmt.Errorf("%q is shorter than the minimum of one hour (0 keeps forever)", s)
	}
	return d, nil
}

// ParseTenant parses one tenant=retention of --tenant-retention.
func ParseTenant(s string) (string, time.Duration, error) {
	tenant, val, ok := strings.Cut(s, "=")
	tenant = strings.TrimSpace(tenant)
	if !ok || tenant == "" {
		return "", 0, fmt.Errorf("%q is not tenant=retention (acme=30d)", s)
	}
	d, err := ParseDuration(val)
	if err != nil {
		return "", 0, fmt.Errorf("tenant %q: %w", tenant, err)
	}
	return tenant, d, nil
}

// Policy is how long finished workflows are kept: Default for every tenant
// but those in Tenants; 0 keeps forever.
type Policy struct {
	Default time.Duration
	Tenants map[string]time.Duration
	// Audit is how long audit records are kept; 0 keeps forever.
	Audit time.Duration
}

// Enabled reports whether the policy ever deletes anything.
func (p Policy) Enabled() bool {
	if p.Default > 0 || p.Audit > 0 {
		return true
	}
	for _, d := range p.Tenants {
		if d > 0 {
			return true
		}
	}
	return false
}

// scopes are the sweep scopes of p at now: one per tenant with its own
// retention, and one for every other tenant.
func (p Policy) scopes(now time.Time) []Scope {
	var out []Scope
	except := make([]string, 0, len(p.Tenants))
	for t, d := range p.Tenants {
		except = append(except, t)
		if d > 0 {
			out = append(out, Scope{Tenant: t, Before: now.Add(-d)})
		}
	}
	if p.Default > 0 {
		out = append(out, Scope{Except: except, Before: now.Add(-p.Default)})
	}
	return out
}

// IDs stands, in Deletes, for the set of workflow ids being deleted: each
// store puts its own expression of one parameter (a JSON array in SQLite,
// a text[] in PostgreSQL) in its place.
const IDs = "{ids}"

// Deletes are the statements that remove a set of finished workflows with
// everything recorded of them, in order, each filling one count (Field
// names; "" counts nothing). Workflow ids are unique across tenants, so the
// ids alone select. A schedule's run keeps its due time, so the schedule
// does not run it again, but no longer names the workflow.
var Deletes = []struct{ Field, SQL string }{
	{"", `UPDATE datasets SET workflow_count = workflow_count - (SELECT count(*) FROM dataset_items i
		WHERE i.dataset_id = datasets.id AND i.workflow_id IN (` + IDs + `))
		WHERE id IN (SELECT dataset_id FROM dataset_items WHERE workflow_id IN (` + IDs + `))`},
	{"dataset_items", `DELETE FROM dataset_items WHERE workflow_id IN (` + IDs + `)`},
	{"steps", `DELETE FROM workflow_steps WHERE workflow_id IN (` + IDs + `)`},
	{"intents", `DELETE FROM workflow_intents WHERE workflow_id IN (` + IDs + `)`},
	{"completions", `DELETE FROM workflow_completions WHERE workflow_id IN (` + IDs + `)`},
	{"approvals", `DELETE FROM workflow_approvals WHERE workflow_id IN (` + IDs + `)`},
	{"replays", `DELETE FROM replays WHERE workflow_id IN (` + IDs + `)
		OR (replay_workflow_id <> '' AND replay_workflow_id IN (` + IDs + `))`},
	{"idempotency_records", `DELETE FROM idempotency_entries WHERE workflow_id <> '' AND workflow_id IN (` + IDs + `)`},
	{"batch_items", `DELETE FROM replay_batch_items WHERE workflow_id IN (` + IDs + `)`},
	{"journal_entries", `DELETE FROM replay_batch_journal WHERE workflow_id IN (` + IDs + `)`},
	{"webhook_deliveries", `DELETE FROM webhook_deliveries WHERE order_key <> '' AND order_key IN (` + IDs + `)`},
	{"schedule_runs_unlinked", `UPDATE schedule_runs SET workflow_id = '' WHERE workflow_id <> '' AND workflow_id IN (` + IDs + `)`},
	// An A2A task's push-notification configs are webhooks of that one
	// workflow (docs/a2a.md): they go with it.
	{"push_configs", `DELETE FROM webhooks WHERE workflow_id <> '' AND workflow_id IN (` + IDs + `)`},
	{"workflows", `DELETE FROM workflows WHERE id IN (` + IDs + `)`},
}

// Count returns the count of c named field, or nil for "".
func (c *Counts) Count(field string) *int64 {
	for _, f := range c.Fields() {
		if f.Name == field {
			return f.N
		}
	}
	return nil
}

// ReplaysOf is the query, with the workflow id as its one parameter
// (Param), of the workflows replaying it: a deleted workflow takes the
// finished ones with it, and is not deleted while one is running or waiting.
const ReplaysOf = `SELECT id, status FROM workflows WHERE replay_of <> '' AND replay_of = {p}
	UNION SELECT w.id, w.status FROM replays r JOIN workflows w ON w.id = r.replay_workflow_id
	WHERE r.workflow_id = {p} AND r.replay_workflow_id <> ''`

// Finished reports whether a workflow of status is finished.
func Finished(status string) bool { return status != "running" && status != "waiting" }
