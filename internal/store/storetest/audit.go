package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
)

func seqs(recs []audit.Record) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func verifyOK(t *testing.T, s Store, tenant string, n int64) {
	t.Helper()
	rep, err := audit.Verify(ctxOf(t), s, tenant)
	must(t, err, "verify")
	if diff := cmp.Diff(audit.Report{OK: true, RecordsChecked: n}, rep); diff != "" {
		t.Errorf("Verify(%s) (-want +got):\n%s", tenant, diff)
	}
}

func testAuditAppendQuery(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var appended []*audit.Record
	for i := range 3 {
		r := record("acme", "tool.create", i)
		appended = append(appended, r)
	}
	r := record("acme", "workflow.step", 3)
	r.WorkflowID, r.Details = "wf_1", nil
	appended = append(appended, r)
	must(t, s.AppendAudit(ctx, appended[:2]...), "append two")
	must(t, s.AppendAudit(ctx, appended[2:]...), "append two more")
	must(t, s.AppendAudit(ctx, record("globex", "tool.create", 9)), "append other tenant")

	prev := audit.Genesis
	var want []audit.Record
	for i, r := range appended {
		if r.ID == "" || r.Seq != int64(i+1) || r.PrevHash != prev || r.Hash == "" {
			t.Fatalf("record %d after append: id %q seq %d prev %q hash %q; want an id, seq %d, prev %q",
				i, r.ID, r.Seq, r.PrevHash, r.Hash, i+1, prev)
		}
		prev = r.Hash
		want = append([]audit.Record{*r}, want...)
	}
	got, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("QueryAudit newest first (-want +got):\n%s", diff)
	}
	for _, r := range got {
		if h, err := r.ComputeHash(); err != nil || h != r.Hash {
			t.Errorf("stored record %d hashes to %s (%v), stored hash %s", r.Seq, h, err, r.Hash)
		}
	}
	other, err := s.QueryAudit(ctx, "globex", audit.Filter{})
	must(t, err, "query other tenant")
	if diff := cmp.Diff([]int64{1}, seqs(other)); diff != "" {
		t.Errorf("other tenant's chain (-want +got):\n%s", diff)
	}
	verifyOK(t, s, "acme", 4)
	verifyOK(t, s, "globex", 1)
	verifyOK(t, s, "nobody", 0)

	// A record without time or id gets both from the store.
	bare := &audit.Record{Tenant: "acme", Action: "x", Outcome: audit.Error, Status: 500}
	must(t, s.AppendAudit(ctx, bare), "append bare")
	if bare.ID == "" || bare.Time.IsZero() || bare.Seq != 5 {
		t.Errorf("bare record: id %q time %v seq %d; want an id, a time, seq 5", bare.ID, bare.Time, bare.Seq)
	}
	verifyOK(t, s, "acme", 5)
}

func testAuditFilters(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	type spec struct {
		sub, client, action, rtype, rid, wf, outcome, trace string
	}
	specs := []spec{
		{"alice", "", "tool.create", "tool", "tool_1", "", audit.Success, "t1"},            // 1
		{"", "cli_bot", "agent.invoke", "agent", "bot", "wf_1", audit.Success, "t2"},       // 2
		{"bob", "cli_bot", "workflow.step", "workflow", "wf_1", "wf_1", audit.Error, "t2"}, // 3
		{"alice", "cli_web", "tool.delete", "tool", "tool_1", "", audit.Denied, "t3"},      // 4
		{"carol", "alice", "tool.create", "tool", "tool_2", "", audit.Success, "t4"},       // 5
		{"bob", "", "workflow.step", "workflow", "wf_2", "wf_2", audit.Success, "t5"},      // 6
	}
	for i, sp := range specs {
		must(t, s.AppendAudit(ctx, &audit.Record{
			Time: base.Add(time.Duration(i) * time.Minute), Tenant: "acme",
			Actor: audit.Actor{Sub: sp.sub, ClientID: sp.client}, Action: sp.action,
			Resource: audit.Resource{Type: sp.rtype, ID: sp.rid}, Outcome: sp.outcome, Status: 200,
			RequestID: fmt.Sprintf("req_%d", i), TraceID: sp.trace, WorkflowID: sp.wf,
		}), "append")
	}
	// Noise in another tenant matching every filter.
	for _, sp := range specs {
		must(t, s.AppendAudit(ctx, &audit.Record{
			Time: base, Tenant: "globex", Actor: audit.Actor{Sub: sp.sub, ClientID: sp.client}, Action: sp.action,
			Resource: audit.Resource{Type: sp.rtype, ID: sp.rid}, Outcome: sp.outcome, TraceID: sp.trace, WorkflowID: sp.wf,
		}), "append noise")
	}
	tests := []struct {
		name string
		f    audit.Filter
		want []int64
	}{
		{"all", audit.Filter{}, []int64{6, 5, 4, 3, 2, 1}},
		{"actor matches sub", audit.Filter{Actor: "bob"}, []int64{6, 3}},
		{"actor matches client_id", audit.Filter{Actor: "cli_bot"}, []int64{3, 2}},
		{"actor matches either", audit.Filter{Actor: "alice"}, []int64{5, 4, 1}},
		{"actor and action", audit.Filter{Actor: "alice", Action: "tool.create"}, []int64{5, 1}},
		{"actor with limit", audit.Filter{Actor: "alice", Limit: 2}, []int64{5, 4}},
		{"actor before seq", audit.Filter{Actor: "alice", BeforeSeq: 5}, []int64{4, 1}},
		{"action", audit.Filter{Action: "workflow.step"}, []int64{6, 3}},
		{"resource type", audit.Filter{ResourceType: "tool"}, []int64{5, 4, 1}},
		{"resource type and id", audit.Filter{ResourceType: "tool", ResourceID: "tool_1"}, []int64{4, 1}},
		{"workflow", audit.Filter{WorkflowID: "wf_1"}, []int64{3, 2}},
		{"outcome", audit.Filter{Outcome: audit.Success}, []int64{6, 5, 2, 1}},
		{"trace", audit.Filter{TraceID: "t2"}, []int64{3, 2}},
		{"since", audit.Filter{Since: base.Add(3 * time.Minute)}, []int64{6, 5, 4}},
		{"since between microseconds", audit.Filter{Since: base.Add(3*time.Minute - 500*time.Nanosecond)}, []int64{6, 5, 4}},
		{"until", audit.Filter{Until: base.Add(time.Minute)}, []int64{2, 1}},
		{"since and until", audit.Filter{Since: base.Add(time.Minute), Until: base.Add(2 * time.Minute)}, []int64{3, 2}},
		{"limit", audit.Filter{Limit: 2}, []int64{6, 5}},
		{"limit over max", audit.Filter{Limit: 5000}, []int64{6, 5, 4, 3, 2, 1}},
		{"before seq", audit.Filter{BeforeSeq: 3}, []int64{2, 1}},
		{"combined", audit.Filter{Action: "tool.create", Outcome: audit.Success, ResourceType: "tool"}, []int64{5, 1}},
		{"no match", audit.Filter{Action: "nope"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.QueryAudit(ctx, "acme", tc.f)
			must(t, err, "query")
			if diff := cmp.Diff(tc.want, seqs(got)); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
		})
	}
}

func testAuditCursor(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	const n = 250
	batch := make([]*audit.Record, n)
	for i := range batch {
		batch[i] = record("acme", "a", i)
	}
	must(t, s.AppendAudit(ctx, batch...), "append")
	def, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query default")
	if len(def) != audit.DefaultLimit || def[0].Seq != n {
		t.Fatalf("default query: %d records from seq %d, want %d from %d", len(def), def[0].Seq, audit.DefaultLimit, n)
	}
	var got []int64
	f := audit.Filter{Limit: 70}
	for {
		page, err := s.QueryAudit(ctx, "acme", f)
		must(t, err, "query page")
		got = append(got, seqs(page)...)
		if len(page) < f.Limit {
			break
		}
		f.BeforeSeq = page[len(page)-1].Seq
	}
	var want []int64
	for i := int64(n); i >= 1; i-- {
		want = append(want, i)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged seqs (-want +got):\n%s", diff)
	}

	var scanned []int64
	c, err := s.ScanAudit(ctx, "acme", 100, 20, func(r audit.Record) error {
		scanned = append(scanned, r.Seq)
		return nil
	})
	must(t, err, "scan")
	if c != 20 || scanned[0] != 101 || scanned[19] != 120 {
		t.Errorf("ScanAudit(after 100, 20) = %d records %v, want 101..120", c, scanned)
	}
	verifyOK(t, s, "acme", n)
}

// testAuditWithMutations checks that mutations append their record in their
// own transaction, to the same chain as AppendAudit.
func testAuditWithMutations(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	must(t, s.AppendAudit(ctx, record("acme", "request", 0)), "append")
	tl := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, tl, petOps(), record("acme", "tool.create", 1)), "create tool")
	must(t, s.UpdateTool(ctx, tl, petOps()[:1], record("acme", "tool.update", 2)), "update tool")
	must(t, s.CreateClient(ctx, auth.Client{ID: "cli_1", Tenant: "acme", Name: "bot", SecretHash: "h", CreatedAt: base},
		record("acme", "client.create", 3)), "create client")
	must(t, s.DeleteTool(ctx, "acme", tl.ID, record("acme", "tool.delete", 4)), "delete tool")

	got, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query")
	var actions []string
	for _, r := range got {
		actions = append(actions, r.Action)
	}
	want := []string{"tool.delete", "client.create", "tool.update", "tool.create", "request"}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Errorf("actions newest first (-want +got):\n%s", diff)
	}
	verifyOK(t, s, "acme", 5)
}

func testAuditConcurrent(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	const workers, each = 50, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				r := record("acme", "concurrent", w*each+i)
				if i%3 == 0 { // some records come in pairs
					errs <- s.AppendAudit(ctx, r, record("acme", "pair", i))
					continue
				}
				errs <- s.AppendAudit(ctx, r)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err, "append")
	}
	total := int64(workers * (each + 4)) // i = 0, 3, 6, 9 append a pair
	var got []int64
	_, err := s.ScanAudit(ctx, "acme", 0, int(total)+10, func(r audit.Record) error {
		got = append(got, r.Seq)
		return nil
	})
	must(t, err, "scan")
	var want []int64
	for i := int64(1); i <= total; i++ {
		want = append(want, i)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
	verifyOK(t, s, "acme", total)
}

// testAuditLater checks records appended later: each is in the chain
// before the writes committed after it was queued, a query finds it without
// any other write, and the chain stays whole.
func testAuditLater(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var mu sync.Mutex
	var errs []error
	done := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	s.AppendAuditLater(done, record("acme", "read", 0))
	s.AppendAuditLater(done, record("acme", "read", 1), record("other", "read", 2))
	tl := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, tl, petOps(), record("acme", "tool.create", 3)), "create tool")
	s.AppendAuditLater(done, record("acme", "read", 4))

	got, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query")
	var actions []string
	for _, r := range got {
		actions = append(actions, fmt.Sprintf("%s %d", r.Action, r.Seq))
	}
	want := []string{"read 4", "tool.create 3", "read 2", "read 1"}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Errorf("records newest first (-want +got):\n%s", diff)
	}
	mu.Lock()
	if len(errs) != 3 || errors.Join(errs...) != nil {
		t.Errorf("done called with %v, want 3 nils", errs)
	}
	mu.Unlock()
	verifyOK(t, s, "acme", 4)
	verifyOK(t, s, "other", 1)
}

func testAuditTamper(t *testing.T, s Store, h Hooks) {
	if h.TamperAudit == nil {
		t.Skip("no TamperAudit hook")
	}
	ctx := ctxOf(t)
	for i := range 5 {
		must(t, s.AppendAudit(ctx, record("acme", "a", i)), "append")
	}
	must(t, s.AppendAudit(ctx, record("globex", "a", 0)), "append other tenant")
	verifyOK(t, s, "acme", 5)
	h.TamperAudit(t, s, "acme", 3)
	rep, err := audit.Verify(ctx, s, "acme")
	must(t, err, "verify")
	bad := int64(3)
	if diff := cmp.Diff(audit.Report{OK: false, RecordsChecked: 3, FirstBadSeq: &bad}, rep); diff != "" {
		t.Errorf("Verify after tampering with seq 3 (-want +got):\n%s", diff)
	}
	verifyOK(t, s, "globex", 1)
}

// testAuditUnstorableText appends a record whose strings hold a NUL and
// invalid UTF-8 (as a request's path id may): it is stored, with those
// replaced by U+FFFD, and the chain verifies.
func testAuditUnstorableText(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	r := record("acme", "http.request", 0)
	r.Resource.ID, r.Actor.Sub, r.RequestID = "a\x00b", "u\xffv", "req\xc3"
	must(t, s.AppendAudit(ctx, r), "append")
	got, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query")
	if len(got) != 1 || got[0].Resource.ID != "a\uFFFDb" || got[0].Actor.Sub != "u\uFFFDv" || got[0].RequestID != "req\uFFFD" {
		t.Errorf("stored %+v, want the NUL and invalid bytes as U+FFFD", got)
	}
	verifyOK(t, s, "acme", 1)
}
