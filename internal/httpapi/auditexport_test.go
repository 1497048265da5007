package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/siem"
)

// exportPage is one GET /v1/audit/export: its events and its last line.
type exportPage struct {
	Events []siem.Event
	Next   string
	More   bool
}

func export(t *testing.T, h *harness, tok, query string) exportPage {
	t.Helper()
	r := h.do("GET", "/v1/audit/export?"+query, tok, nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export?%s: %d %s %s", query, r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	lines := bytes.Split(bytes.TrimSuffix(r.Body, []byte("\n")), []byte("\n"))
	var p exportPage
	for _, l := range lines[:len(lines)-1] {
		var e siem.Event
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("event line %s: %v", l, err)
		}
		p.Events = append(p.Events, e)
	}
	var end struct {
		NextCursor *string `json:"next_cursor"`
		More       *bool   `json:"more"`
	}
	dec := json.NewDecoder(bytes.NewReader(lines[len(lines)-1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&end); err != nil || end.NextCursor == nil || end.More == nil {
		t.Fatalf("last line %s is not {next_cursor, more} (%v)", lines[len(lines)-1], err)
	}
	p.Next, p.More = *end.NextCursor, *end.More
	return p
}

func TestAuditExportPagesOldestFirstAndResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read tools:read")
	other := h.token("globex", "audit:read")
	for range 4 {
		h.do("GET", "/v1/tools", tok, nil)
	}
	h.do("GET", "/v1/audit/verify", other, nil)

	first := export(t, h, tok, "format=ocsf&limit=3")
	if len(first.Events) != 3 || !first.More {
		t.Fatalf("first page: %d events, more %v", len(first.Events), first.More)
	}
	for i, e := range first.Events {
		if e.Metadata.Sequence != int64(i+1) || e.Metadata.TenantUID != "acme" || e.ClassUID != siem.ClassAPIActivity ||
			e.API.Operation != "tool.list" || e.Metadata.Version != siem.OCSFVersion || len(e.AttestationList) != 1 ||
			e.AttestationList[0].Fingerprint.Value == "" || e.Unmapped.Hash != "" {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	rest := export(t, h, tok, "cursor="+url.QueryEscape(first.Next))
	// tool.list 4, then the first export's own record; this export's record
	// is written after it answers.
	if len(rest.Events) != 2 || rest.More || rest.Events[0].Metadata.Sequence != 4 || rest.Events[1].API.Operation != "audit.export" {
		t.Fatalf("second page: %+v", rest)
	}
	if prev := rest.Events[0].AttestationList[0].PrevEvent; prev == nil || prev.UID != first.Events[2].Metadata.UID ||
		prev.Fingerprint.Value != first.Events[2].AttestationList[0].Fingerprint.Value {
		t.Error("the second page does not continue the chain of the first")
	}
	// The 1.4.0 form, for SIEMs pinned to it: the chain under unmapped.
	old := export(t, h, tok, "format=ocsf&ocsf_version=1.4.0&limit=2")
	if e := old.Events[1]; e.Metadata.Version != "1.4.0" || e.AttestationList != nil || e.Unmapped.Seq != 2 ||
		e.Unmapped.PrevHash != first.Events[0].AttestationList[0].Fingerprint.Value {
		t.Errorf("1.4.0 event: %+v", e)
	}
	// The whole chain verifies from the export alone.
	whole := h.do("GET", "/v1/audit/export?limit=5000", tok, nil)
	if rep, err := siem.VerifyExport(bytes.NewReader(whole.Body)); err != nil || !rep.OK || rep.RecordsChecked < 6 {
		t.Errorf("verify the export: %+v %v", rep, err)
	}
	// Caught up: no events, and a cursor to poll with later.
	caught := export(t, h, tok, "cursor="+url.QueryEscape(rest.Next)+"&limit=1")
	if len(caught.Events) != 1 || caught.Events[0].API.Operation != "audit.export" {
		t.Fatalf("after the second page: %+v", caught)
	}

	// Records removed below a cursor (audit retention) are skipped: the
	// export goes on from the oldest record kept.
	raw := h.rawDB()
	for _, table := range []string{"audit_records", "audit_tail"} {
		if _, err := raw.Exec(`DELETE FROM ` + table + ` WHERE tenant = 'acme' AND seq <= 5`); err != nil {
			t.Fatal(err)
		}
	}
	after := export(t, h, tok, "cursor="+url.QueryEscape(first.Next))
	if len(after.Events) == 0 || after.Events[0].Metadata.Sequence != 6 || after.Events[0].AttestationList[0].PrevEvent != nil {
		t.Fatalf("after removal below the cursor: %+v", after.Events)
	}
	// What is kept verifies from the export alone, anchored at seq 5.
	kept := h.do("GET", "/v1/audit/export?limit=5000", tok, nil)
	if rep, err := siem.VerifyExport(bytes.NewReader(kept.Body)); err != nil || !rep.OK || rep.Chains["acme"].AnchoredAtSeq != 5 {
		t.Errorf("verify what retention kept: %+v %v", rep, err)
	}
	// Another tenant's chain is its own.
	g := export(t, h, other, "")
	if len(g.Events) != 1 || g.Events[0].Metadata.TenantUID != "globex" {
		t.Errorf("globex export: %+v", g.Events)
	}
}

func TestAuditExportRefusesBadParameters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read")
	for _, tc := range []struct{ query, field, words string }{
		{"format=cef", "format", "supported: ocsf"},
		{"cursor=nonsense", "cursor", "next_cursor"},
		{"limit=0", "limit", "from 1 to 5000"},
		{"limit=9999", "limit", "from 1 to 5000"},
		{"since=2026-01-01T00:00:00Z", "since", "known: format, ocsf_version, cursor, limit"},
		{"ocsf_version=1.1.0", "ocsf_version", "write one of 1.9.0, 1.4.0"},
	} {
		r := h.do("GET", "/v1/audit/export?"+tc.query, tok, nil)
		if r.Status != 422 || !strings.Contains(string(r.Body), `"field":"`+tc.field+`"`) || !strings.Contains(string(r.Body), tc.words) {
			t.Errorf("%s: %d %s", tc.query, r.Status, r.Body)
		}
	}
	if r := h.do("GET", "/v1/audit/export", h.token("acme", "tools:read"), nil); r.Status != 403 {
		t.Errorf("without audit:read: %d", r.Status)
	}
}
