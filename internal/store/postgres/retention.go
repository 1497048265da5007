package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/retention"
)

var _ retention.Beside = (*DB)(nil)

// retentionDeletes are retention.Deletes with the id set read from the
// text[] $1.
var retentionDeletes = func() []string {
	out := make([]string, len(retention.Deletes))
	for i, d := range retention.Deletes {
		out[i] = strings.ReplaceAll(d.SQL, retention.IDs, `SELECT unnest($1::text[])`)
	}
	return out
}()

var replaysOf = strings.ReplaceAll(retention.ReplaysOf, "{p}", "$1")

// deleteWorkflows removes the workflows ids and what refers to them (see
// retention.Deletes) in tx: every statement in one round trip.
func deleteWorkflows(_ context.Context, tx *wtx, ids []string) (retention.Counts, error) {
	var c retention.Counts
	for i, q := range retentionDeletes {
		field := retention.Deletes[i].Field
		n := c.Count(field)
		tx.queued = append(tx.queued, queuedStmt{sql: q, args: []any{ids}, read: func(br pgx.BatchResults) error {
			tag, err := br.Exec()
			if err != nil {
				return fmt.Errorf("delete workflows (%s): %w", field, err)
			}
			if n != nil {
				*n = tag.RowsAffected()
			}
			return nil
		}})
	}
	if err := tx.flush(); err != nil {
		return retention.Counts{}, err
	}
	return c, nil
}

// DeleteWorkflow deletes one finished workflow and the finished workflows
// replaying it; see retention.Store.
func (db *DB) DeleteWorkflow(ctx context.Context, tenant, id string, rec *audit.Record) (retention.Counts, error) {
	db.prepareAudit(rec)
	var c retention.Counts
	err := db.write(ctx, func(tx *wtx) error {
		c = retention.Counts{}
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM workflows WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return workflowNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("load workflow: %w", err)
		}
		if !retention.Finished(status) {
			return problem.New(problem.Conflict, "workflow %q is %s: only a finished workflow can be deleted", id, status)
		}
		rows, err := tx.Query(ctx, replaysOf, id)
		if err != nil {
			return fmt.Errorf("find replays: %w", err)
		}
		type replayRow struct{ ID, Status string }
		replays, err := pgx.CollectRows(rows, pgx.RowToStructByPos[replayRow])
		if err != nil {
			return fmt.Errorf("find replays: %w", err)
		}
		set := []string{id}
		for _, r := range replays {
			if !retention.Finished(r.Status) {
				return problem.New(problem.Conflict, "workflow %q has a replay still %s (%s): delete it once that ends", id, r.Status, r.ID)
			}
			set = append(set, r.ID)
		}
		if c, err = deleteWorkflows(ctx, tx, set); err != nil {
			return err
		}
		rec.Details = audit.Details(c)
		tx.Audit(rec)
		return nil
	})
	return c, err
}

// SweepWorkflows deletes up to limit finished workflows of sc, oldest first;
// see retention.Store. A workflow a replay of which is still running or
// waiting is left for a later sweep; one another transaction holds is
// skipped. The batch is a transaction of its own (writeAlone), not grouped
// with the requests' writes.
func (db *DB) SweepWorkflows(ctx context.Context, sc retention.Scope, limit int, rec retention.SweepRecord) (retention.Swept, error) {
	var out retention.Swept
	where, arg := "tenant = $2", any(sc.Tenant)
	if sc.Tenant == "" {
		where, arg = "tenant <> ALL($2::text[])", append([]string{}, sc.Except...)
	}
	err := db.writeAlone(ctx, func(tx *wtx) error {
		t0 := time.Now()
		defer func() { out.Took = time.Since(t0) }()
		out.Counts = map[string]retention.Counts{}
		rows, err := tx.Query(ctx, `SELECT id, tenant FROM workflows w
			WHERE status NOT IN ('running', 'waiting') AND finished_at < $1 AND `+where+`
				AND NOT EXISTS (SELECT 1 FROM workflows r WHERE r.replay_of <> '' AND r.replay_of = w.id
					AND r.status IN ('running', 'waiting'))
			ORDER BY finished_at LIMIT $3 FOR UPDATE OF w SKIP LOCKED`, sc.Before, arg, limit)
		if err != nil {
			return fmt.Errorf("find expired workflows: %w", err)
		}
		type idRow struct{ ID, Tenant string }
		found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[idRow])
		if err != nil {
			return fmt.Errorf("find expired workflows: %w", err)
		}
		byTenant := map[string][]string{}
		for _, r := range found {
			byTenant[r.Tenant] = append(byTenant[r.Tenant], r.ID)
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
		tx.Audit(recs...)
		return nil
	})
	return out, err
}

// TakeLease gives owner the named lease until until when it is free, lapsed
// at now or owner's already.
func (db *DB) TakeLease(ctx context.Context, name, owner string, now, until time.Time) (bool, error) {
	var held bool
	err := db.write(ctx, func(tx *wtx) error {
		var got string
		err := tx.QueryRow(ctx, `INSERT INTO service_leases (name, owner, until) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until
				WHERE service_leases.owner = excluded.owner OR service_leases.until < $4
			RETURNING owner`, name, owner, micro(until), now).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
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
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT tenant FROM audit_heads WHERE seq > 0 ORDER BY tenant`)
		if err != nil {
			return fmt.Errorf("list audit tenants: %w", err)
		}
		tenants, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("list audit tenants: %w", err)
		}
		return nil
	})
	return tenants, err
}

// TrimAudit removes the oldest records of tenant's chain older than
// before, at most limit, behind a checkpoint; see retention.Store. The
// checkpoint is sealed at commit on the chain's head, which audit_heads
// keeps whatever records are removed. Like a sweep batch, it is a
// transaction of its own (writeAlone).
func (db *DB) TrimAudit(ctx context.Context, tenant string, before time.Time, limit int, cp retention.CheckpointRecord) (retention.Trimmed, error) {
	var out retention.Trimmed
	err := db.writeAlone(ctx, func(tx *wtx) error {
		t0 := time.Now()
		defer func() { out.Took = time.Since(t0) }()
		out.Removed = 0
		rows, err := tx.Query(ctx, `SELECT seq, hash, time FROM audit_records WHERE tenant = $1
			ORDER BY seq LIMIT $2`, tenant, limit)
		if err != nil {
			return fmt.Errorf("read oldest audit records: %w", err)
		}
		type oldRow struct {
			Seq  int64
			Hash string
			Time time.Time
		}
		old, err := pgx.CollectRows(rows, pgx.RowToStructByPos[oldRow])
		if err != nil {
			return fmt.Errorf("read oldest audit records: %w", err)
		}
		var (
			n       int64
			through int64
			hash    string
		)
		for _, r := range old {
			if !r.Time.Before(before) {
				break
			}
			through, hash, n = r.Seq, r.Hash, n+1
		}
		if n == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM audit_records WHERE tenant = $1 AND seq <= $2`, tenant, through); err != nil {
			return fmt.Errorf("remove audit records: %w", err)
		}
		rec := cp(tenant, through, hash, n)
		db.prepareAudit(rec)
		tx.Audit(rec)
		out.Removed = n
		return nil
	})
	return out, err
}
