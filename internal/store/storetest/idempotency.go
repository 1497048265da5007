package storetest

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/problem"
)

func entry(key string, at time.Time) idempotency.Entry {
	return idempotency.Entry{
		Key:         idempotency.Key{Tenant: "acme", Principal: "alice", Method: "POST", Path: "/v1/tools", Key: key},
		Fingerprint: "fp-1", State: idempotency.Running,
		CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour), LockedUntil: at.Add(2 * time.Minute),
	}
}

func testIdempotency(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	e := entry("k1", base)
	got, created, err := s.BeginIdempotent(ctx, e)
	must(t, err, "begin")
	if !created {
		t.Fatal("first begin did not create the entry")
	}
	if diff := cmp.Diff(e, got); diff != "" {
		t.Errorf("created entry (-want +got):\n%s", diff)
	}

	repeat := e
	repeat.Fingerprint, repeat.CreatedAt = "fp-2", base.Add(time.Second)
	got, created, err = s.BeginIdempotent(ctx, repeat)
	must(t, err, "begin repeat")
	if created || got.State != idempotency.Running || got.Fingerprint != "fp-1" {
		t.Fatalf("repeat while running: created %v, entry %+v; want the running first entry", created, got)
	}

	// The key is scoped by principal, method and path too.
	for _, k := range []func(*idempotency.Entry){
		func(e *idempotency.Entry) { e.Key.Tenant = "globex" },
		func(e *idempotency.Entry) { e.Key.Principal = "bob" },
		func(e *idempotency.Entry) { e.Key.Path = "/v1/agents" },
		func(e *idempotency.Entry) { e.Key.Method = "PUT" },
	} {
		other := e
		k(&other)
		if _, created, err := s.BeginIdempotent(ctx, other); err != nil || !created {
			t.Errorf("begin %+v: created %v, err %v; want a new entry", other.Key, created, err)
		}
	}

	hdr := http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/tools/tool_1"}}
	must(t, s.CompleteIdempotent(ctx, e.Key, 201, hdr, []byte(`{"id":"tool_1"}`)), "complete")
	got, created, err = s.BeginIdempotent(ctx, repeat)
	must(t, err, "begin after complete")
	want := e
	want.State, want.Status, want.Header, want.Body = idempotency.Complete, 201, hdr, []byte(`{"id":"tool_1"}`)
	if created {
		t.Error("begin after complete created a new entry")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completed entry (-want +got):\n%s", diff)
	}
	// A completed entry is not released.
	must(t, s.ReleaseIdempotent(ctx, e.Key), "release completed")
	if _, created, _ := s.BeginIdempotent(ctx, repeat); created {
		t.Error("release deleted a completed entry")
	}

	// Release frees a running key.
	e2 := entry("k2", base)
	_, _, err = s.BeginIdempotent(ctx, e2)
	must(t, err, "begin k2")
	must(t, s.ReleaseIdempotent(ctx, e2.Key), "release")
	if _, created, err := s.BeginIdempotent(ctx, e2); err != nil || !created {
		t.Errorf("begin after release: created %v, err %v; want a new entry", created, err)
	}

	missing := entry("nope", base).Key
	wantCode(t, s.CompleteIdempotent(ctx, missing, 200, nil, nil), problem.NotFound, "complete unknown key")
}

func testIdempotencyExpiryTakeover(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	// A running entry past LockedUntil is taken over.
	run := entry("running", base)
	_, _, err := s.BeginIdempotent(ctx, run)
	must(t, err, "begin running")
	before := entry("running", base.Add(time.Minute))
	before.Fingerprint = "fp-late"
	if _, created, _ := s.BeginIdempotent(ctx, before); created {
		t.Error("took over a running entry before LockedUntil")
	}
	late := entry("running", base.Add(3*time.Minute))
	late.Fingerprint = "fp-late"
	got, created, err := s.BeginIdempotent(ctx, late)
	must(t, err, "take over")
	if !created || got.Fingerprint != "fp-late" {
		t.Errorf("take over after LockedUntil: created %v fingerprint %q; want the new entry", created, got.Fingerprint)
	}

	// A running entry whose request is alive has its lock extended.
	alive := entry("alive", base)
	_, _, err = s.BeginIdempotent(ctx, alive)
	must(t, err, "begin alive")
	must(t, s.ExtendIdempotent(ctx, alive.Key, base.Add(10*time.Minute)), "extend")
	if _, created, _ := s.BeginIdempotent(ctx, entry("alive", base.Add(5*time.Minute))); created {
		t.Error("took over a running entry whose lock was extended")
	}
	if _, created, _ := s.BeginIdempotent(ctx, entry("alive", base.Add(11*time.Minute))); !created {
		t.Error("an extended lock that lapsed was not taken over")
	}
	// Extending a complete entry, or a missing one, changes nothing.
	must(t, s.ExtendIdempotent(ctx, idempotency.Key{Tenant: "acme", Key: "missing"}, base.Add(time.Hour)), "extend missing")

	// A complete entry outlives LockedUntil, not ExpiresAt.
	done := entry("done", base)
	_, _, err = s.BeginIdempotent(ctx, done)
	must(t, err, "begin done")
	must(t, s.CompleteIdempotent(ctx, done.Key, 200, nil, []byte("ok")), "complete")
	if _, created, _ := s.BeginIdempotent(ctx, entry("done", base.Add(time.Hour))); created {
		t.Error("a complete entry was replaced before it expired")
	}
	got, created, err = s.BeginIdempotent(ctx, entry("done", base.Add(25*time.Hour)))
	must(t, err, "begin after expiry")
	if !created || got.State != idempotency.Running {
		t.Errorf("begin after expiry: created %v state %q; want a new running entry", created, got.State)
	}

	// Purge deletes what expired before t.
	old := entry("old", base.Add(-48*time.Hour))
	_, _, err = s.BeginIdempotent(ctx, old)
	must(t, err, "begin old")
	n, err := s.PurgeIdempotency(ctx, base)
	must(t, err, "purge")
	if n != 1 {
		t.Errorf("purged %d entries, want 1", n)
	}
	if _, created, _ := s.BeginIdempotent(ctx, entry("old", base.Add(-47*time.Hour))); !created {
		t.Error("purged entry still blocks its key")
	}
}

func testIdempotencyConcurrent(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var wg sync.WaitGroup
	var createdN atomic.Int32
	for range 20 {
		wg.Go(func() {
			_, created, err := s.BeginIdempotent(ctx, entry("race", base))
			if err != nil {
				t.Errorf("begin: %v", err)
			}
			if created {
				createdN.Add(1)
			}
		})
	}
	wg.Wait()
	if n := createdN.Load(); n != 1 {
		t.Errorf("%d concurrent begins created the entry, want 1", n)
	}
}
