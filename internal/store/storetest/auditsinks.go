package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testAuditSinks: a sink's lease is held by one owner at a time and passes
// on when it lapses or is released; its cursors move up only, only for the
// lease's holder, and the chains' heads are every tenant's last seq.
func testAuditSinks(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	for i := range 3 {
		must(t, s.AppendAudit(ctx, record("acme", "tool.read", i)), "append acme")
	}
	must(t, s.AppendAudit(ctx, record("globex", "tool.read", 0)), "append globex")
	heads, err := s.AuditHeads(ctx)
	must(t, err, "heads")
	if diff := cmp.Diff(map[string]int64{"acme": 3, "globex": 1}, heads); diff != "" {
		t.Errorf("AuditHeads (-want +got):\n%s", diff)
	}

	const sink = "syslog+tcp://siem.example:6514"
	now := base
	claim := func(owner string, at time.Time) bool {
		t.Helper()
		ok, err := s.ClaimSink(ctx, sink, owner, at, at.Add(30*time.Second))
		must(t, err, "claim "+owner)
		return ok
	}
	if !claim("replica-a", now) {
		t.Fatal("replica-a could not claim a free sink")
	}
	if claim("replica-b", now.Add(10*time.Second)) {
		t.Error("replica-b claimed a sink replica-a holds")
	}
	if !claim("replica-a", now.Add(20*time.Second)) {
		t.Error("replica-a could not renew its own lease")
	}
	advance := func(owner, tenant string, seq int64) bool {
		t.Helper()
		ok, err := s.AdvanceSink(ctx, sink, owner, tenant, seq, now)
		must(t, err, "advance")
		return ok
	}
	if !advance("replica-a", "acme", 2) || !advance("replica-a", "globex", 1) {
		t.Fatal("the lease holder could not advance its cursors")
	}
	if !advance("replica-a", "acme", 1) {
		t.Fatal("an older seq was refused rather than ignored")
	}
	if advance("replica-b", "acme", 3) {
		t.Error("replica-b advanced a sink it does not hold")
	}
	cursors, err := s.SinkCursors(ctx, sink)
	must(t, err, "cursors")
	if diff := cmp.Diff(map[string]int64{"acme": 2, "globex": 1}, cursors); diff != "" {
		t.Errorf("SinkCursors (-want +got):\n%s", diff)
	}
	other, err := s.SinkCursors(ctx, "https://siem.example/ingest")
	must(t, err, "cursors of another sink")
	if len(other) != 0 {
		t.Errorf("another sink has cursors %v", other)
	}

	// The lease lapses (replica-a renewed it until +50 s): replica-b takes it.
	if !claim("replica-b", now.Add(51*time.Second)) {
		t.Fatal("replica-b could not take a lapsed lease")
	}
	if advance("replica-a", "acme", 3) {
		t.Error("replica-a advanced after losing its lease")
	}
	must(t, s.ReleaseSink(ctx, sink, "replica-b"), "release")
	if !claim("replica-c", now.Add(52*time.Second)) {
		t.Error("replica-c could not claim a released sink")
	}

	// Two owners racing for a lapsed lease: exactly one wins.
	later := now.Add(time.Hour)
	var wg sync.WaitGroup
	won := make([]bool, 4)
	for i := range won {
		wg.Go(func() {
			ok, err := s.ClaimSink(ctx, sink, string(rune('w'+i)), later, later.Add(time.Minute))
			if err != nil {
				t.Errorf("claim: %v", err)
			}
			won[i] = ok
		})
	}
	wg.Wait()
	n := 0
	for _, w := range won {
		if w {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d owners won one lapsed lease, want 1", n)
	}
}
