package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
)

const auditColumns = `id, tenant, seq, time, actor_sub, actor_client_id, action, resource_type,
	resource_id, outcome, status, request_id, trace_id, workflow_id, details, prev_hash, hash`

// AppendAudit appends records to their tenants' chains in one transaction.
func (db *DB) AppendAudit(ctx context.Context, recs ...*audit.Record) error {
	db.prepareAudit(recs...)
	return db.write(ctx, func(tx *wtx) error {
		tx.Audit(recs...)
		return nil
	})
}

// prepareAudit fills what a record needs before its chain is touched (see
// audit.Prepare), with the store's clock.
func (db *DB) prepareAudit(recs ...*audit.Record) { audit.Prepare(db.now, recs...) }

// appendAudit queues the transaction's audit records for audit_append (see
// migration 0006), which seals and inserts them where the chain heads are:
// queued last, it runs in the round trip that commits, so every tenant's
// head is locked (all of them at once, in name order, so no two
// transactions wait on each other in a cycle) only from there to the
// commit, and each chain grows by whole transactions with no gap or fork
// whichever replica writes. Each record learns its seq, prev_hash and hash
// from the answer.
func (t *wtx) appendAudit() error {
	recs := slices.Clone(t.audit)
	slices.SortStableFunc(recs, func(a, b *audit.Record) int { return cmp.Compare(a.Tenant, b.Tenant) })
	n := len(recs)
	var (
		ids, tenant, actorSub, actorClient, action = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n)
		resType, resID, outcome, requestID, traceID = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n)
		workflowID, details             = make([]string, n), make([]string, n)
		beforePrev, beforeSeq, afterSeq = make([][]byte, n), make([][]byte, n), make([][]byte, n)
		status                          = make([]int32, n)
		times                           = make([]time.Time, n)
	)
	for i, r := range recs {
		p, err := r.CanonicalParts()
		if err != nil {
			return fmt.Errorf("seal audit record: %w", err)
		}
		beforePrev[i], beforeSeq[i], afterSeq[i] = p.BeforePrev, p.BeforeSeq, p.AfterSeq
		ids[i], tenant[i], times[i] = r.ID, r.Tenant, r.Time
		actorSub[i], actorClient[i], action[i] = r.Actor.Sub, r.Actor.ClientID, r.Action
		resType[i], resID[i], outcome[i], status[i] = r.Resource.Type, r.Resource.ID, r.Outcome, int32(r.Status)
		requestID[i], traceID[i], workflowID[i], details[i] = r.RequestID, r.TraceID, r.WorkflowID, string(r.Details)
	}
	next := 0
	t.queueRows(func(row pgx.CollectableRow) error {
		if next >= n {
			return fmt.Errorf("audit_append answered more than %d records", n)
		}
		r := recs[next]
		next++
		return row.Scan(&r.Seq, &r.PrevHash, &r.Hash)
	}, `SELECT r_seq, r_prev, r_hash FROM audit_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
		$14, $15, $16, $17)`,
		ids, tenant, times, actorSub, actorClient, action, resType, resID, outcome, status, requestID, traceID,
		workflowID, details, beforePrev, beforeSeq, afterSeq)
	return nil
}

// QueryAudit returns the tenant's records matching f, newest first.
func (db *DB) QueryAudit(ctx context.Context, tenant string, f audit.Filter) ([]audit.Record, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	limit = min(limit, audit.MaxLimit)

	args := []any{tenant}
	where := []string{"tenant = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
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
		add("time >= ?", ceilMicro(f.Since))
	}
	if !f.Until.IsZero() {
		add("time <= ?", f.Until)
	}
	if f.BeforeSeq > 0 {
		add("seq < ?", f.BeforeSeq)
	}
	cond := strings.Join(where, " AND ")
	args = append(args, limit)
	lim := "$" + strconv.Itoa(len(args))

	query := `SELECT ` + auditColumns + ` FROM audit_records WHERE ` + cond + ` ORDER BY seq DESC LIMIT ` + lim
	if f.Actor != "" {
		// The actor is the subject or the client: each side walks its own
		// index in seq order, so neither has to sort a large match.
		args = append(args, f.Actor)
		actor := "$" + strconv.Itoa(len(args))
		query = `(SELECT ` + auditColumns + ` FROM audit_records WHERE ` + cond + ` AND actor_sub = ` + actor + ` ORDER BY seq DESC LIMIT ` + lim + `)
			UNION
			(SELECT ` + auditColumns + ` FROM audit_records WHERE ` + cond + ` AND actor_client_id = ` + actor + ` ORDER BY seq DESC LIMIT ` + lim + `)
			ORDER BY seq DESC LIMIT ` + lim
	}

	var recs []audit.Record
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("query audit: %w", err)
		}
		recs, err = pgx.CollectRows(rows, scanAudit)
		if err != nil {
			return fmt.Errorf("query audit: %w", err)
		}
		return nil
	})
	return recs, err
}

// ScanAudit calls fn on the tenant's records after afterSeq, in seq order.
func (db *DB) ScanAudit(ctx context.Context, tenant string, afterSeq int64, limit int, fn func(audit.Record) error) (int, error) {
	n := 0
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT `+auditColumns+` FROM audit_records
			WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3`, tenant, afterSeq, limit)
		if err != nil {
			return fmt.Errorf("scan audit: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanAudit(rows)
			if err != nil {
				return fmt.Errorf("scan audit: %w", err)
			}
			n++
			if err := fn(r); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return n, err
}

// ceilMicro rounds t up to the microsecond, the precision of timestamptz,
// so a lower bound never admits an earlier record.
func ceilMicro(t time.Time) time.Time {
	if u := t.Truncate(time.Microsecond); u.Before(t) {
		return u.Add(time.Microsecond)
	}
	return t
}

func scanAudit(row pgx.CollectableRow) (audit.Record, error) {
	var (
		r       audit.Record
		details string
	)
	if err := row.Scan(&r.ID, &r.Tenant, &r.Seq, &r.Time, &r.Actor.Sub, &r.Actor.ClientID, &r.Action,
		&r.Resource.Type, &r.Resource.ID, &r.Outcome, &r.Status, &r.RequestID, &r.TraceID,
		&r.WorkflowID, &details, &r.PrevHash, &r.Hash); err != nil {
		return audit.Record{}, err
	}
	r.Time = r.Time.UTC()
	r.Details = []byte(details)
	return r, nil
}
