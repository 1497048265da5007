package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// retentionDeletes are retention.Deletes with the id set read from the
// JSON array ?1.
var retentionDeletes = func() []string {
	out := make([]string, len(retention.Deletes))
	for i, d := range retention.Deletes {
		out[i] = strings.ReplaceAll(d.SQL, retention.IDs, `SELECT value FROM json_each(?1)`)
	}
	return out
}()

var replaysOf = strings.ReplaceAll(retention.ReplaysOf, "{p}", "?1")

// deleteWorkflows removes the workflows ids and what refers to them (see
// retention.Deletes) in tx.
func deleteWorkflows(ctx context.Context, tx dbtx, ids []string) (retention.Counts, error) {
	var c retention.Counts
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return c, fmt.Errorf("encode workflow ids: %w", err)
	}
	for i, q := range retentionDeletes {
		res, err := tx.ExecContext(ctx, q, string(idsJSON))
		if err != nil {
			return c, fmt.Errorf("delete workflows (%s): %w", retention.Deletes[i].Field, err)
		}
		if n := c.Count(retention.Deletes[i].Field); n != nil {
			if *n, err = res.RowsAffected(); err != nil {
				return c, fmt.Errorf("delete workflows: %w", err)
			}
		}
	}
	return c, nil
}

// DeleteWorkflow deletes one finished workflow and the finished workflows
// replaying it; see retention.Store.
func (db *DB) DeleteWorkflow(ctx context.Context, tenant, id string, rec *audit.Record) (retention.Counts, error) {
	db.prepareAudit(rec)
	var c retention.Counts
	err := db.write(ctx, func(tx dbtx) error {
		var status string
		err := tx.QueryRowContext(ctx, `SELECT status FROM workflows WHERE tenant = ? AND id = ?`, tenant, id).Scan(&status)
		if err == sql.ErrNoRows {
			return workflowNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("load workflow: %w", err)
		}
		if !retention.Finished(status) {
			return problem.New(problem.Conflict, "workflow %q is %s: only a finished workflow can be deleted", id, status)
		}
		set := []string{id}
		rows, err := tx.QueryContext(ctx, replaysOf, id)
		if err != nil {
			return fmt.Errorf("find replays: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var rid, rstatus string
			if err := rows.Scan(&rid, &rstatus); err != nil {
				return fmt.Errorf("find replays: %w", err)
			}
			if !retention.Finished(rstatus) {
				return problem.New(problem.Conflict, "workflow %q has a replay still %s (%s): delete it once that ends", id, rstatus, rid)
			}
			set = append(set, rid)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find replays: %w", err)
		}
		if c, err = deleteWorkflows(ctx, tx, set); err != nil {
			return err
		}
		rec.Details = audit.Details(c)
		return appendAudit(ctx, tx, rec)
	})
	return c, err
}

// SweepWorkflows deletes up to limit finished workflows of sc, oldest first;
// see retention.Store. A workflow a replay of which is still running or
// waiting is left for a later sweep.
func (db *DB) SweepWorkflows(ctx context.Context, sc retention.Scope, limit int, rec retention.SweepRecord) (retention.Swept, error) {
	var out retention.Swept
	where, args := "tenant = ?", []any{sc.Tenant}
	if sc.Tenant == "" {
		except, err := json.Marshal(append([]string{}, sc.Except...))
		if err != nil {
			return out, fmt.Errorf("encode tenants: %w", err)
		}
		where, args = "tenant NOT IN (SELECT value FROM json_each(?))", []any{string(except)}
	}
	err := db.write(ctx, func(tx dbtx) error {
		t0 := time.Now()
		defer func() { out.Took = time.Since(t0) }()
		out.Counts = map[string]retention.Counts{}
		rows, err := tx.QueryContext(ctx, `SELECT id, tenant FROM workflows w
			WHERE status NOT IN ('running', 'waiting') AND finished_at < ? AND `+where+`
				AND NOT EXISTS (SELECT 1 FROM workflows r WHERE r.replay_of <> '' AND r.replay_of = w.id
					AND r.status IN ('running', 'waiting'))
			ORDER BY finished_at LIMIT ?`, append(append([]any{sqlrow.FormatTime(sc.Before)}, args...), limit)...)
		if err != nil {
			return fmt.Errorf("find expired workflows: %w", err)
		}
		byTenant, err := collectByTenant(rows)
		if err != nil {
			return fmt.Errorf("find expired workflows: %w", err)
		}
		var recs []*audit.Record
		for _, tenant := range slices.Sorted(maps.Keys(byTenant)) {
			c, err := deleteWorkflows(ctx, tx, byTenant[tenant])
			if err != nil {
				return err
			}
			out.Counts[tenant] = c
			recs = append(recs, rec(tenant, c))
		}
		db.prepareAudit(recs...)
		return appendAudit(ctx, tx, recs...)
	})
	return out, err
}

// collectByTenant reads rows of (id, tenant) into ids by tenant.
func collectByTenant(rows *sql.Rows) (map[string][]string, error) {
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var id, tenant string
		if err := rows.Scan(&id, &tenant); err != nil {
			return nil, err
		}
		out[tenant] = append(out[tenant], id)
	}
	return out, rows.Err()
}

// TakeLease gives owner the named lease until until when it is free, lapsed
// at now or owner's already.
func (db *DB) TakeLease(ctx context.Context, name, owner string, now, until time.Time) (bool, error) {
	var held bool
	err := db.write(ctx, func(tx dbtx) error {
		var got string
		err := tx.QueryRowContext(ctx, `INSERT INTO service_leases (name, owner, until) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until
				WHERE service_leases.owner = excluded.owner OR service_leases.until < ?
			RETURNING owner`, name, owner, sqlrow.FormatTime(until), fmtTimeCeil(now)).Scan(&got)
		if err == sql.ErrNoRows {
			held = false
			return nil
		}
		if err != nil {
			return fmt.Errorf("take lease %q: %w", name, err)
		}
		held = got == owner
		return nil
	})
	return held, err
}

// AuditTenants lists the tenants with an audit chain.
func (db *DB) AuditTenants(ctx context.Context) ([]string, error) {
	var tenants []string
	err := db.read(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT tenant FROM audit_records
			UNION SELECT DISTINCT tenant FROM audit_tail ORDER BY 1`)
		if err != nil {
			return fmt.Errorf("list audit tenants: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				return fmt.Errorf("list audit tenants: %w", err)
			}
			tenants = append(tenants, t)
		}
		return rows.Err()
	})
	return tenants, err
}

// TrimAudit removes the oldest records of tenant's chain older than
// before, at most limit, behind a checkpoint; see retention.Store.
func (db *DB) TrimAudit(ctx context.Context, tenant string, before time.Time, limit int, cp retention.CheckpointRecord) (retention.Trimmed, error) {
	var out retention.Trimmed
	err := db.write(ctx, func(tx dbtx) error {
		t0 := time.Now()
		defer func() { out.Took = time.Since(t0) }()
		out.Removed = 0
		rows, err := tx.QueryContext(ctx, `SELECT seq, hash, time FROM (
			SELECT * FROM (SELECT seq, hash, time FROM audit_records WHERE tenant = ? ORDER BY seq LIMIT ?)
			UNION ALL SELECT * FROM (SELECT seq, hash, time FROM audit_tail WHERE tenant = ? ORDER BY seq LIMIT ?))
			ORDER BY seq LIMIT ?`, tenant, limit, tenant, limit, limit)
		if err != nil {
			return fmt.Errorf("read oldest audit records: %w", err)
		}
		through, hash, n, err := oldPrefix(rows, before)
		if err != nil || n == 0 {
			return err
		}
		// The checkpoint goes first: it becomes the chain's head, so the
		// chain never loses its head, whatever is removed.
		rec := cp(tenant, through, hash, n)
		db.prepareAudit(rec)
		if err := appendAudit(ctx, tx, rec); err != nil {
			return err
		}
		for _, table := range []string{"audit_records", "audit_tail"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE tenant = ? AND seq <= ?`, tenant, through); err != nil {
				return fmt.Errorf("remove audit records: %w", err)
			}
		}
		out.Removed = n
		return nil
	})
	return out, err
}

// oldPrefix reads (seq, hash, time) rows in seq order and returns the seq
// and hash of the last of the leading run older than before, and how many
// that run holds.
func oldPrefix(rows *sql.Rows, before time.Time) (int64, string, int64, error) {
	defer rows.Close()
	var (
		through, n int64
		hash       string
	)
	for rows.Next() {
		var (
			seq  int64
			h, t string
		)
		if err := rows.Scan(&seq, &h, &t); err != nil {
			return 0, "", 0, fmt.Errorf("read oldest audit records: %w", err)
		}
		at, err := parseTime(t)
		if err != nil {
			return 0, "", 0, err
		}
		if !at.Before(before) {
			break
		}
		through, hash, n = seq, h, n+1
	}
	return through, hash, n, rows.Err()
}
