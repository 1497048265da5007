package siem

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentplane/agentplane/internal/audit"
)

// ExportReport is what VerifyExport found in an export: each tenant
// chain's span, and the first event that does not follow, if any.
type ExportReport struct {
	OK             bool                    `json:"ok"`
	RecordsChecked int64                   `json:"records_checked"`
	Chains         map[string]*ChainReport `json:"chains"`
	// FirstBad names the first event that breaks its chain: its line,
	// tenant, seq and why.
	FirstBad *BadEvent `json:"first_bad,omitempty"`
}

// ChainReport is one tenant chain's span in an export. AnchorHash is the
// prev_hash of its first event: the hash of the record before it
// (AnchoredAtSeq), which the export does not hold: 64 zeros at the chain's
// start, else what GET /v1/audit/verify or an earlier export vouches for
// (after retention, an audit.checkpoint's through_hash).
type ChainReport struct {
	FirstSeq      int64  `json:"first_seq"`
	LastSeq       int64  `json:"last_seq"`
	AnchoredAtSeq int64  `json:"anchored_at_seq"`
	AnchorHash    string `json:"anchor_hash"`
	LastHash      string `json:"last_hash"`
	lastID        string
}

// BadEvent is an event that does not verify.
type BadEvent struct {
	Line   int    `json:"line"`
	Tenant string `json:"tenant,omitempty"`
	Seq    int64  `json:"seq,omitempty"`
	Reason string `json:"reason"`
}

// maxExportLine bounds one line of an export (an event with its record).
const maxExportLine = 8 << 20

// VerifyExport recomputes the hash chains of an export (the NDJSON of GET
// /v1/audit/export, in either OCSF version, its next_cursor lines allowed)
// from the export alone: each event's raw_data is its audit record, whose
// hash is recomputed (SHA-256 of prev_hash and the record's RFC 8785 form
// without its hash) and must equal the hash the event carries (the
// attestation's fingerprint in 1.9.0, unmapped.hash in 1.4.0); each record
// of a tenant must follow the one before it in the export (the next seq,
// its hash as prev_hash, its id as prev_event.uid). It stops at the first
// event that does not.
func VerifyExport(r io.Reader) (ExportReport, error) {
	rep := ExportReport{Chains: map[string]*ChainReport{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxExportLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		bad := func(format string, a ...any) ExportReport {
			rep.FirstBad = &BadEvent{Line: line, Reason: fmt.Sprintf(format, a...)}
			return rep
		}
		var ev struct {
			RawData         *string       `json:"raw_data"`
			NextCursor      string        `json:"next_cursor"`
			AttestationList []Attestation `json:"attestation_list"`
			Metadata        Metadata      `json:"metadata"`
			Unmapped        Unmapped      `json:"unmapped"`
		}
		if err := json.Unmarshal([]byte(text), &ev); err != nil {
			return bad("not JSON: %v", err), nil
		}
		if ev.RawData == nil {
			if ev.NextCursor != "" {
				continue // an export page's last line
			}
			return bad("no raw_data: not an event of the audit export"), nil
		}
		var rec audit.Record
		if err := json.Unmarshal([]byte(*ev.RawData), &rec); err != nil {
			return bad("raw_data is not an audit record: %v", err), nil
		}
		b := rep.bad(line, rec)
		want, err := rec.ComputeHash()
		if err != nil {
			return b("its record cannot be hashed: %v", err), nil
		}
		if want != rec.Hash {
			return b("its record hashes to %s, not the hash it carries (%s): the record was changed", want, rec.Hash), nil
		}
		carried, prevID := ev.Unmapped.Hash, ""
		if ev.Metadata.Version != OCSFVersion14 {
			if len(ev.AttestationList) != 1 {
				return b("%d attestations, want the record's one", len(ev.AttestationList)), nil
			}
			a := ev.AttestationList[0]
			carried = a.Fingerprint.Value
			if a.ChainUID != ChainPrefix+rec.Tenant {
				return b("chain_uid %q, want %q", a.ChainUID, ChainPrefix+rec.Tenant), nil
			}
			if a.PrevEvent != nil {
				if a.PrevEvent.Fingerprint.Value != rec.PrevHash {
					return b("prev_event's fingerprint %s is not the record's prev_hash %s", a.PrevEvent.Fingerprint.Value, rec.PrevHash), nil
				}
				prevID = a.PrevEvent.UID
			}
		}
		if carried != rec.Hash || ev.Metadata.UID != rec.ID || ev.Metadata.Sequence != rec.Seq {
			return b("the event's hash, uid or sequence is not its record's"), nil
		}
		c, seen := rep.Chains[rec.Tenant]
		switch {
		case !seen:
			c = &ChainReport{FirstSeq: rec.Seq, AnchoredAtSeq: rec.Seq - 1, AnchorHash: rec.PrevHash}
			if rec.Seq == 1 && rec.PrevHash != audit.Genesis {
				return b("the chain's first record has prev_hash %s, not 64 zeros", rec.PrevHash), nil
			}
			rep.Chains[rec.Tenant] = c
		case rec.Seq != c.LastSeq+1:
			return b("seq %d follows seq %d: records are missing or out of order", rec.Seq, c.LastSeq), nil
		case rec.PrevHash != c.LastHash:
			return b("prev_hash %s is not the hash of seq %d (%s)", rec.PrevHash, c.LastSeq, c.LastHash), nil
		case prevID != "" && prevID != c.lastID:
			return b("prev_event %s is not seq %d's record (%s)", prevID, c.LastSeq, c.lastID), nil
		}
		c.LastSeq, c.LastHash, c.lastID = rec.Seq, rec.Hash, rec.ID
		rep.RecordsChecked++
	}
	if err := sc.Err(); err != nil {
		return rep, fmt.Errorf("read the export: %w", err)
	}
	rep.OK = true
	return rep, nil
}

// bad reports the event of line whose record is rec as the first bad one.
func (rep *ExportReport) bad(line int, rec audit.Record) func(format string, a ...any) ExportReport {
	return func(format string, a ...any) ExportReport {
		rep.FirstBad = &BadEvent{Line: line, Tenant: rec.Tenant, Seq: rec.Seq, Reason: fmt.Sprintf(format, a...)}
		return *rep
	}
}
