package siem

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/audit"
)

// chain is a tenant's records in memory, a Scanner as the stores are.
type chain []audit.Record

func (c chain) ScanAudit(_ context.Context, _ string, afterSeq int64, limit int, fn func(audit.Record) error) (int, error) {
	n := 0
	for _, r := range c {
		if r.Seq <= afterSeq || n == limit {
			continue
		}
		n++
		if err := fn(r); err != nil {
			return n, err
		}
	}
	return n, nil
}

// exportOf is the NDJSON of the whole chain, read a page of size at a
// time as the export endpoint pages it.
func exportOf(t *testing.T, c chain, version string, size int) []byte {
	t.Helper()
	m := Mapper{Version: "test", OCSF: version}
	var out bytes.Buffer
	after := int64(0)
	for {
		b, err := m.Read(t.Context(), c, "acme", after, size)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b.NDJSON())
		fmt.Fprintf(&out, `{"next_cursor":%q,"more":%v}`+"\n", EncodeCursor(b.LastSeq), len(b.Lines) == size)
		if len(b.Lines) < size {
			return out.Bytes()
		}
		after = b.LastSeq
	}
}

func acmeChain(t *testing.T, n int) chain {
	recs := make([]audit.Record, n)
	for i := range recs {
		recs[i] = audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "tool.read", Outcome: audit.Success,
			Status: 200, Details: audit.Details(map[string]any{"method": "GET", "n": i})}
	}
	return chain(sealed(t, recs...))
}

// TestVerifyExport recomputes the chain from exports alone, across pages
// (prev_event links a page's first event to the last of the one before),
// in both versions, and from a chain whose start retention removed; it
// finds a changed record, a removed one, and events put out of order.
func TestVerifyExport(t *testing.T) {
	c := acmeChain(t, 12)
	for _, v := range OCSFVersions {
		rep, err := VerifyExport(bytes.NewReader(exportOf(t, c, v, 5)))
		if err != nil || !rep.OK || rep.RecordsChecked != 12 {
			t.Fatalf("%s: %+v %v", v, rep, err)
		}
		if ch := rep.Chains["acme"]; ch.FirstSeq != 1 || ch.LastSeq != 12 || ch.AnchoredAtSeq != 0 || ch.AnchorHash != audit.Genesis || ch.LastHash != c[11].Hash {
			t.Errorf("%s: chain %+v", v, ch)
		}
	}
	// Every event after the first page's names the record before it.
	lines := strings.Split(strings.TrimSpace(string(exportOf(t, c, OCSFVersion, 5))), "\n")
	if !strings.Contains(lines[6], `"prev_event":{"uid":"`+c[4].ID+`"`) {
		t.Errorf("the second page's first event does not name the first page's last record: %s", lines[6])
	}

	// Retention removed seqs 1..4: the export starts at 5, anchored at 4.
	trimmed := c[4:]
	rep, err := VerifyExport(bytes.NewReader(exportOf(t, trimmed, OCSFVersion, 5)))
	if ch := rep.Chains["acme"]; err != nil || !rep.OK || ch.FirstSeq != 5 || ch.AnchoredAtSeq != 4 || ch.AnchorHash != c[3].Hash {
		t.Errorf("after retention: %+v %+v %v", rep, ch, err)
	}
	if strings.Contains(strings.SplitN(string(exportOf(t, trimmed, OCSFVersion, 5)), "\n", 2)[0], "prev_event") {
		t.Errorf("the oldest kept record names a previous event the export cannot hold")
	}

	good := exportOf(t, c, OCSFVersion, 100)
	events := strings.Split(strings.TrimSpace(string(good)), "\n")
	for _, tc := range []struct {
		name  string
		edit  func([]string) []string
		seq   int64
		words string
	}{
		{"a changed record", func(l []string) []string {
			l[6] = strings.Replace(l[6], `\"outcome\":\"success\"`, `\"outcome\":\"denied\"`, 1)
			return l
		}, 7, "the record was changed"},
		{"a removed record", func(l []string) []string { return append(l[:3:3], l[4:]...) }, 5, "records are missing"},
		{"two swapped", func(l []string) []string { l[2], l[3] = l[3], l[2]; return l }, 4, "out of order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := tc.edit(append([]string(nil), events...))
			rep, err := VerifyExport(strings.NewReader(strings.Join(edited, "\n")))
			if err != nil || rep.OK || rep.FirstBad == nil || rep.FirstBad.Seq != tc.seq || !strings.Contains(rep.FirstBad.Reason, tc.words) {
				t.Errorf("%+v %+v %v, want seq %d: %s", rep, rep.FirstBad, err, tc.seq, tc.words)
			}
		})
	}
}
