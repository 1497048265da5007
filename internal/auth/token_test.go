package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

func TestCreateClient(t *testing.T) {
	st := newMemStore()
	rec := &audit.Record{Actor: audit.Actor{Sub: "admin"}}
	id, secret, err := CreateClient(context.Background(), st, "acme", "billing bot", []string{"tools:read", "agents:invoke", "tools:read"}, rec)
	if err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	if !strings.HasPrefix(id, "cli_") {
		t.Errorf("client id %q lacks the cli_ prefix", id)
	}
	if len(secret) != 43 {
		t.Errorf("secret has %d characters, want 43 (32 bytes base64url)", len(secret))
	}
	c := st.clients[id]
	sum := sha256.Sum256([]byte(secret))
	want := Client{ID: id, Tenant: "acme", Name: "billing bot", SecretHash: hex.EncodeToString(sum[:]), Scopes: []string{"agents:invoke", "tools:read"}, CreatedAt: c.CreatedAt}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("stored client (-want +got):\n%s", diff)
	}
	wantRec := audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "admin"}, Action: "clients.create", Resource: audit.Resource{Type: "oauth_client", ID: id}}
	if diff := cmp.Diff([]audit.Record{wantRec}, st.audits); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}

	for name, args := range map[string]struct {
		tenant string
		scopes []string
	}{
		"no tenant": {"", []string{"tools:read"}},
		"no scope":  {"acme", nil},
		"bad scope": {"acme", []string{"tools read\n"}},
		"system":    {audit.SystemTenant, []string{"audit:read"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := CreateClient(context.Background(), st, args.tenant, "", args.scopes, nil)
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.ValidationFailed {
				t.Errorf("error = %v, want validation-failed", err)
			}
		})
	}
}

type tokenReply struct {
	Status   int
	WWWAuth  string
	Cache    string
	Token    TokenResponse
	Error    string
	ErrorDsc string
}

func TestClientCredentials(t *testing.T) {
	ctx := context.Background()
	iss, v, st, _ := newTestIssuer(t)
	id, secret, err := CreateClient(ctx, st, "acme", "bot", []string{"tools:read", "agents:invoke", "tool:payments"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := iss.ClientCredentials(r.Context(), r)
		WriteTokenResponse(w, resp, err)
	}))
	t.Cleanup(srv.Close)

	type request struct {
		form        url.Values
		user, pass  string // Basic credentials, when user is set
		contentType string
		method      string
	}
	post := func(req request) tokenReply {
		t.Helper()
		if req.method == "" {
			req.method = http.MethodPost
		}
		if req.contentType == "" {
			req.contentType = "application/x-www-form-urlencoded"
		}
		hr, err := http.NewRequest(req.method, srv.URL+"/oauth/token", strings.NewReader(req.form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", req.contentType)
		if req.user != "" {
			hr.SetBasicAuth(req.user, req.pass)
		}
		res, err := srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		reply := tokenReply{Status: res.StatusCode, WWWAuth: res.Header.Get("WWW-Authenticate"), Cache: res.Header.Get("Cache-Control")}
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatalf("decode body: %v", err)
		}
		if res.StatusCode == http.StatusOK {
			reply.Token = TokenResponse{TokenType: body["token_type"].(string), ExpiresIn: int64(body["expires_in"].(float64)), Scope: body["scope"].(string), AccessToken: body["access_token"].(string)}
		} else {
			reply.Error, _ = body["error"].(string)
			reply.ErrorDsc, _ = body["error_description"].(string)
		}
		return reply
	}
	ccForm := func(kv ...string) url.Values {
		f := url.Values{"grant_type": {"client_credentials"}}
		for i := 0; i < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	allScopes := "agents:invoke tool:payments tools:read"

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantError  string
		wantScope  string
	}{
		{"basic", request{form: ccForm(), user: id, pass: secret}, 200, "", allScopes},
		{"basic with form-urlencoded id", request{form: ccForm(), user: strings.Replace(id, "_", "%5F", 1), pass: secret}, 200, "", allScopes},
		{"post", request{form: ccForm("client_id", id, "client_secret", secret)}, 200, "", allScopes},
		{"scope subset", request{form: ccForm("scope", "tools:read tool:payments"), user: id, pass: secret}, 200, "", "tool:payments tools:read"},
		{"scope beyond the client's", request{form: ccForm("scope", "tools:read tools:write"), user: id, pass: secret}, 400, "invalid_scope", ""},
		{"wrong secret basic", request{form: ccForm(), user: id, pass: secret + "x"}, 401, "invalid_client", ""},
		{"wrong secret post", request{form: ccForm("client_id", id, "client_secret", "nope")}, 401, "invalid_client", ""},
		{"unknown client", request{form: ccForm(), user: "cli_nobody", pass: secret}, 401, "invalid_client", ""},
		{"no client authentication", request{form: ccForm()}, 401, "invalid_client", ""},
		{"two authentication methods", request{form: ccForm("client_secret", secret), user: id, pass: secret}, 400, "invalid_request", ""},
		{"no grant type", request{form: url.Values{"client_id": {id}, "client_secret": {secret}}}, 400, "invalid_request", ""},
		{"password grant", request{form: url.Values{"grant_type": {"password"}}, user: id, pass: secret}, 400, "unsupported_grant_type", ""},
		{"json body", request{form: ccForm(), user: id, pass: secret, contentType: "application/json"}, 400, "invalid_request", ""},
		{"repeated parameter", request{form: url.Values{"grant_type": {"client_credentials", "client_credentials"}}, user: id, pass: secret}, 400, "invalid_request", ""},
		{"GET", request{form: ccForm(), user: id, pass: secret, method: http.MethodGet}, 400, "invalid_request", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := post(tc.req)
			if got.Status != tc.wantStatus || got.Error != tc.wantError {
				t.Fatalf("status %d error %q (%s), want %d %q", got.Status, got.Error, got.ErrorDsc, tc.wantStatus, tc.wantError)
			}
			if got.Cache != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got.Cache)
			}
			wantAuth := ""
			if tc.wantStatus == http.StatusUnauthorized {
				wantAuth = `Basic realm="agentplane"`
			}
			if got.WWWAuth != wantAuth {
				t.Errorf("WWW-Authenticate = %q, want %q", got.WWWAuth, wantAuth)
			}
			if strings.Contains(got.ErrorDsc, secret) {
				t.Error("the error description holds the secret")
			}
			if tc.wantStatus != http.StatusOK {
				return
			}
			if got.Token.TokenType != "Bearer" || got.Token.ExpiresIn != 3600 || got.Token.Scope != tc.wantScope {
				t.Errorf("token response %+v, want Bearer, 3600, %q", got.Token, tc.wantScope)
			}
			p, err := v.Verify(ctx, got.Token.AccessToken)
			if err != nil {
				t.Fatalf("issued token refused: %v", err)
			}
			want := Principal{Subject: id, ClientID: id, Tenant: "acme", Scopes: strings.Fields(tc.wantScope)}
			if diff := cmp.Diff(want, p, ignoreExpiry); diff != "" {
				t.Errorf("principal (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteTokenResponseStoreFailure(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteTokenResponse(rec, TokenResponse{}, errors.New("connection refused to 10.0.0.5"))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", rec.Code)
	}
	want := `{"error":"server_error","error_description":"the token could not be issued"}` + "\n"
	if diff := cmp.Diff(want, rec.Body.String()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	rec = httptest.NewRecorder()
	WriteTokenResponse(rec, TokenResponse{}, problem.New(problem.Unavailable, "db down"))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
}
