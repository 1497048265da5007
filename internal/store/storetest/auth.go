package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
)

func testSigningKeys(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	keys, err := s.SigningKeys(ctx)
	must(t, err, "keys of an empty store")
	if len(keys) != 0 {
		t.Fatalf("empty store has %d keys", len(keys))
	}
	var wg sync.WaitGroup
	var stored atomic.Int32
	for i := range 10 {
		wg.Go(func() {
			k := auth.SigningKey{ID: fmt.Sprintf("key_%d", i), Algorithm: "ES256", PrivateJWK: []byte(`{"kty":"EC"}`), CreatedAt: base}
			ok, err := s.AddSigningKey(ctx, k, true)
			if err != nil {
				t.Errorf("add key: %v", err)
			}
			if ok {
				stored.Add(1)
			}
		})
	}
	wg.Wait()
	if n := stored.Load(); n != 1 {
		t.Fatalf("%d replicas stored their first key, want 1", n)
	}
	keys, err = s.SigningKeys(ctx)
	must(t, err, "keys")
	if len(keys) != 1 {
		t.Fatalf("%d keys after concurrent first adds, want 1", len(keys))
	}
	first := keys[0]

	rotated := auth.SigningKey{ID: "key_new", Algorithm: "ES256", PrivateJWK: []byte(`{"kty":"EC","d":"x"}`), CreatedAt: base}
	ok, err := s.AddSigningKey(ctx, rotated, false)
	must(t, err, "rotate")
	if !ok {
		t.Error("rotation did not store the key")
	}
	if ok, _ := s.AddSigningKey(ctx, auth.SigningKey{ID: "key_x", Algorithm: "ES256", PrivateJWK: []byte("{}")}, true); ok {
		t.Error("onlyIfNone stored a key although keys exist")
	}
	keys, err = s.SigningKeys(ctx)
	must(t, err, "keys after rotation")
	if diff := cmp.Diff([]auth.SigningKey{rotated, first}, keys); diff != "" {
		t.Errorf("keys newest first (-want +got):\n%s", diff)
	}
}

func testClients(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	c := auth.Client{ID: "cli_1", Tenant: "acme", Name: "ci bot", SecretHash: "9f86d0", Scopes: []string{"tools:read", "tool:*"}, CreatedAt: base}
	must(t, s.CreateClient(ctx, c, record("acme", "client.create", 1)), "create")
	got, err := s.Client(ctx, "cli_1")
	must(t, err, "client")
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("Client (-want +got):\n%s", diff)
	}
	wantCode(t, s.CreateClient(ctx, c, record("acme", "client.create", 2)), problem.Conflict, "same id")
	_, err = s.Client(ctx, "cli_nope")
	wantCode(t, err, problem.NotFound, "unknown client")

	noScopes := auth.Client{ID: "cli_2", Tenant: "acme", Name: "bare", SecretHash: "00", CreatedAt: base}
	must(t, s.CreateClient(ctx, noScopes, nil), "create without scopes")
	got, err = s.Client(ctx, "cli_2")
	must(t, err, "client without scopes")
	if len(got.Scopes) != 0 {
		t.Errorf("scopes = %v, want none", got.Scopes)
	}
	verifyOK(t, s, "acme", 1)
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "client.create"})
	must(t, err, "query")
	if len(recs) != 1 {
		t.Errorf("%d client.create records, want 1 (the conflicting create must not append)", len(recs))
	}
}

func testServerSecrets(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var wg sync.WaitGroup
	results := make([][]byte, 10)
	for i := range results {
		wg.Go(func() {
			v, err := s.ServerSecret(ctx, "viewer-hmac", fmt.Appendf(nil, "secret-%d", i))
			if err != nil {
				t.Errorf("server secret: %v", err)
			}
			results[i] = v
		})
	}
	wg.Wait()
	for i, v := range results {
		if string(v) != string(results[0]) {
			t.Fatalf("replica %d got a different secret than replica 0", i)
		}
	}
	again, err := s.ServerSecret(ctx, "viewer-hmac", []byte("late"))
	must(t, err, "server secret again")
	if string(again) != string(results[0]) {
		t.Error("a later writer replaced the secret")
	}
	other, err := s.ServerSecret(ctx, "other", []byte("o"))
	must(t, err, "other secret")
	if string(other) != "o" {
		t.Error("a second name did not store its own value")
	}
}
