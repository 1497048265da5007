package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
)

func TestTokensFromTheCLIAndTheTokenEndpointAreAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if r := h.do("GET", "/v1/audit/query", h.token("acme", "audit:read"), nil); r.Status != 200 {
		t.Fatalf("minted token: %d %s", r.Status, r.Body)
	}

	rec := &audit.Record{Time: time.Now(), Tenant: "acme", Action: "client.create", Outcome: audit.Success}
	id, secret, err := auth.CreateClient(context.Background(), h.DB, "acme", "ci", []string{"audit:read", "tools:read"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}.Encode()
	r := h.do("POST", "/oauth/token", "", form, "Content-Type", "application/x-www-form-urlencoded")
	if r.Status != 200 {
		t.Fatalf("token endpoint: %d %s", r.Status, r.Body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	r.json(t, &tok)
	if tok.TokenType != "Bearer" || tok.AccessToken == "" {
		t.Fatalf("token response %s", r.Body)
	}
	if r := h.do("GET", "/v1/audit/query?actor="+id, tok.AccessToken, nil); r.Status != 200 {
		t.Fatalf("client token: %d %s", r.Status, r.Body)
	} else if strings.Contains(string(r.Body), secret) || strings.Contains(string(r.Body), tok.AccessToken) {
		t.Fatal("an audit record holds the client secret or the token")
	}
}

func TestBadTokensAreUnauthenticated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	good := h.token("acme", "audit:read")

	past, err := auth.NewIssuer(ctx, h.DB, h.URL, func() time.Time { return time.Now().Add(-3 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	expired, err := past.Mint(ctx, auth.MintRequest{Tenant: "acme", Subject: "alice", Scopes: []string{"audit:read"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.NewIssuer(ctx, h.DB, h.URL, time.Now, auth.WithAudience("someone-else"))
	if err != nil {
		t.Fatal(err)
	}
	wrongAud, err := other.Mint(ctx, auth.MintRequest{Tenant: "acme", Subject: "alice", Scopes: []string{"audit:read"}})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + parts[1] + "." + flip(parts[2])
	enc := base64.RawURLEncoding.EncodeToString
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	none := enc([]byte(`{"alg":"none","typ":"at+jwt"}`)) + "." + enc(payload) + "."
	var claims map[string]any
	json.Unmarshal(payload, &claims)
	claims["tenant"] = "other"
	forged, _ := json.Marshal(claims)
	swapped := parts[0] + "." + enc(forged) + "." + parts[2]

	for _, tc := range []struct{ name, token string }{
		{"missing", ""},
		{"garbage", "not-a-jwt"},
		{"tampered signature", tampered},
		{"tampered claims", swapped},
		{"expired", expired},
		{"wrong audience", wrongAud},
		{"alg none", none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", "/v1/audit/query", tc.token, nil)
			if r.Status != 401 {
				t.Fatalf("status %d, want 401: %s", r.Status, r.Body)
			}
			if got := r.Header.Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			d := r.problem(t)
			if !strings.HasSuffix(d.Type, "/unauthenticated") || d.Code != "unauthenticated" {
				t.Errorf("problem %+v", d)
			}
		})
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[len(b)/2] == 'A' {
		b[len(b)/2] = 'B'
	} else {
		b[len(b)/2] = 'A'
	}
	return string(b)
}

func TestMissingScopeIsForbiddenAndNamesTheScope(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do("GET", "/v1/audit/verify", h.token("acme", "tools:read"), nil)
	if r.Status != 403 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if got, want := r.Header.Get("WWW-Authenticate"), `Bearer error="insufficient_scope", scope="audit:read"`; got != want {
		t.Errorf("WWW-Authenticate = %q, want %q", got, want)
	}
	if d := r.problem(t); d.Code != "insufficient-scope" || !strings.Contains(d.Detail, "audit:read") {
		t.Errorf("problem %+v", d)
	}
}
