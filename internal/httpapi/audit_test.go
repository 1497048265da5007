package httpapi_test

import (
	"testing"

	"github.com/agentplane/agentplane/internal/audit"
)

type auditPage struct {
	Records    []audit.Record `json:"records"`
	NextCursor *string        `json:"next_cursor"`
}

func TestTraceparentReachesTheAuditRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read")
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := h.do("GET", "/v1/audit/verify", tok, nil, "traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var page auditPage
	h.do("GET", "/v1/audit/query?trace_id="+trace, tok, nil).json(t, &page)
	if len(page.Records) != 1 {
		t.Fatalf("records with trace %s: %+v", trace, page.Records)
	}
	rec := page.Records[0]
	if rec.Action != "audit.verify" || rec.TraceID != trace || rec.Actor.Sub != "alice" || rec.Outcome != audit.Success || rec.Status != 200 {
		t.Errorf("record %+v", rec)
	}
}

func TestRefusedRequestsAreAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	reader := h.token("acme", "audit:read")
	h.do("POST", "/v1/tools", h.token("acme", "tools:read"), `{}`) // 403: tools:write missing
	h.do("GET", "/v1/nowhere", reader, nil)                        // 404 on an unknown route

	var page auditPage
	h.do("GET", "/v1/audit/query?outcome=denied", reader, nil).json(t, &page)
	if len(page.Records) != 1 || page.Records[0].Status != 403 || page.Records[0].Action != "tool.create" {
		t.Fatalf("denied records: %+v", page.Records)
	}
	h.do("GET", "/v1/audit/query?action=http.request", reader, nil).json(t, &page)
	if len(page.Records) != 1 || page.Records[0].Status != 404 {
		t.Fatalf("unknown-route records: %+v", page.Records)
	}
	// Without a valid token the record goes to the _system chain.
	h.do("GET", "/v1/audit/query", "bogus", nil)
	n := 0
	if _, err := h.DB.ScanAudit(t.Context(), audit.SystemTenant, 0, 100, func(r audit.Record) error {
		if r.Status == 401 && r.Outcome == audit.Denied {
			n++
		}
		return nil
	}); err != nil || n != 1 {
		t.Fatalf("401 records in _system: %d (%v)", n, err)
	}
}

func TestVerifyFindsATamperedRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read")
	for range 5 {
		h.do("GET", "/v1/audit/query", tok, nil)
	}
	var rep audit.Report
	h.do("GET", "/v1/audit/verify", tok, nil).json(t, &rep)
	if !rep.OK || rep.RecordsChecked != 5 {
		t.Fatalf("untouched chain: %+v", rep)
	}

	raw := h.rawDB()
	// The record is in the indexed table or still in the tail.
	for _, table := range []string{"audit_records", "audit_tail"} {
		if _, err := raw.Exec(`UPDATE ` + table + ` SET status = 500 WHERE tenant = 'acme' AND seq = 3`); err != nil {
			t.Fatal(err)
		}
	}
	h.do("GET", "/v1/audit/verify", tok, nil).json(t, &rep)
	if rep.OK || rep.FirstBadSeq == nil || *rep.FirstBadSeq != 3 {
		t.Fatalf("tampered chain: %+v", rep)
	}
}

func TestAuditQueryPagesNewestFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read")
	for range 5 {
		h.do("GET", "/v1/audit/verify", tok, nil)
	}
	var seqs []int64
	cursor := ""
	for range 10 {
		var page auditPage
		r := h.do("POST", "/v1/audit/query", tok, map[string]any{"action": "audit.verify", "limit": 2, "cursor": cursor})
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		r.json(t, &page)
		for _, rec := range page.Records {
			seqs = append(seqs, rec.Seq)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(seqs) != 5 {
		t.Fatalf("seqs %v", seqs)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] >= seqs[i-1] {
			t.Fatalf("not newest first: %v", seqs)
		}
	}
}
