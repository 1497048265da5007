package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

func TestMintedTokenVerifies(t *testing.T) {
	iss, v, _, _ := newTestIssuer(t)
	raw := mint(t, iss, MintRequest{Tenant: "acme", Subject: "alice", ClientID: "cli_1", Scopes: []string{"tools:read", "tool:payments"}})
	got, err := v.Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Principal{Subject: "alice", ClientID: "cli_1", Tenant: "acme", Scopes: []string{"tools:read", "tool:payments"}}
	if diff := cmp.Diff(want, got, ignoreExpiry); diff != "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}
}

func TestMintDefaults(t *testing.T) {
	iss, v, _, clk := newTestIssuer(t)
	raw := mint(t, iss, MintRequest{Tenant: "acme"})
	got, err := v.Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Principal{Subject: "operator", Tenant: "acme", Scopes: []string{}}
	if diff := cmp.Diff(want, got, ignoreExpiry); diff != "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}
	clk.Advance(DefaultTokenTTL + MaxLeeway + time.Second)
	if _, err := v.Verify(context.Background(), raw); err == nil {
		t.Error("token accepted after its default lifetime")
	}
}

func TestMintRefusesBadRequests(t *testing.T) {
	iss, _, _, _ := newTestIssuer(t)
	for name, req := range map[string]MintRequest{
		"no tenant":  {Scopes: []string{"tools:read"}},
		"bad scope":  {Tenant: "acme", Scopes: []string{`a"b`}},
		"long ttl":   {Tenant: "acme", TTL: MaxTokenTTL + time.Second},
		"negative":   {Tenant: "acme", TTL: -time.Second},
		"space in s": {Tenant: "acme", Scopes: []string{"a b"}},
		"system":     {Tenant: "_system", Scopes: []string{"audit:read", "tools:write"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := iss.Mint(context.Background(), req)
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.ValidationFailed {
				t.Errorf("Mint error = %v, want validation-failed", err)
			}
		})
	}
}

func TestEmbeddedVerifierRefuses(t *testing.T) {
	ctx := context.Background()
	iss, v, st, clk := newTestIssuer(t)
	now := clk.Now()
	good := MintRequest{Tenant: "acme", Subject: "alice", Scopes: []string{"tools:read"}}
	k := currentKey(t, st)

	otherAud, err := NewIssuer(ctx, st, testIssuer, clk.Now, WithAudience("someone-else"))
	if err != nil {
		t.Fatal(err)
	}
	otherIss, err := NewIssuer(ctx, st, "https://evil.test", clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	future := &clock{t: now.Add(2 * time.Minute)}
	futureIss, err := NewIssuer(ctx, st, testIssuer, future.Now)
	if err != nil {
		t.Fatal(err)
	}
	withClaims := func(edit func(map[string]any)) string {
		c := validClaims(now)
		edit(c)
		return signClaims(t, k, "at+jwt", c)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(k.public.Key)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	pubJWK, err := k.public.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	hs256 := func(secret []byte) string {
		return handMade(t, map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": k.id}, validClaims(now), func(in string) []byte {
			m := hmac.New(sha256.New, secret)
			m.Write([]byte(in))
			return m.Sum(nil)
		})
	}

	tests := []struct {
		name  string
		token string
		clock time.Duration // advance of the verifier's clock
		want  string
	}{
		{"empty", "", 0, "malformed token"},
		{"garbage", "not-a-token", 0, "malformed token"},
		{"whitespace", strings.Replace(mint(t, iss, good), ".", ". ", 1), 0, "malformed token"},
		{"tampered signature", tamper(mint(t, iss, good)), 0, "invalid token signature"},
		{"tampered payload", tamperPayload(withClaims(func(map[string]any) {})), 0, "invalid token signature"},
		{"expired", mint(t, iss, MintRequest{Tenant: "acme", TTL: time.Minute}), time.Minute + MaxLeeway + time.Second, "token expired"},
		{"not yet valid", mint(t, futureIss, good), 0, "token not yet valid"},
		{"wrong audience", mint(t, otherAud, good), 0, "audience mismatch"},
		{"wrong issuer", mint(t, otherIss, good), 0, `issuer mismatch: the token's issuer is "https://evil.test", this server's is "https://agentplane.test" (mint tokens with the server's --public-url, or its --addr when it has none)`},
		{"missing tenant", withClaims(func(c map[string]any) { delete(c, "tenant") }), 0, "token has no tenant claim"},
		{"empty tenant", withClaims(func(c map[string]any) { c["tenant"] = "" }), 0, "token has no tenant claim"},
		{"tenant not a string", withClaims(func(c map[string]any) { c["tenant"] = 7 }), 0, "token has no tenant claim"},
		{"system tenant", withClaims(func(c map[string]any) { c["tenant"] = "_system" }), 0, "token's tenant is reserved"},
		{"tenant not text", withClaims(func(c map[string]any) { c["tenant"] = "acme\x00" }), 0, "token's tenant is not valid text"},
		{"missing exp", withClaims(func(c map[string]any) { delete(c, "exp") }), 0, "token has no valid exp claim"},
		{"exp a string", withClaims(func(c map[string]any) { c["exp"] = "tomorrow" }), 0, "token has no valid exp claim"},
		{"no subject", withClaims(func(c map[string]any) { delete(c, "sub") }), 0, "token has no subject"},
		{"scope a number", withClaims(func(c map[string]any) { c["scope"] = 3 }), 0, "token has an invalid scope claim"},
		{"iat in the future", withClaims(func(c map[string]any) { c["iat"] = now.Add(5 * time.Minute).Unix() }), 0, "token issued in the future"},
		{"no typ", signClaims(t, k, "", validClaims(now)), 0, "token is not an access token (typ)"},
		{"id token typ", signClaims(t, k, "JWT", validClaims(now)), 0, "token is not an access token (typ)"},
		{"alg none", handMade(t, map[string]any{"alg": "none", "typ": "at+jwt", "kid": k.id}, validClaims(now), func(string) []byte { return nil }), 0, "malformed token or algorithm not allowed"},
		{"HS256 with the public key PEM", hs256(pubPEM), 0, "malformed token or algorithm not allowed"},
		{"HS256 with the public JWK", hs256(pubJWK), 0, "malformed token or algorithm not allowed"},
		{"unknown kid", handMade(t, map[string]any{"alg": "ES256", "typ": "at+jwt", "kid": "key_nope"}, validClaims(now), func(string) []byte { return make([]byte, 64) }), 0, "unknown signing key"},
		{"no kid", handMade(t, map[string]any{"alg": "ES256", "typ": "at+jwt"}, validClaims(now), func(string) []byte { return make([]byte, 64) }), 0, "token has no key id"},
		{"alg not the key's", handMade(t, map[string]any{"alg": "RS256", "typ": "at+jwt", "kid": k.id}, validClaims(now), func(string) []byte { return make([]byte, 256) }), 0, "algorithm does not match the key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vclk := &clock{t: now.Add(tc.clock)}
			v := NewEmbeddedVerifier(st, Config{Issuer: testIssuer, Now: vclk.Now})
			_, err := v.Verify(ctx, tc.token)
			if diff := cmp.Diff(tc.want, refusal(t, err)); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Error("the error echoes the token")
			}
		})
	}
	// The same verifier accepts a good token: the refusals are not a broken setup.
	if _, err := v.Verify(ctx, mint(t, iss, good)); err != nil {
		t.Fatalf("good token refused: %v", err)
	}
}

func TestLeeway(t *testing.T) {
	iss, _, st, clk := newTestIssuer(t)
	raw := mint(t, iss, MintRequest{Tenant: "acme", TTL: time.Minute})
	tests := []struct {
		name    string
		leeway  time.Duration
		advance time.Duration
		ok      bool
	}{
		{"default leeway covers 60 s past exp", 0, time.Minute + 59*time.Second, true},
		{"default leeway ends at 60 s", 0, time.Minute + 61*time.Second, false},
		{"leeway is capped at 60 s", time.Hour, time.Minute + 61*time.Second, false},
		{"negative leeway means none", -1, time.Minute + time.Second, false},
		{"smaller leeway", 10 * time.Second, time.Minute + 9*time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vclk := &clock{t: clk.Now().Add(tc.advance)}
			v := NewEmbeddedVerifier(st, Config{Issuer: testIssuer, Leeway: tc.leeway, Now: vclk.Now})
			_, err := v.Verify(context.Background(), raw)
			if got := err == nil; got != tc.ok {
				t.Errorf("accepted = %v, want %v (err %v)", got, tc.ok, err)
			}
		})
	}
}

func TestCustomTenantClaimAndAudience(t *testing.T) {
	_, _, st, clk := newTestIssuer(t)
	c := validClaims(clk.Now())
	delete(c, "tenant")
	c["org"] = "acme"
	c["aud"] = "api://mine"
	c["scope"] = []string{"tools:read", "agents:read"}
	raw := signClaims(t, currentKey(t, st), "application/at+jwt", c)
	v := NewEmbeddedVerifier(st, Config{Issuer: testIssuer + "/", Audience: "api://mine", TenantClaim: "org", Now: clk.Now})
	got, err := v.Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Principal{Subject: "user-1", Tenant: "acme", Scopes: []string{"tools:read", "agents:read"}}
	if diff := cmp.Diff(want, got, ignoreExpiry); diff != "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}
}

func TestStoreFailureIsUnavailable(t *testing.T) {
	iss, _, st, clk := newTestIssuer(t)
	raw := mint(t, iss, MintRequest{Tenant: "acme"})
	st.fail = errors.New("disk on fire")
	v := NewEmbeddedVerifier(st, Config{Issuer: testIssuer, Now: clk.Now})
	_, err := v.Verify(context.Background(), raw)
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.Unavailable {
		t.Fatalf("error = %v, want unavailable", err)
	}
}

// tamperPayload changes a character of the token's payload.
func tamperPayload(raw string) string {
	i := strings.IndexByte(raw, '.') + 10
	c := byte('A')
	if raw[i] == 'A' {
		c = 'B'
	}
	return raw[:i] + string(c) + raw[i+1:]
}

// TestSystemTenantMayOnlyReadItsAudit checks that a token of the reserved
// tenant is accepted with audit:read alone, so an operator can read and
// verify the chain of unauthenticated requests, and nothing else.
func TestSystemTenantMayOnlyReadItsAudit(t *testing.T) {
	iss, v, _, _ := newTestIssuer(t)
	p, err := v.Verify(context.Background(), mint(t, iss, MintRequest{Tenant: audit.SystemTenant, Subject: "operator", Scopes: []string{"audit:read"}}))
	if err != nil || p.Tenant != audit.SystemTenant {
		t.Fatalf("a _system token with audit:read: %+v, %v; want accepted", p, err)
	}
	if _, err := iss.Mint(context.Background(), MintRequest{Tenant: audit.SystemTenant, Subject: "operator", Scopes: []string{"audit:read", "agents:invoke"}}); !problem.Is(err, problem.ValidationFailed) {
		t.Errorf("a _system token with more than audit:read: %v, want refused", err)
	}
}
