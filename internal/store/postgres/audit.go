package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// AppendAudit appends records to their tenants' chains in one transaction.
func (db *DB) AppendAudit(ctx context.Context, recs ...*audit.Record) error {
	db.prepareAudit(recs...)
	return db.write(ctx, func(tx *wtx) error {
		tx.Audit(recs...)
		return nil
	})
}

// AppendAuditLater appends records as AppendAudit does, but with the next
// write committed, within groupcommit.DefaultLinger, and returns at once;
// done gets the outcome. Reads of the audit log on this replica
// (QueryAudit, ScanAudit) wait for them first.
func (db *DB) AppendAuditLater(done func(error), recs ...*audit.Record) {
	db.prepareAudit(recs...)
	db.queue.Later(func(tx *wtx) error {
		tx.Audit(recs...)
		return nil
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

// appendAudit seals and inserts the transaction's audit records as its last
// statements. Each tenant's chain grows by whole transactions with no gap or
// fork, whichever replica writes: a transaction holds its tenants' heads,
// locked in name order, to its commit, and moves them only from the head it
// sealed its records on.
//
// When this replica knows every tenant's head (it wrote the last records of
// each, see knownHeads), the records are sealed on those heads and
// everything is sent with the COMMIT: one round trip, whose first statement
// locks the heads and fails the transaction (isHeadsMoved) unless they are
// still the ones known; runTx then runs the transaction again the other way.
// Otherwise it takes two: the first, with the batch's queued statements,
// locks and reads every tenant's head (creating a genesis head for a tenant
// never seen); the second inserts the records and moves the heads.
func (t *wtx) appendAudit() error {
	recs := slices.Clone(t.audit)
	slices.SortStableFunc(recs, func(a, b *audit.Record) int { return cmp.Compare(a.Tenant, b.Tenant) })
	var tenants []string
	for _, r := range recs {
		if len(tenants) == 0 || tenants[len(tenants)-1] != r.Tenant {
			tenants = append(tenants, r.Tenant)
		}
	}
	heads, err := t.heads.speculate(tenants, func(start map[string]head) error {
		seqs, hashes := make([]int64, len(tenants)), make([]string, len(tenants))
		for i, tn := range tenants {
			seqs[i], hashes[i] = start[tn].seq, start[tn].hash
		}
		t.Queue(nil, `SELECT require_rows((count(*) = $4)::int, '`+headsMoved+`') FROM (
			SELECT 1 FROM audit_heads AS h JOIN unnest($1::text[], $2::bigint[], $3::text[]) AS v(tenant, seq, hash)
				ON h.tenant = v.tenant
			WHERE h.seq = v.seq AND h.hash = v.hash ORDER BY h.tenant FOR UPDATE OF h) AS locked`,
			tenants, seqs, hashes, len(tenants))
		return sealAll(recs, start)
	})
	if err != nil {
		return err
	}
	if heads != nil {
		t.speculated = tenants
	} else {
		if fresh := t.heads.unknown(tenants); len(fresh) > 0 {
			t.Queue(nil, `INSERT INTO audit_heads (tenant, seq, hash)
				SELECT tenant, 0, $2 FROM unnest($1::text[]) AS tenant ORDER BY tenant
				ON CONFLICT (tenant) DO NOTHING`, fresh, audit.Genesis)
		}
		heads = make(map[string]head, len(tenants))
		t.queueRows(func(row pgx.CollectableRow) error {
			var (
				tenant string
				h      head
			)
			if err := row.Scan(&tenant, &h.seq, &h.hash); err != nil {
				return err
			}
			heads[tenant] = h
			return nil
		}, `SELECT tenant, seq, hash FROM audit_heads WHERE tenant = ANY($1) ORDER BY tenant FOR UPDATE`, tenants)
		if err := t.flush(); err != nil {
			return fmt.Errorf("lock audit heads: %w", err)
		}
		for _, tn := range tenants {
			if _, ok := heads[tn]; !ok {
				return fmt.Errorf("lock audit heads: tenant %q has no head", tn)
			}
		}
		if err := sealAll(recs, heads); err != nil {
			return err
		}
		t.sealed = heads
	}

	n := len(recs)
	var (
		ids, tenant, actorSub, actorClient, action, resType, resID = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		outcome, requestID, traceID, workflowID, details, prevHash, hash = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		seq    = make([]int64, n)
		status = make([]int32, n)
		times  = make([]time.Time, n)
	)
	for i, r := range recs {
		ids[i], tenant[i], seq[i], times[i] = r.ID, r.Tenant, r.Seq, r.Time
		actorSub[i], actorClient[i], action[i] = r.Actor.Sub, r.Actor.ClientID, r.Action
		resType[i], resID[i], outcome[i], status[i] = r.Resource.Type, r.Resource.ID, r.Outcome, int32(r.Status)
		requestID[i], traceID[i], workflowID[i] = r.RequestID, r.TraceID, r.WorkflowID
		details[i], prevHash[i], hash[i] = string(r.Details), r.PrevHash, r.Hash
	}
	t.Queue(nil, `INSERT INTO audit_records (`+sqlrow.AuditColumns+`)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
			$7::text[], $8::text[], $9::text[], $10::text[], $11::integer[], $12::text[], $13::text[], $14::text[],
			$15::text[], $16::text[], $17::text[])`,
		ids, tenant, seq, times, actorSub, actorClient, action, resType, resID, outcome, status, requestID,
		traceID, workflowID, details, prevHash, hash)
	headTenants, headSeqs, headHashes := make([]string, 0, len(heads)), make([]int64, 0, len(heads)), make([]string, 0, len(heads))
	for _, tn := range tenants {
		h := heads[tn]
		headTenants, headSeqs, headHashes = append(headTenants, tn), append(headSeqs, h.seq), append(headHashes, h.hash)
	}
	t.Queue(nil, `UPDATE audit_heads AS h SET seq = v.seq, hash = v.hash
		FROM unnest($1::text[], $2::bigint[], $3::text[]) AS v(tenant, seq, hash) WHERE h.tenant = v.tenant`,
		headTenants, headSeqs, headHashes)
	return nil
}

// sealAll seals records, sorted by tenant, on the heads given, and moves
// each head to its tenant's last record.
func sealAll(recs []*audit.Record, heads map[string]head) error {
	for _, r := range recs {
		h, ok := heads[r.Tenant]
		if !ok {
			return fmt.Errorf("seal audit record: tenant %q has no head", r.Tenant)
		}
		if err := r.Seal(h.seq+1, h.hash); err != nil {
			return fmt.Errorf("seal audit record: %w", err)
		}
		heads[r.Tenant] = head{r.Seq, r.Hash}
	}
	return nil
}

// headsMoved is the message of the error that refuses records sealed on
// heads another transaction has moved since.
const headsMoved = "audit heads moved"

// isHeadsMoved reports whether err is the refusal of appendAudit's one
// round trip.
func isHeadsMoved(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "AP001" && pe.Message == headsMoved
}

type head struct {
	seq  int64
	hash string
}

// knownHeads remembers the tenants whose chain head exists, so appends to
// them skip creating it, and the head this replica last moved each to, so
// that its next append to them can be sealed without reading them first.
// A head it holds may be one a transaction in flight is moving it to: a
// transaction that chains onto it waits for that one, and fails if it did.
type knownHeads struct {
	mu      sync.Mutex
	tenants map[string]struct{}
	latest  map[string]head
	// contended holds, for a while, the tenants whose head another replica
	// moved under a sealed transaction: their appends read the head first.
	contended map[string]time.Time
	now       func() time.Time
}

func newKnownHeads() *knownHeads {
	return &knownHeads{tenants: map[string]struct{}{}, latest: map[string]head{},
		contended: map[string]time.Time{}, now: time.Now}
}

// maxKnownHeads bounds the memory spent on remembering heads; past it the
// set starts over (an unknown tenant costs one conflicting insert, or one
// read of its head).
const maxKnownHeads = 100_000

// contendedFor is how long appends to a tenant whose known head proved
// stale read the head before sealing.
const contendedFor = 10 * time.Second

// unknown returns the tenants not known to have a head.
func (k *knownHeads) unknown(tenants []string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, t := range tenants {
		if _, ok := k.tenants[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

// speculate calls seal with a copy of the heads of tenants and returns the
// heads seal moved them to, which become the known ones, when every
// tenant's head is known and none is contended; otherwise it returns nil
// and does not call seal. seal runs under the lock, so transactions of
// this replica chain onto each other in the order they speculate.
func (k *knownHeads) speculate(tenants []string, seal func(start map[string]head) error) (map[string]head, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	heads := make(map[string]head, len(tenants))
	for _, t := range tenants {
		if until, ok := k.contended[t]; ok {
			if now.Before(until) {
				return nil, nil
			}
			delete(k.contended, t)
		}
		h, ok := k.latest[t]
		if !ok {
			return nil, nil
		}
		heads[t] = h
	}
	if err := seal(heads); err != nil {
		return nil, err
	}
	for t, h := range heads {
		k.latest[t] = h
	}
	return heads, nil
}

// settle records the heads a committed transaction moved its tenants to.
func (k *knownHeads) settle(heads map[string]head) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.tenants) > maxKnownHeads {
		clear(k.tenants)
		clear(k.latest)
	}
	for t, h := range heads {
		k.tenants[t] = struct{}{}
		k.latest[t] = h
	}
}

// forget drops the known heads of tenants, after a transaction that moved
// them speculatively failed; moved says another replica had moved one, so
// they are contended for a while.
func (k *knownHeads) forget(tenants []string, moved bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range tenants {
		delete(k.latest, t)
		if moved {
			k.contended[t] = k.now().Add(contendedFor)
		}
	}
	if len(k.contended) > maxKnownHeads {
		clear(k.contended)
	}
}

// QueryAudit returns the tenant's records matching f, newest first.
func (db *DB) QueryAudit(ctx context.Context, tenant string, f audit.Filter) ([]audit.Record, error) {
	if err := db.flushAudit(ctx); err != nil {
		return nil, err
	}
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

	query := `SELECT ` + sqlrow.AuditColumns + ` FROM audit_records WHERE ` + cond + ` ORDER BY seq DESC LIMIT ` + lim
	if f.Actor != "" {
		// The actor is the subject or the client: each side walks its own
		// index in seq order, so neither has to sort a large match.
		args = append(args, f.Actor)
		actor := "$" + strconv.Itoa(len(args))
		query = `(SELECT ` + sqlrow.AuditColumns + ` FROM audit_records WHERE ` + cond + ` AND actor_sub = ` + actor + ` ORDER BY seq DESC LIMIT ` + lim + `)
			UNION
			(SELECT ` + sqlrow.AuditColumns + ` FROM audit_records WHERE ` + cond + ` AND actor_client_id = ` + actor + ` ORDER BY seq DESC LIMIT ` + lim + `)
			ORDER BY seq DESC LIMIT ` + lim
	}

	var recs []audit.Record
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("query audit: %w", err)
		}
		recs, err = collect(rows, sqlrow.ScanAudit)
		if err != nil {
			return fmt.Errorf("query audit: %w", err)
		}
		return nil
	})
	return recs, err
}

// ScanAudit calls fn on the tenant's records after afterSeq, in seq order.
func (db *DB) ScanAudit(ctx context.Context, tenant string, afterSeq int64, limit int, fn func(audit.Record) error) (int, error) {
	if err := db.flushAudit(ctx); err != nil {
		return 0, err
	}
	n := 0
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT `+sqlrow.AuditColumns+` FROM audit_records
			WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3`, tenant, afterSeq, limit)
		if err != nil {
			return fmt.Errorf("scan audit: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			r, err := sqlrow.ScanAudit(rows)
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
