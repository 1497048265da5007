package siem

import (
	"context"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
)

// Store keeps each sink's lease and cursors, and reads the chains.
type Store interface {
	// ScanAudit reads a tenant's records in seq order after a seq. Records
	// removed below a cursor (audit retention) are simply not read.
	ScanAudit(ctx context.Context, tenant string, afterSeq int64, limit int, fn func(audit.Record) error) (int, error)
	// AuditHeads returns every chain's last seq by tenant.
	AuditHeads(ctx context.Context) (map[string]int64, error)
	// ClaimSink gives owner the sink's lease until until when nobody holds
	// it, its lease lapsed by now, or owner holds it already; false when
	// another owner holds it.
	ClaimSink(ctx context.Context, sink, owner string, now, until time.Time) (bool, error)
	// ReleaseSink gives up owner's lease on the sink.
	ReleaseSink(ctx context.Context, sink, owner string) error
	// SinkCursors returns the sink's cursor, the last seq it took, by tenant.
	SinkCursors(ctx context.Context, sink string) (map[string]int64, error)
	// AdvanceSink moves the sink's cursor of tenant up to seq (never down)
	// while owner holds the sink's lease; false when it no longer does.
	AdvanceSink(ctx context.Context, sink, owner, tenant string, seq int64, now time.Time) (bool, error)
}
