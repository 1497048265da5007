package siem

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/agentplane/agentplane/internal/audit"
)

// Export page sizes.
const (
	DefaultExportLimit = 1000
	MaxExportLimit     = 5000
)

// Scanner reads a tenant's chain in seq order (audit.Store's ScanAudit).
type Scanner interface {
	ScanAudit(ctx context.Context, tenant string, afterSeq int64, limit int, fn func(audit.Record) error) (int, error)
}

// Batch is records of one tenant as OCSF events, one JSON line each, and
// the seqs of the first and the last (LastSeq is the cursor it started
// after when it holds none).
type Batch struct {
	Tenant            string
	Lines             [][]byte
	FirstSeq, LastSeq int64
}

// Read maps up to limit of the tenant's records after afterSeq, in seq
// order. Records removed below afterSeq's successor by audit retention are
// skipped: the batch starts at the oldest record still kept. The record at
// afterSeq, when kept, is read too, as the previous event of the first.
func (m Mapper) Read(ctx context.Context, s Scanner, tenant string, afterSeq int64, limit int) (Batch, error) {
	b := Batch{Tenant: tenant, LastSeq: afterSeq}
	from, prev, prevSeq := afterSeq, "", int64(-1)
	if afterSeq > 0 {
		from--
	}
	_, err := s.ScanAudit(ctx, tenant, from, limit+1, func(r audit.Record) error {
		if r.Seq <= afterSeq {
			prev, prevSeq = r.ID, r.Seq
			return nil
		}
		if len(b.Lines) == limit {
			return nil
		}
		linked := prev
		if prevSeq != r.Seq-1 {
			linked = "" // the record before is no longer kept
		}
		e, err := m.Event(r, linked)
		if err != nil {
			return fmt.Errorf("map audit record %d: %w", r.Seq, err)
		}
		line, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode audit record %d: %w", r.Seq, err)
		}
		if len(b.Lines) == 0 {
			b.FirstSeq = r.Seq
		}
		b.Lines = append(b.Lines, line)
		b.LastSeq = r.Seq
		prev, prevSeq = r.ID, r.Seq
		return nil
	})
	return b, err
}

// NDJSON is the batch's lines, each ending in a newline.
func (b Batch) NDJSON() []byte {
	n := 0
	for _, l := range b.Lines {
		n += len(l) + 1
	}
	out := make([]byte, 0, n)
	for _, l := range b.Lines {
		out = append(append(out, l...), '\n')
	}
	return out
}

// EncodeCursor is the export cursor after seq.
func EncodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("e" + strconv.FormatInt(seq, 10)))
}

// DecodeCursor reads an export cursor; "" is the start of the chain.
func DecodeCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != 'e' {
		return 0, fmt.Errorf("not an export cursor")
	}
	seq, err := strconv.ParseInt(string(b[1:]), 10, 64)
	if err != nil || seq < 0 {
		return 0, fmt.Errorf("not an export cursor")
	}
	return seq, nil
}
