package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
)

// testOIDC is a small OpenID provider: discovery and a JWKS of RSA keys.
type testOIDC struct {
	srv *httptest.Server

	mu       sync.Mutex
	keys     []*rsa.PrivateKey
	kids     []string
	jwksHits int
}

func newTestOIDC(t *testing.T) *testOIDC {
	t.Helper()
	p := &testOIDC{}
	p.rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                p.srv.URL,
			"jwks_uri":                              p.srv.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.jwksHits++
		set := jose.JSONWebKeySet{}
		for n, k := range p.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: p.kids[n], Algorithm: "RS256", Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// rotate adds a new RSA key that signs from now on.
func (p *testOIDC) rotate(t *testing.T) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, k)
	p.kids = append(p.kids, "rsa-"+time.Now().Format("150405.000000"))
}

// sign signs claims with the newest key.
func (p *testOIDC) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	p.mu.Lock()
	k, kid := p.keys[len(p.keys)-1], p.kids[len(p.kids)-1]
	p.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k, KeyID: kid}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestOIDCVerifier(t *testing.T) {
	ctx := context.Background()
	p := newTestOIDC(t)
	now := time.Now()
	v, err := NewOIDCVerifier(ctx, p.srv.URL, Config{Audience: "api://agentplane"})
	if err != nil {
		t.Fatalf("NewOIDCVerifier: %v", err)
	}
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": p.srv.URL, "aud": "api://agentplane", "sub": "svc-7", "client_id": "ci",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "agents:invoke tool:*", "tenant": "acme",
		}
		edit(c)
		return c
	}

	got, err := v.Verify(ctx, p.sign(t, claims(func(map[string]any) {})))
	if err != nil {
		t.Fatalf("good token refused: %v", err)
	}
	want := Principal{Subject: "svc-7", ClientID: "ci", Tenant: "acme", Scopes: []string{"agents:invoke", "tool:*"}}
	if diff := cmp.Diff(want, got, ignoreExpiry); diff != "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}

	refused := []struct {
		name  string
		token string
		want  string
	}{
		{"wrong audience", p.sign(t, claims(func(c map[string]any) { c["aud"] = "agentplane" })), "audience mismatch"},
		{"wrong issuer", p.sign(t, claims(func(c map[string]any) { c["iss"] = "https://evil.test" })), `issuer mismatch: the token's issuer is "https://evil.test", this server's is "` + p.srv.URL + `" (mint tokens with the server's --public-url, or its --addr when it has none)`},
		{"expired beyond leeway", p.sign(t, claims(func(c map[string]any) { c["exp"] = now.Add(-2 * time.Minute).Unix() })), "token expired"},
		{"not yet valid beyond leeway", p.sign(t, claims(func(c map[string]any) { c["nbf"] = now.Add(2 * time.Minute).Unix() })), "token not yet valid"},
		{"missing tenant", p.sign(t, claims(func(c map[string]any) { delete(c, "tenant") })), "token has no tenant claim"},
		{"tampered", tamper(p.sign(t, claims(func(map[string]any) {}))), "invalid token signature or format"},
		{"alg none", handMade(t, map[string]any{"alg": "none", "kid": p.kids[0]}, claims(func(map[string]any) {}), func(string) []byte { return nil }), "invalid token signature or format"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(ctx, tc.token)
			if diff := cmp.Diff(tc.want, refusal(t, err)); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("rotated key is fetched on unknown kid", func(t *testing.T) {
		p.rotate(t)
		if _, err := v.Verify(ctx, p.sign(t, claims(func(map[string]any) {}))); err != nil {
			t.Fatalf("token of the rotated key refused: %v", err)
		}
	})
}

func TestOIDCVerifierDiscoveryFails(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	if _, err := NewOIDCVerifier(context.Background(), srv.URL, Config{}); err == nil {
		t.Fatal("NewOIDCVerifier succeeded without a discovery document")
	}
}
