package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/siem"
)

var _ siem.Store = (*DB)(nil)

// AuditHeads returns every chain's last seq by tenant: the heads' rows.
func (db *DB) AuditHeads(ctx context.Context) (map[string]int64, error) {
	return db.seqsByTenant(ctx, "read audit heads", `SELECT tenant, seq FROM audit_heads`)
}

// SinkCursors returns a sink's cursor by tenant.
func (db *DB) SinkCursors(ctx context.Context, sink string) (map[string]int64, error) {
	return db.seqsByTenant(ctx, "read audit sink cursors", `SELECT tenant, seq FROM audit_sink_cursors WHERE sink = $1`, sink)
}

func (db *DB) seqsByTenant(ctx context.Context, what, query string, args ...any) (map[string]int64, error) {
	out := map[string]int64{}
	err := db.read(ctx, func(q querier) error {
		clear(out)
		rows, err := q.Query(ctx, query, args...)
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
	err := db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO audit_sinks (sink, owner, lease_until) VALUES ($1, $2, $3)
			ON CONFLICT (sink) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
			WHERE audit_sinks.owner = excluded.owner OR audit_sinks.lease_until < $4`,
			sink, owner, micro(until), ceilMicro(now))
		if err != nil {
			return fmt.Errorf("claim audit sink: %w", err)
		}
		held = tag.RowsAffected() == 1
		return nil
	})
	return held, err
}

// ReleaseSink gives up owner's lease on a sink.
func (db *DB) ReleaseSink(ctx context.Context, sink, owner string) error {
	return db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `UPDATE audit_sinks SET owner = '', lease_until = $3
			WHERE sink = $1 AND owner = $2`, sink, owner, time.Time{}); err != nil {
			return fmt.Errorf("release audit sink: %w", err)
		}
		return nil
	})
}

// AdvanceSink moves a sink's cursor of one tenant up while owner holds
// the sink's lease (its row locked, so a claim cannot slip in between).
func (db *DB) AdvanceSink(ctx context.Context, sink, owner, tenant string, seq int64, now time.Time) (bool, error) {
	var held bool
	err := db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `SELECT 1 FROM audit_sinks WHERE sink = $1 AND owner = $2 FOR UPDATE`, sink, owner)
		if err != nil {
			return fmt.Errorf("check audit sink lease: %w", err)
		}
		if held = tag.RowsAffected() == 1; !held {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO audit_sink_cursors (sink, tenant, seq, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (sink, tenant) DO UPDATE SET seq = greatest(audit_sink_cursors.seq, excluded.seq),
				updated_at = excluded.updated_at`, sink, tenant, seq, micro(now)); err != nil {
			return fmt.Errorf("advance audit sink cursor: %w", err)
		}
		return nil
	})
	return held, err
}
