// Package audit defines the tamper-evident audit log: records chained per
// tenant by SHA-256 over their RFC 8785 canonical JSON, the query filter, and
// the Store that appends and reads them. It is a leaf package: it knows
// nothing of HTTP or of the other domains.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/ids"
)

// SystemTenant holds the chain of requests that carry no valid tenant.
const SystemTenant = "_system"

// Genesis is the prev_hash of the first record of every chain.
var Genesis = strings.Repeat("0", 64)

// Outcomes of a record.
const (
	Success = "success"
	Denied  = "denied"
	Error   = "error"
)

// TimeFormat is how a record's time is written, hashed and stored: UTC with
// microseconds, which every store keeps exactly.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Actor is who acted.
type Actor struct {
	Sub      string `json:"sub"`
	ClientID string `json:"client_id"`
}

// Resource is what was acted on.
type Resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Record is one entry of a tenant's chain.
type Record struct {
	ID         string          `json:"id"`
	Seq        int64           `json:"seq"`
	Time       time.Time       `json:"-"`
	Tenant     string          `json:"tenant"`
	Actor      Actor           `json:"actor"`
	Action     string          `json:"action"`
	Resource   Resource        `json:"resource"`
	Outcome    string          `json:"outcome"`
	Status     int             `json:"status"`
	RequestID  string          `json:"request_id"`
	TraceID    string          `json:"trace_id"`
	WorkflowID string          `json:"workflow_id,omitempty"`
	Details    json.RawMessage `json:"details"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
}

type wire struct {
	*recordAlias
	Time string `json:"time"`
}

type recordAlias Record

// MarshalJSON writes the record with its time in TimeFormat.
func (r Record) MarshalJSON() ([]byte, error) {
	a := recordAlias(r)
	if len(a.Details) == 0 {
		a.Details = json.RawMessage("{}")
	}
	return json.Marshal(wire{recordAlias: &a, Time: r.Time.UTC().Format(TimeFormat)})
}

// UnmarshalJSON reads a record written by MarshalJSON.
func (r *Record) UnmarshalJSON(b []byte) error {
	w := wire{recordAlias: (*recordAlias)(r)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	t, err := time.Parse(TimeFormat, w.Time)
	if err != nil {
		return fmt.Errorf("audit record time: %w", err)
	}
	r.Time = t
	return nil
}

// ComputeHash returns hex(SHA-256(prev_hash ‖ canonical JSON of the record without hash)).
func (r Record) ComputeHash() (string, error) {
	canon, err := r.canonical()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(r.PrevHash))
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Seal sets the record's position in its chain and its hash. Stores call it
// while they hold the chain's head, the last thing before the insert.
func (r *Record) Seal(seq int64, prevHash string) error {
	r.Seq = seq
	r.PrevHash = prevHash
	r.Time = r.Time.UTC().Truncate(time.Microsecond)
	h, err := r.ComputeHash()
	if err != nil {
		return err
	}
	r.Hash = h
	return nil
}

// Filter selects records of one tenant; zero fields match everything.
type Filter struct {
	Actor        string    `json:"actor,omitempty"`
	Action       string    `json:"action,omitempty"`
	ResourceType string    `json:"resource_type,omitempty"`
	ResourceID   string    `json:"resource_id,omitempty"`
	WorkflowID   string    `json:"workflow_id,omitempty"`
	Outcome      string    `json:"outcome,omitempty"`
	Since        time.Time `json:"since,omitzero"`
	Until        time.Time `json:"until,omitzero"`
	TraceID      string    `json:"trace_id,omitempty"`
	// Limit is at most MaxLimit; 0 means DefaultLimit.
	Limit int `json:"limit,omitempty"`
	// BeforeSeq, from a cursor, returns only records with a smaller seq.
	BeforeSeq int64 `json:"-"`
}

// Query limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Store appends and reads audit records. Mutating methods of other domain
// stores take a *Record and append it in their own transaction.
type Store interface {
	// AppendAudit appends records to their tenants' chains, setting ID (when
	// empty), Seq, PrevHash and Hash of each. The chain's head is held only
	// for the final insert.
	AppendAudit(ctx context.Context, recs ...*Record) error
	// QueryAudit returns the tenant's records matching f, newest first.
	QueryAudit(ctx context.Context, tenant string, f Filter) ([]Record, error)
	// ScanAudit calls fn on each of the tenant's records in seq order,
	// starting after afterSeq, at most limit records; it returns how many it read.
	ScanAudit(ctx context.Context, tenant string, afterSeq int64, limit int, fn func(Record) error) (int, error)
}

// ActionCheckpoint is the action of the record a trim of the chain appends
// before it removes old records: its details (Checkpoint) name the last
// record removed, so the chain stays verifiable from there.
const ActionCheckpoint = "audit.checkpoint"

// Checkpoint is the details of an audit.checkpoint record.
type Checkpoint struct {
	ThroughSeq  int64  `json:"through_seq"`
	ThroughHash string `json:"through_hash"`
	Removed     int64  `json:"removed"`
}

// Report is the result of verifying a chain. AnchoredAtSeq is the seq the
// verification started after: 0 from the chain's start, else the last
// record removed by retention, named by the checkpoint that anchors the
// oldest remaining record.
type Report struct {
	OK             bool   `json:"ok"`
	RecordsChecked int64  `json:"records_checked"`
	FirstBadSeq    *int64 `json:"first_bad_seq"`
	AnchoredAtSeq  int64  `json:"anchored_at_seq"`
}

// Verify recomputes the tenant's chain: every record must follow the
// previous one's seq and hash, and hash to its stored hash. It starts at
// the chain's start (genesis) or, when retention removed the oldest
// records, at the checkpoint record naming the last one removed; that
// checkpoint is itself checked on the way. Records missing at the start
// with no such checkpoint make the first missing seq bad.
func Verify(ctx context.Context, s Store, tenant string) (Report, error) {
	const batch = 5000
	var rep Report
	prev, seq, err := anchor(ctx, s, tenant)
	if err != nil {
		return Report{}, err
	}
	rep.AnchoredAtSeq = seq
	for {
		bad := false
		n, err := s.ScanAudit(ctx, tenant, seq, batch, func(r Record) error {
			if bad {
				return nil
			}
			rep.RecordsChecked++
			want, err := r.ComputeHash()
			if err != nil || r.Seq != seq+1 || r.PrevHash != prev || r.Hash != want {
				s := seq + 1
				rep.FirstBadSeq = &s
				bad = true
				return nil
			}
			prev, seq = r.Hash, r.Seq
			return nil
		})
		if err != nil {
			return Report{}, fmt.Errorf("scan audit chain: %w", err)
		}
		if bad {
			return rep, nil
		}
		if n < batch {
			rep.OK = true
			return rep, nil
		}
	}
}

// anchor finds where verification starts: genesis when the chain's oldest
// record is its first, else the seq and hash named by the checkpoint whose
// through_seq is just before the oldest record. Checkpoints are read newest
// first, a page at a time; there are few (one per trim still kept).
func anchor(ctx context.Context, s Store, tenant string) (string, int64, error) {
	var first int64
	if _, err := s.ScanAudit(ctx, tenant, 0, 1, func(r Record) error { first = r.Seq; return nil }); err != nil {
		return "", 0, fmt.Errorf("scan audit chain: %w", err)
	}
	if first <= 1 {
		return Genesis, 0, nil
	}
	f := Filter{Action: ActionCheckpoint, Limit: MaxLimit}
	for {
		recs, err := s.QueryAudit(ctx, tenant, f)
		if err != nil {
			return "", 0, fmt.Errorf("find audit checkpoints: %w", err)
		}
		for _, r := range recs {
			var cp Checkpoint
			if json.Unmarshal(r.Details, &cp) == nil && cp.ThroughSeq == first-1 && r.Seq > cp.ThroughSeq {
				return cp.ThroughHash, cp.ThroughSeq, nil
			}
		}
		if len(recs) < f.Limit {
			// Nothing anchors the oldest record: the records before it
			// are missing, so verification from genesis finds them.
			return Genesis, 0, nil
		}
		f.BeforeSeq = recs[len(recs)-1].Seq
	}
}

// Prepare fills what each record needs before a store seals it: an id, a
// time (now, when unset, in UTC) and details ({} when empty), and makes its
// strings storable text (see Text). Nil records are skipped.
func Prepare(now func() time.Time, recs ...*Record) {
	for _, r := range recs {
		if r == nil {
			continue
		}
		for _, s := range []*string{&r.Tenant, &r.Actor.Sub, &r.Actor.ClientID, &r.Action, &r.Resource.Type,
			&r.Resource.ID, &r.Outcome, &r.RequestID, &r.TraceID, &r.WorkflowID} {
			*s = Text(*s)
		}
		if r.ID == "" {
			r.ID = ids.New(ids.Audit)
		}
		if r.Time.IsZero() {
			r.Time = now()
		}
		r.Time = r.Time.UTC()
		if len(r.Details) == 0 {
			r.Details = Details(nil)
		}
	}
}

// Text returns s with each invalid UTF-8 sequence and each NUL replaced by
// U+FFFD: what a request carries (a path id, a header) may hold either, and
// PostgreSQL's text refuses both, which would leave the request unaudited.
func Text(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// Details marshals v for Record.Details; nil gives an empty object.
func Details(v any) json.RawMessage {
	if v == nil {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// AddDetail returns the details object d with key set to v (d unchanged
// when it is not an object).
func AddDetail(d json.RawMessage, key string, v any) json.RawMessage {
	m := map[string]any{}
	if len(d) > 0 && json.Unmarshal(d, &m) != nil {
		return d
	}
	m[key] = v
	return Details(m)
}
