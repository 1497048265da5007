package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// AppendAudit appends records to their tenants' chains in one transaction.
func (db *DB) AppendAudit(ctx context.Context, recs ...*audit.Record) error {
	db.prepareAudit(recs...)
	return db.write(ctx, func(tx dbtx) error {
		return appendAudit(ctx, tx, recs...)
	})
}

// AppendAuditLater appends records as AppendAudit does, but with the next
// write committed, within groupcommit.DefaultLinger, and returns at once;
// done gets the outcome. Reads of the audit log on this replica
// (QueryAudit, ScanAudit) wait for them first.
func (db *DB) AppendAuditLater(done func(error), recs ...*audit.Record) {
	db.prepareAudit(recs...)
	db.queue.Later(func(tx dbtx) error {
		return appendAudit(context.Background(), tx, recs...)
	}, done)
}

// flushAudit waits for the records queued by AppendAuditLater so far.
func (db *DB) flushAudit(ctx context.Context) error {
	if err := db.queue.Flush(ctx); err != nil {
		return fmt.Errorf("wait for queued audit records: %w", err)
	}
	return nil
}

// prepareAudit fills what a record needs before its chain is touched (see
// audit.Prepare), with the store's clock.
func (db *DB) prepareAudit(recs ...*audit.Record) { audit.Prepare(db.now, recs...) }

// appendAudit seals and inserts records as the last statements of tx. The
// writer is serial and holds the write lock, so the head it knows (see
// headCache) is the chain's head. Records go to audit_tail, which has no
// secondary indexes; the writer moves them to audit_records in bulk (see
// moveAudit), and every read looks at both.
func appendAudit(ctx context.Context, tx dbtx, recs ...*audit.Record) error {
	recs = slices.DeleteFunc(slices.Clone(recs), func(r *audit.Record) bool { return r == nil })
	slices.SortStableFunc(recs, func(a, b *audit.Record) int { return cmp.Compare(a.Tenant, b.Tenant) })
	for _, r := range recs {
		head, err := tx.heads.head(ctx, tx, r.Tenant)
		if err != nil {
			return err
		}
		if err := r.Seal(head.seq+1, head.hash); err != nil {
			return fmt.Errorf("seal audit record: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_tail (`+sqlrow.AuditColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Tenant, r.Seq, sqlrow.FormatTime(r.Time), r.Actor.Sub, r.Actor.ClientID, r.Action,
			r.Resource.Type, r.Resource.ID, r.Outcome, r.Status, r.RequestID, r.TraceID,
			r.WorkflowID, string(r.Details), r.PrevHash, r.Hash); err != nil {
			return fmt.Errorf("insert audit record: %w", err)
		}
		tx.heads.set(r.Tenant, chainHead{seq: r.Seq, hash: r.Hash})
		tx.heads.tail++
	}
	return nil
}

// moveAudit moves the tail's records into audit_records, in chain order, so
// their index entries are written together: most land on the same few
// pages of each index, where one record at a time rewrote those pages in
// every commit.
func moveAudit(ctx context.Context, tx dbtx) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_records (`+sqlrow.AuditColumns+`)
		SELECT `+sqlrow.AuditColumns+` FROM audit_tail ORDER BY tenant, seq`); err != nil {
		return fmt.Errorf("move audit records: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM audit_tail`); err != nil {
		return fmt.Errorf("clear audit tail: %w", err)
	}
	return nil
}

// QueryAudit returns the tenant's records matching f, newest first.
func (db *DB) QueryAudit(ctx context.Context, tenant string, f audit.Filter) ([]audit.Record, error) {
	if err := db.flushAudit(ctx); err != nil {
		return nil, err
	}
	var recs []audit.Record
	err := db.read(ctx, func(tx dbtx) error {
		timeIndex := false
		if !f.Since.IsZero() || !f.Until.IsZero() {
			var err error
			if timeIndex, err = preferTimeIndex(ctx, tx, tenant, f); err != nil {
				return err
			}
		}
		q := auditQuery(tenant, f, timeIndex)
		indexed, err := queryRecords(ctx, tx, q.indexed, q.indexedArgs...)
		if err != nil {
			return err
		}
		tail, err := queryRecords(ctx, tx, q.tail, q.tailArgs...)
		if err != nil {
			return err
		}
		recs = mergeRecords(indexed, tail, q.limit, func(a, b int64) bool { return a > b })
		return nil
	})
	return recs, err
}

func queryRecords(ctx context.Context, tx dbtx, query string, args ...any) ([]audit.Record, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query audit: %w", err)
	}
	defer rows.Close()
	var recs []audit.Record
	for rows.Next() {
		r, err := sqlrow.ScanAudit(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// mergeRecords merges two lists ordered by seq (before(a, b) when a comes
// first) into one of at most limit records.
func mergeRecords(a, b []audit.Record, limit int, before func(a, b int64) bool) []audit.Record {
	out := make([]audit.Record, 0, min(limit, len(a)+len(b)))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && before(a[0].Seq, b[0].Seq)) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// auditQueries are the two queries of a filter: over the indexed records
// (see indexedQuery) and over the tail (scanned: it holds at most a few
// hundred), each newest first and limited; their results are merged.
type auditQueries struct {
	indexed, tail         string
	indexedArgs, tailArgs []any
	limit                 int
}

func auditQuery(tenant string, f audit.Filter, timeIndex bool) auditQueries {
	limit := f.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	limit = min(limit, audit.MaxLimit)
	indexed, args := indexedQuery(tenant, f, timeIndex, limit)
	where, targs := filterConds(tenant, f, "time")
	if f.Actor != "" {
		where = append(where, "(actor_sub = ? OR actor_client_id = ?)")
		targs = append(targs, f.Actor, f.Actor)
	}
	tail := `SELECT ` + sqlrow.AuditColumns + ` FROM audit_tail WHERE ` + strings.Join(where, " AND ") + ` ORDER BY seq DESC LIMIT ?`
	return auditQueries{indexed: indexed, indexedArgs: args, tail: tail, tailArgs: append(targs, limit), limit: limit}
}

// filterConds are f's conditions but the actor's, with timeCol for time.
func filterConds(tenant string, f audit.Filter, timeCol string) ([]string, []any) {
	where := []string{"tenant = ?"}
	args := []any{tenant}
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if f.ResourceType != "" {
		add("resource_type = ?", f.ResourceType)
	}
	if f.ResourceID != "" {
		add("resource_id = ?", f.ResourceID)
	}
	if f.WorkflowID != "" {
		add("workflow_id = ?", f.WorkflowID)
	}
	if f.Outcome != "" {
		add("outcome = ?", f.Outcome)
	}
	if f.TraceID != "" {
		add("trace_id = ?", f.TraceID)
	}
	if !f.Since.IsZero() {
		add(timeCol+" >= ?", fmtTimeCeil(f.Since))
	}
	if !f.Until.IsZero() {
		add(timeCol+" <= ?", sqlrow.FormatTime(f.Until))
	}
	if f.BeforeSeq > 0 {
		add("seq < ?", f.BeforeSeq)
	}
	return where, args
}

// indexedQuery builds the query of f over audit_records. Records are read
// newest first along an index ending in seq (so a page needs no sort),
// unless timeIndex says a time range is better found through the time
// index and sorted.
func indexedQuery(tenant string, f audit.Filter, timeIndex bool, limit int) (string, []any) {
	// A unary + keeps the planner off the time index.
	timeCol, from := "+time", "audit_records"
	if timeIndex {
		timeCol, from = "time", "audit_records INDEXED BY audit_records_time"
	}
	where, args := filterConds(tenant, f, timeCol)
	if timeIndex {
		// Pick the page's seqs from the time index (covering for a time
		// range alone), sort only those, then read the records.
		if f.Actor != "" {
			where = append(where, "(actor_sub = ? OR actor_client_id = ?)")
			args = append(args, f.Actor, f.Actor)
		}
		return `SELECT ` + sqlrow.AuditColumns + ` FROM audit_records WHERE tenant = ? AND seq IN (
			SELECT seq FROM ` + from + ` WHERE ` + strings.Join(where, " AND ") + ` ORDER BY seq DESC LIMIT ?)
			ORDER BY seq DESC`, append(append([]any{tenant}, args...), limit)
	}
	cond := strings.Join(where, " AND ")
	if f.Actor == "" {
		return `SELECT ` + sqlrow.AuditColumns + ` FROM ` + from + ` WHERE ` + cond + ` ORDER BY seq DESC LIMIT ?`,
			append(args, limit)
	}
	// The actor is the subject or the client: each side walks its own
	// index in seq order, so neither has to sort a large match.
	query := `SELECT ` + sqlrow.AuditColumns + ` FROM (
		SELECT * FROM (SELECT ` + sqlrow.AuditColumns + ` FROM ` + from + ` WHERE ` + cond + ` AND actor_sub = ? ORDER BY seq DESC LIMIT ?)
		UNION
		SELECT * FROM (SELECT ` + sqlrow.AuditColumns + ` FROM ` + from + ` WHERE ` + cond + ` AND actor_client_id = ? ORDER BY seq DESC LIMIT ?)
	) ORDER BY seq DESC LIMIT ?`
	both := append(append(slices.Clone(args), f.Actor, limit), args...)
	return query, append(both, f.Actor, limit, limit)
}

// preferTimeIndex reports whether f's time range is better read through the
// time index, and sorted, than by walking the chain down from its newest
// record. Seqs and times rise together (nearly: a record's time is taken
// before it is sealed), so two index seeks estimate both costs: the records
// in the range, and the newer records a walk from the top would skip. Either
// plan returns the same records; this only picks the faster.
func preferTimeIndex(ctx context.Context, tx dbtx, tenant string, f audit.Filter) (bool, error) {
	var head int64
	var top sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT max(seq) FROM (SELECT max(seq) AS seq FROM audit_records WHERE tenant = ?
		UNION ALL SELECT max(seq) FROM audit_tail WHERE tenant = ?)`, tenant, tenant).Scan(&top)
	if err == nil && !top.Valid {
		return false, nil
	}
	head = top.Int64
	if err != nil {
		return false, fmt.Errorf("read audit head: %w", err)
	}
	lo, hi := int64(0), head
	if !f.Since.IsZero() {
		err := tx.QueryRowContext(ctx, `SELECT seq FROM audit_records WHERE tenant = ? AND time >= ?
			ORDER BY time, seq LIMIT 1`, tenant, fmtTimeCeil(f.Since)).Scan(&lo)
		if sqlrow.IsNoRows(err) {
			return true, nil // nothing that recent: the time index finds no rows at once
		}
		if err != nil {
			return false, fmt.Errorf("estimate audit range: %w", err)
		}
	}
	if !f.Until.IsZero() {
		var after int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM audit_records WHERE tenant = ? AND time > ?
			ORDER BY time, seq LIMIT 1`, tenant, sqlrow.FormatTime(f.Until)).Scan(&after)
		if err != nil && !sqlrow.IsNoRows(err) {
			return false, fmt.Errorf("estimate audit range: %w", err)
		}
		if err == nil {
			hi = after - 1
		}
	}
	if f.BeforeSeq > 0 {
		hi = min(hi, f.BeforeSeq-1)
	}
	skipped, inRange := head-hi, hi-lo
	return inRange < skipped, nil
}

// ScanAudit calls fn on the tenant's records after afterSeq, in seq order.
func (db *DB) ScanAudit(ctx context.Context, tenant string, afterSeq int64, limit int, fn func(audit.Record) error) (int, error) {
	if err := db.flushAudit(ctx); err != nil {
		return 0, err
	}
	var recs []audit.Record
	err := db.read(ctx, func(tx dbtx) error {
		indexed, err := queryRecords(ctx, tx, `SELECT `+sqlrow.AuditColumns+` FROM audit_records
			WHERE tenant = ? AND seq > ? ORDER BY seq LIMIT ?`, tenant, afterSeq, limit)
		if err != nil {
			return err
		}
		tail, err := queryRecords(ctx, tx, `SELECT `+sqlrow.AuditColumns+` FROM audit_tail
			WHERE tenant = ? AND seq > ? ORDER BY seq LIMIT ?`, tenant, afterSeq, limit)
		if err != nil {
			return err
		}
		recs = mergeRecords(indexed, tail, limit, func(a, b int64) bool { return a < b })
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i, r := range recs {
		if err := fn(r); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}
