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
	return db.write(ctx, func(tx pgx.Tx) error {
		return appendAudit(ctx, tx, recs...)
	})
}

// prepareAudit fills what a record needs before its chain is touched (see
// audit.Prepare), with the store's clock.
func (db *DB) prepareAudit(recs ...*audit.Record) { audit.Prepare(db.now, recs...) }

type head struct {
	seq  int64
	hash string
}

// appendAudit seals and inserts records as the last statements of tx. Each
// tenant's head row is locked (SELECT … FOR UPDATE) right before that
// tenant's inserts, sent in one batch with the head's update, and held to
// commit. Tenants are taken in name order within one call. A group-commit
// batch calls it once per write, so two replicas' batches can take two
// tenants' heads in opposite orders; PostgreSQL then aborts one of them
// (after deadlock_timeout, 1 s by default), and that batch's writes run
// again one by one (see commit).
func appendAudit(ctx context.Context, tx pgx.Tx, recs ...*audit.Record) error {
	recs = slices.DeleteFunc(slices.Clone(recs), func(r *audit.Record) bool { return r == nil })
	slices.SortStableFunc(recs, func(a, b *audit.Record) int { return cmp.Compare(a.Tenant, b.Tenant) })
	for len(recs) > 0 {
		n := 1
		for n < len(recs) && recs[n].Tenant == recs[0].Tenant {
			n++
		}
		if err := appendTenant(ctx, tx, recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// appendTenant appends records of one tenant.
func appendTenant(ctx context.Context, tx pgx.Tx, recs []*audit.Record) error {
	tenant := recs[0].Tenant
	h, err := lockHead(ctx, tx, tenant)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, r := range recs {
		if err := r.Seal(h.seq+1, h.hash); err != nil {
			return fmt.Errorf("seal audit record: %w", err)
		}
		h = head{r.Seq, r.Hash}
		b.Queue(`INSERT INTO audit_records (`+auditColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
			r.ID, r.Tenant, r.Seq, r.Time, r.Actor.Sub, r.Actor.ClientID, r.Action,
			r.Resource.Type, r.Resource.ID, r.Outcome, r.Status, r.RequestID, r.TraceID,
			r.WorkflowID, string(r.Details), r.PrevHash, r.Hash)
	}
	b.Queue(`UPDATE audit_heads SET seq = $2, hash = $3 WHERE tenant = $1`, tenant, h.seq, h.hash)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert audit records: %w", err)
	}
	return nil
}

// lockHead creates the tenant's genesis head if there is none and locks it.
func lockHead(ctx context.Context, tx pgx.Tx, tenant string) (head, error) {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO audit_heads (tenant, seq, hash) VALUES ($1, 0, $2) ON CONFLICT (tenant) DO NOTHING`,
		tenant, audit.Genesis)
	var h head
	b.Queue(`SELECT seq, hash FROM audit_heads WHERE tenant = $1 FOR UPDATE`, tenant).
		QueryRow(func(row pgx.Row) error { return row.Scan(&h.seq, &h.hash) })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return head{}, fmt.Errorf("lock audit head: %w", err)
	}
	return h, nil
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
