package httpapi_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/web/webtest"
)

// codeFlowProvider is an OpenID provider on loopback that implements the
// authorization code flow with PKCE for one confidential client: discovery,
// a JWKS, /authorize (which consents at once and redirects back with a
// code) and /token (which checks the client secret, the redirect URI and
// the code verifier against the challenge, then signs an ID token and an
// access token).
type codeFlowProvider struct {
	t      *testing.T
	srv    *httptest.Server
	key    *rsa.PrivateKey
	client string
	secret string

	mu sync.Mutex
	// redirect is the client's registered redirect URI.
	redirect string
	// codes are the issued codes not yet exchanged.
	codes map[string]pendingCode
	// subject, tenant and scope are whom the next sign-in is for.
	subject, tenant, scope string
	// idAudience, when set, is the ID token's audience instead of the client.
	idAudience string
	// wrongChallenge records another challenge than the one sent, as if
	// the verifier the client sends later were not its own.
	wrongChallenge bool
	// deny answers /authorize with error=access_denied.
	deny bool
	// accessExp is the lifetime of the access token.
	accessExp time.Duration
	lastExp   time.Time
}

type pendingCode struct {
	challenge, nonce, redirect string
}

func newCodeFlowProvider(t *testing.T) *codeFlowProvider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &codeFlowProvider{t: t, key: key, client: "agentplane-console", secret: "console-s3cret", codes: map[string]pendingCode{},
		subject: "carol", tenant: "acme", scope: "workflows:read agents:read", accessExp: time.Hour}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		u := p.srv.URL
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token", "jwks_uri": u + "/jwks",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *codeFlowProvider) set(f func(p *codeFlowProvider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *codeFlowProvider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	defer p.mu.Unlock()
	bad := ""
	switch {
	case q.Get("client_id") != p.client:
		bad = "unknown client_id"
	case q.Get("redirect_uri") != p.redirect:
		bad = "redirect_uri is not registered: " + q.Get("redirect_uri")
	case q.Get("response_type") != "code":
		bad = "response_type must be code"
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		bad = "a S256 code_challenge is required"
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		bad = "scope must include openid"
	case q.Get("state") == "" || q.Get("nonce") == "":
		bad = "state and nonce are required"
	}
	if bad != "" { // never redirect to an unverified redirect URI
		http.Error(w, bad, http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(p.redirect)
	v := url.Values{"state": {q.Get("state")}}
	if p.deny {
		v.Set("error", "access_denied")
		v.Set("error_description", "the user declined")
	} else {
		code := randomHex(p.t)
		challenge := q.Get("code_challenge")
		if p.wrongChallenge {
			challenge = s256(randomHex(p.t))
		}
		p.codes[code] = pendingCode{challenge: challenge, nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *codeFlowProvider) token(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, desc string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		fail(400, "invalid_request", err.Error())
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != p.client || subtle.ConstantTimeCompare([]byte(secret), []byte(p.secret)) != 1 {
		fail(401, "invalid_client", "client authentication failed")
		return
	}
	code := r.PostForm.Get("code")
	pc, found := p.codes[code]
	delete(p.codes, code)
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code":
		fail(400, "unsupported_grant_type", "only authorization_code")
	case !found:
		fail(400, "invalid_grant", "unknown or used code")
	case r.PostForm.Get("redirect_uri") != pc.redirect:
		fail(400, "invalid_grant", "redirect_uri differs from the authorization request's")
	case s256(r.PostForm.Get("code_verifier")) != pc.challenge:
		fail(400, "invalid_grant", "code_verifier does not match the code_challenge")
	default:
		now := time.Now()
		aud := p.client
		if p.idAudience != "" {
			aud = p.idAudience
		}
		p.lastExp = now.Add(p.accessExp).Truncate(time.Second)
		idToken := p.sign(map[string]any{"iss": p.srv.URL, "sub": p.subject, "aud": aud, "nonce": pc.nonce,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, "JWT")
		access := p.sign(map[string]any{"iss": p.srv.URL, "sub": p.subject, "aud": auth.DefaultAudience, "tenant": p.tenant,
			"scope": p.scope, "client_id": p.client, "iat": now.Unix(), "exp": p.lastExp.Unix()}, "at+jwt")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": access, "id_token": idToken, "token_type": "Bearer",
			"expires_in": int(p.accessExp.Seconds())})
	}
}

func (p *codeFlowProvider) sign(claims map[string]any, typ string) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: p.key, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		p.t.Error(err)
		return ""
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		p.t.Error(err)
	}
	return raw
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// withProvider runs the harness with p as its external issuer, for the
// API's bearer tokens and the console's sign-in.
func withProvider(t *testing.T, p *codeFlowProvider) option {
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		v, err := auth.NewOIDCVerifier(t.Context(), p.srv.URL, auth.Config{})
		if err != nil {
			t.Fatal(err)
		}
		o, err := httpapi.NewConsoleOIDC(t.Context(), httpapi.ConsoleOIDCConfig{Issuer: p.srv.URL, ClientID: p.client, ClientSecret: p.secret})
		if err != nil {
			t.Fatal(err)
		}
		d.Verifier, d.ConsoleOIDC = v, o
	}
}

func newOIDCHarness(t *testing.T) (*harness, *codeFlowProvider) {
	p := newCodeFlowProvider(t)
	h := newHarness(t, withProvider(t, p))
	p.set(func(p *codeFlowProvider) { p.redirect = h.URL + httpapi.OIDCCallbackPath })
	return h, p
}

// redirect gets u with c (which does not follow redirects) and returns
// where the response redirects to, "" when it does not, and its status.
func redirect(t *testing.T, c *http.Client, u string) (string, int) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return "", resp.StatusCode
	}
	return loc.String(), resp.StatusCode
}

// follow gets u with c and follows up to five redirects, returning the
// last response's status, URL and body.
func follow(t *testing.T, c *http.Client, u string) (int, string, string) {
	t.Helper()
	for range 5 {
		loc, _ := redirect(t, c, u)
		if loc == "" {
			status, body := consoletest.Get(t, c, u)
			return status, u, body
		}
		u = loc
	}
	t.Fatalf("more than five redirects, at %s", u)
	return 0, "", ""
}

// toCallback starts a sign-in with c at the server at base and returns
// the callback address the provider sends the browser back to.
func toCallback(t *testing.T, c *http.Client, base string) *url.URL {
	t.Helper()
	u := base + "/console/oidc/login"
	for _, step := range []string{"login", "the provider"} {
		loc, status := redirect(t, c, u)
		if loc == "" {
			t.Fatalf("%s did not redirect: %d", step, status)
		}
		u = loc
	}
	callback, _ := url.Parse(u)
	return callback
}

// TestConsoleOIDCSignIn signs in over HTTP through the provider: the
// session has the access token's tenant, subject and scopes, ends with the
// token, and the sign-in is audited; a callback with another state, a
// verifier the provider refuses, an ID token for another audience, a
// refusal at the provider and a replayed callback each show a page saying
// so and sign nobody in.
func TestConsoleOIDCSignIn(t *testing.T) {
	h, p := newOIDCHarness(t)

	status, body := consoletest.Get(t, consoletest.Client(t), h.URL+"/console/signin")
	host := strings.TrimPrefix(p.srv.URL, "http://")
	if status != 200 || !strings.Contains(body, "Sign in with "+host) {
		t.Fatalf("sign-in page: %d, want a button naming %s:\n%s", status, host, body)
	}

	c := consoletest.Client(t)
	status, at, body := follow(t, c, h.URL+"/console/oidc/login?next=/console/agents")
	if status != 200 || at != h.URL+"/console/agents" {
		t.Fatalf("signed in: %d at %s:\n%s", status, at, body)
	}
	if !strings.Contains(body, "carol") || !strings.Contains(body, "acme") {
		t.Errorf("the agents page does not name carol of acme:\n%s", body)
	}
	// The session holds the access token's scopes: approvals need one more.
	if status, _ := consoletest.Get(t, c, h.URL+"/console/approvals"); status != http.StatusForbidden {
		t.Errorf("approvals without workflows:approve: %d, want 403", status)
	}
	var secret string
	u, _ := url.Parse(h.URL)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == console.CookieName {
			secret = ck.Value
		}
	}
	sess, err := h.DB.ConsoleSession(t.Context(), console.Hash(secret), time.Now())
	if err != nil {
		t.Fatalf("the session: %v", err)
	}
	p.mu.Lock()
	exp := p.lastExp
	p.mu.Unlock()
	if sess.Tenant != "acme" || sess.Subject != "carol" || strings.Join(sess.Scopes, " ") != "workflows:read agents:read" {
		t.Errorf("session = %+v", sess)
	}
	if sess.ExpiresAt.After(exp) {
		t.Errorf("the session ends %s, after its access token (%s)", sess.ExpiresAt, exp)
	}

	// The provider's tokens work at the API too; the audit shows the sign-in.
	auditor := p.sign(map[string]any{"iss": p.srv.URL, "sub": "auditor", "aud": auth.DefaultAudience, "tenant": "acme",
		"scope": "audit:read", "exp": time.Now().Add(time.Minute).Unix()}, "at+jwt")
	r := h.do("GET", "/v1/audit/query?action=console.signin", auditor, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"via":"oidc"`) || !strings.Contains(string(r.Body), `"carol"`) {
		t.Errorf("audit of the sign-in: %d %s", r.Status, r.Body)
	}

	// refused starts a sign-in, lets change alter the callback the
	// provider sends back, and checks the page shown.
	refused := func(name string, change func(callback *url.URL), wantStatus int, want string) {
		t.Helper()
		c := consoletest.Client(t)
		callback := toCallback(t, c, h.URL)
		if change != nil {
			change(callback)
		}
		status, body := consoletest.Get(t, c, callback.String())
		if status != wantStatus || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want %d with %q:\n%s", name, status, wantStatus, want, body)
		}
		if !strings.Contains(body, "/console/oidc/login") {
			t.Errorf("%s: the page offers no new sign-in", name)
		}
		for _, ck := range c.Jar.Cookies(u) {
			if ck.Name == console.CookieName {
				t.Errorf("%s: a session cookie was set", name)
			}
		}
	}
	refused("another state", func(cb *url.URL) {
		q := cb.Query()
		q.Set("state", strings.Repeat("0", 64))
		cb.RawQuery = q.Encode()
	}, http.StatusUnauthorized, "state does not match")

	p.set(func(p *codeFlowProvider) { p.wrongChallenge = true })
	refused("a verifier the provider refuses", nil, http.StatusUnauthorized, "invalid_grant: code_verifier does not match the code_challenge")
	p.set(func(p *codeFlowProvider) { p.wrongChallenge, p.idAudience = false, "another-client" })
	refused("an ID token for another audience", nil, http.StatusUnauthorized, `audience &#34;agentplane-console&#34;`)
	p.set(func(p *codeFlowProvider) { p.idAudience, p.deny = "", true })
	refused("a refusal at the provider", nil, http.StatusUnauthorized, "access_denied: the user declined")
	p.set(func(p *codeFlowProvider) { p.deny, p.tenant = false, "" })
	refused("an access token without a tenant", nil, http.StatusUnauthorized, "has no tenant claim")
	p.set(func(p *codeFlowProvider) { p.tenant = "acme" })

	// A callback replayed (with its state cookie put back) is refused: its
	// state was redeemed.
	c = consoletest.Client(t)
	callback := toCallback(t, c, h.URL)
	cbURL, _ := url.Parse(h.URL + httpapi.OIDCCallbackPath)
	saved := c.Jar.Cookies(cbURL)
	if status, _, _ := follow(t, c, callback.String()); status != 200 {
		t.Fatalf("first use of the callback: %d", status)
	}
	c2 := consoletest.Client(t)
	c2.Jar.SetCookies(cbURL, saved)
	if status, body := consoletest.Get(t, c2, callback.String()); status != http.StatusUnauthorized || !strings.Contains(body, "already completed") {
		t.Errorf("replayed callback: %d\n%s", status, body)
	}
}

// TestConsoleOIDCInBrowser signs in in Chromium through the provider's
// code flow and lands on the workflows page.
func TestConsoleOIDCInBrowser(t *testing.T) {
	browser := webtest.Browser(t)
	h, p := newOIDCHarness(t)
	tab := consoletest.Tab(t, browser)
	consoletest.Run(t, tab, "sign-in page", chromedp.Navigate(h.URL+"/console/signin"), chromedp.WaitVisible(chromedp.CSS("#oidc-signin")))
	if label := consoletest.Eval[string](t, tab, `document.getElementById('oidc-signin').textContent`); label != "Sign in with "+strings.TrimPrefix(p.srv.URL, "http://") {
		t.Errorf("the button reads %q", label)
	}
	consoletest.NoProblems(t, tab, "sign-in page")
	consoletest.Axe(t, tab, "sign-in page")
	consoletest.Screenshot(t, tab, "console-signin-oidc.png")
	consoletest.Run(t, tab, "sign in at the provider", chromedp.Click(chromedp.CSS("#oidc-signin")), chromedp.WaitVisible(chromedp.CSS("nav")))
	if loc := consoletest.Eval[string](t, tab, `location.pathname`); loc != "/console/workflows" {
		t.Fatalf("after signing in: %s", loc)
	}
	if who := consoletest.Eval[string](t, tab, `document.body.textContent`); !strings.Contains(who, "carol") {
		t.Errorf("the workflows page does not name carol")
	}
	consoletest.NoProblems(t, tab, "workflows")
	consoletest.Axe(t, tab, "workflows")
}
