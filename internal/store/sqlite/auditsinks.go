package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/siem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var _ siem.Store = (*DB)(nil)

// AuditHeads returns every chain's last seq by tenant, from the indexed
// records and the tail. The tenants are walked along the (tenant, seq)
// index, one seek to the next tenant and one to its last seq each, so a
// pass reads a few pages per tenant rather than scanning the index.
func (db *DB) AuditHeads(ctx context.Context) (map[string]int64, error) {
	return db.seqsByTenant(ctx, "read audit heads", `WITH RECURSIVE tenants(tenant) AS (
			SELECT min(tenant) FROM audit_records
			UNION ALL
			SELECT (SELECT min(tenant) FROM audit_records WHERE tenant > tenants.tenant) FROM tenants
			WHERE tenants.tenant IS NOT NULL)
		SELECT tenant, max(seq) FROM (
			SELECT tenant, (SELECT max(seq) FROM audit_records r WHERE r.tenant = tenants.tenant) AS seq
			FROM tenants WHERE tenant IS NOT NULL
			UNION ALL SELECT tenant, max(seq) FROM audit_tail GROUP BY tenant) GROUP BY tenant`)
}

// SinkCursors returns a sink's cursor by tenant.
func (db *DB) SinkCursors(ctx context.Context, sink string) (map[string]int64, error) {
	return db.seqsByTenant(ctx, "read audit sink cursors", `SELECT tenant, seq FROM audit_sink_cursors WHERE sink = ?`, sink)
}

func (db *DB) seqsByTenant(ctx context.Context, what, query string, args ...any) (map[string]int64, error) {
	out := map[string]int64{}
	err := db.read(ctx, func(tx dbtx) error {
		clear(out)
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer rows.Close()
		for rows.Next() {
			var tenant string
			var seq int64
			if err := rows.Scan(&tenant, &seq); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			out[tenant] = seq
		}
		return rows.Err()
	})
	return out, err
}

// ClaimSink takes or renews owner's lease on a sink.
func (db *DB) ClaimSink(ctx context.Context, sink, owner string, now, until time.Time) (bool, error) {
	var held bool
	err := db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO audit_sinks (sink, owner, lease_until) VALUES (?, ?, ?)
			ON CONFLICT (sink) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
			WHERE audit_sinks.owner = excluded.owner OR audit_sinks.lease_until < ?`,
			sink, owner, sqlrow.FormatTime(until), fmtTimeCeil(now))
		if err != nil {
			return fmt.Errorf("claim audit sink: %w", err)
		}
		n, err := res.RowsAffected()
		held = n == 1
		return err
	})
	return held, err
}

// ReleaseSink gives up owner's lease on a sink.
func (db *DB) ReleaseSink(ctx context.Context, sink, owner string) error {
	return db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE audit_sinks SET owner = '', lease_until = ?
			WHERE sink = ? AND owner = ?`, noLease, sink, owner); err != nil {
			return fmt.Errorf("release audit sink: %w", err)
		}
		return nil
	})
}

// AdvanceSink moves a sink's cursor of one tenant up while owner holds
// the sink's lease.
func (db *DB) AdvanceSink(ctx context.Context, sink, owner, tenant string, seq int64, now time.Time) (bool, error) {
	var held bool
	err := db.write(ctx, func(tx dbtx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM audit_sinks WHERE sink = ? AND owner = ?`,
			sink, owner).Scan(&n); err != nil {
			return fmt.Errorf("check audit sink lease: %w", err)
		}
		if held = n == 1; !held {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_sink_cursors (sink, tenant, seq, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (sink, tenant) DO UPDATE SET seq = max(seq, excluded.seq), updated_at = excluded.updated_at`,
			sink, tenant, seq, sqlrow.FormatTime(now)); err != nil {
			return fmt.Errorf("advance audit sink cursor: %w", err)
		}
		return nil
	})
	return held, err
}
