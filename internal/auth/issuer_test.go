package auth

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
)

func kids(set jose.JSONWebKeySet) []string {
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	return out
}

func TestRotation(t *testing.T) {
	ctx := context.Background()
	iss, v, st, clk := newTestIssuer(t)
	first := st.keys[0].ID
	before := mint(t, iss, MintRequest{Tenant: "acme"})

	second, err := iss.Rotate(ctx)
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	after := mint(t, iss, MintRequest{Tenant: "acme"})
	for name, raw := range map[string]string{"previous key": before, "current key": after} {
		if _, err := v.Verify(ctx, raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	set, err := iss.JWKS(ctx)
	if err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	if diff := cmp.Diff([]string{second, first}, kids(set)); diff != "" {
		t.Errorf("JWKS kids (-want +got):\n%s", diff)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() || k.Algorithm != "ES256" || k.Use != "sig" {
			t.Errorf("published key %s: public %v alg %q use %q", k.KeyID, k.IsPublic(), k.Algorithm, k.Use)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"d"`) {
		t.Error("the JWKS holds private key material")
	}

	// A third key drops the first from the JWKS and, once caches expire,
	// from what verifiers accept.
	third, err := iss.Rotate(ctx)
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	set, err = iss.JWKS(ctx)
	if err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	if diff := cmp.Diff([]string{third, second}, kids(set)); diff != "" {
		t.Errorf("JWKS kids after two rotations (-want +got):\n%s", diff)
	}
	clk.Advance(verifierMaxAge + time.Second)
	_, err = v.Verify(ctx, before)
	if diff := cmp.Diff("unknown signing key", refusal(t, err)); diff != "" {
		t.Errorf("token of a retired key (-want +got):\n%s", diff)
	}
	if _, err := v.Verify(ctx, after); err != nil {
		t.Errorf("token of the previous key: %v", err)
	}
}

func TestKeyFromAnotherReplica(t *testing.T) {
	ctx := context.Background()
	iss, v, st, clk := newTestIssuer(t)
	if _, err := v.Verify(ctx, mint(t, iss, MintRequest{Tenant: "acme"})); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// Replica B shares the store: it reuses the key, then rotates.
	replica, err := NewIssuer(ctx, st, testIssuer, clk.Now)
	if err != nil {
		t.Fatalf("NewIssuer: %v", err)
	}
	if len(st.keys) != 1 {
		t.Fatalf("second replica added a key: %d keys", len(st.keys))
	}
	if _, err := replica.Rotate(ctx); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	raw := mint(t, replica, MintRequest{Tenant: "acme"})

	// Right after the verifier's last load, an unknown kid does not reload.
	reads := st.reads()
	_, err = v.Verify(ctx, raw)
	if diff := cmp.Diff("unknown signing key", refusal(t, err)); diff != "" {
		t.Errorf("within the refresh interval (-want +got):\n%s", diff)
	}
	if got := st.reads(); got != reads {
		t.Errorf("store read %d times within the refresh interval", got-reads)
	}
	clk.Advance(verifierMinRefresh)
	if _, err := v.Verify(ctx, raw); err != nil {
		t.Fatalf("key of another replica refused after the refresh interval: %v", err)
	}
	// Replica A's own issuer signs with the new key once its cache expires.
	clk.Advance(issuerMaxAge)
	set, err := iss.JWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(set.Keys); got != 2 {
		t.Errorf("JWKS of replica A has %d keys, want 2", got)
	}
}

func TestUnknownKidFloodReadsStoreRarely(t *testing.T) {
	ctx := context.Background()
	_, v, st, clk := newTestIssuer(t)
	bogus := handMade(t, map[string]any{"alg": "ES256", "typ": "at+jwt", "kid": "key_bogus"}, validClaims(clk.Now()), func(string) []byte { return make([]byte, 64) })
	before := st.reads()
	for range 100 {
		if _, err := v.Verify(ctx, bogus); err == nil {
			t.Fatal("bogus token accepted")
		}
	}
	if got := st.reads() - before; got != 1 { // the verifier's first load
		t.Errorf("store read %d times for 100 unknown kids, want 1", got)
	}
}

func TestFailedKeyReloadIsRetriedAfterABackoff(t *testing.T) {
	ctx := context.Background()
	iss, v, st, clk := newTestIssuer(t)
	raw := mint(t, iss, MintRequest{Tenant: "acme", Subject: "alice"})
	if _, err := v.Verify(ctx, raw); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	bogus := handMade(t, map[string]any{"alg": "ES256", "typ": "at+jwt", "kid": "key_bogus"}, validClaims(clk.Now()), func(string) []byte { return make([]byte, 64) })
	setFail := func(err error) {
		st.mu.Lock()
		st.fail = err
		st.mu.Unlock()
	}
	setFail(errors.New("database unreachable"))
	clk.Advance(verifierMaxAge + time.Second)

	before := st.reads()
	for range 50 {
		if _, err := v.Verify(ctx, raw); err != nil {
			t.Fatalf("Verify with cached keys during a store failure: %v", err)
		}
		if _, err := v.Verify(ctx, bogus); err == nil {
			t.Fatal("bogus token accepted")
		}
	}
	if got := st.reads() - before; got != 1 {
		t.Errorf("store read %d times during one backoff after a failed reload, want 1", got)
	}

	clk.Advance(reloadRetry)
	if _, err := v.Verify(ctx, raw); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got := st.reads() - before; got != 2 {
		t.Errorf("store read %d times once the backoff passed, want 2", got)
	}

	setFail(nil)
	clk.Advance(reloadRetry)
	for range 10 {
		if _, err := v.Verify(ctx, raw); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	if got := st.reads() - before; got != 3 {
		t.Errorf("store read %d times after it recovered, want 3 (one reload, then the cache)", got)
	}
}

func TestReplicasStartingTogetherAgree(t *testing.T) {
	ctx := context.Background()
	st, clk := newMemStore(), newClock()
	var wg sync.WaitGroup
	issuers := make([]*Issuer, 8)
	for n := range issuers {
		wg.Go(func() {
			iss, err := NewIssuer(ctx, st, testIssuer, clk.Now)
			if err != nil {
				t.Errorf("NewIssuer: %v", err)
			}
			issuers[n] = iss
		})
	}
	wg.Wait()
	if len(st.keys) != 1 {
		t.Fatalf("store holds %d keys, want 1", len(st.keys))
	}
	v := NewEmbeddedVerifier(st, Config{Issuer: testIssuer, Now: clk.Now})
	for n, iss := range issuers {
		if _, err := v.Verify(ctx, mint(t, iss, MintRequest{Tenant: "acme"})); err != nil {
			t.Errorf("replica %d: %v", n, err)
		}
	}
}

func TestNewIssuerRefusesBadURL(t *testing.T) {
	for _, u := range []string{"", "agentplane.test", "ftp://x", "https://x/?q=1", "https://x/#f"} {
		if _, err := NewIssuer(context.Background(), newMemStore(), u, nil); err == nil {
			t.Errorf("NewIssuer(%q) succeeded", u)
		}
	}
}

func TestDiscovery(t *testing.T) {
	st := newMemStore()
	iss, err := NewIssuer(context.Background(), st, "https://ap.example.com/", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := iss.Discovery()
	want := DiscoveryDocument{
		Issuer:                            "https://ap.example.com",
		JWKSURI:                           "https://ap.example.com/.well-known/jwks.json",
		TokenEndpoint:                     "https://ap.example.com/oauth/token",
		GrantTypesSupported:               []string{"client_credentials"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post"},
		IDTokenSigningAlgValuesSupported:  []string{"ES256"},
		ScopesSupported: []string{
			"tools:write", "tools:read", "agents:write", "agents:read", "agents:invoke",
			"workflows:read", "workflows:replay", "workflows:approve", "mcp:use", "audit:read", "models:read", "models:write", "usage:read", "schedules:write", "schedules:read", "webhooks:write", "webhooks:read", "workflows:delete", "tool:*",
		},
		SubjectTypesSupported: []string{"public"},
	}
	if diff := cmp.Diff(want, got, ignoreExpiry); diff != "" {
		t.Errorf("discovery (-want +got):\n%s", diff)
	}
}
