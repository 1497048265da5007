package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/auth/oidctest"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/web/webtest"
)

// withProvider runs the harness with p as its external issuer, for the
// API's bearer tokens and the console's sign-in.
func withProvider(t *testing.T, p *oidctest.Provider) option {
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		v, err := auth.NewOIDCVerifier(t.Context(), p.URL, auth.Config{})
		if err != nil {
			t.Fatal(err)
		}
		o, err := console.NewOIDC(t.Context(), console.OIDCConfig{Issuer: p.URL, ClientID: p.ClientID, ClientSecret: p.ClientSecret})
		if err != nil {
			t.Fatal(err)
		}
		d.Verifier, d.ConsoleOIDC = v, o
	}
}

func newOIDCHarness(t *testing.T, opts ...option) (*harness, *oidctest.Provider) {
	p := oidctest.New(t)
	h := newHarness(t, append(opts, withProvider(t, p))...)
	p.Configure(func(o *oidctest.Options) { o.Redirect = h.URL + console.OIDCCallbackPath })
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
// refusal at the provider, an access token without a tenant or a subject
// and a replayed callback each show a page saying so and sign nobody in.
func TestConsoleOIDCSignIn(t *testing.T) {
	t.Parallel()
	h, p := newOIDCHarness(t)

	status, body := consoletest.Get(t, consoletest.Client(t), h.URL+"/console/signin")
	host := strings.TrimPrefix(p.URL, "http://")
	if status != 200 || !strings.Contains(body, "Sign in with "+host) {
		t.Fatalf("sign-in page: %d, want a button naming %s:\n%s", status, host, body)
	}

	// The provider is asked for openid and the scopes of the console's
	// routes (docs/console.md lists them).
	authorize, _ := redirect(t, consoletest.Client(t), h.URL+"/console/oidc/login")
	au, _ := url.Parse(authorize)
	const scopes = "openid agents:invoke agents:read agents:write audit:read schedules:read schedules:write tools:read " +
		"usage:read webhooks:read webhooks:write workflows:approve workflows:read workflows:replay"
	if got := au.Query().Get("scope"); got != scopes {
		t.Errorf("scope asked for = %q, want %q", got, scopes)
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
	sess, err := h.DB.ConsoleSession(t.Context(), session.Hash(secret), time.Now())
	if err != nil {
		t.Fatalf("the session: %v", err)
	}
	exp := p.LastAccessExpiry()
	if sess.Tenant != "acme" || sess.Subject != "carol" || strings.Join(sess.Scopes, " ") != "workflows:read agents:read" {
		t.Errorf("session = %+v", sess)
	}
	if sess.ExpiresAt.After(exp) {
		t.Errorf("the session ends %s, after its access token (%s)", sess.ExpiresAt, exp)
	}

	// The provider's tokens work at the API too; the audit shows the sign-in.
	auditor := p.AccessToken("auditor", "acme", "audit:read")
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

	p.Configure(func(o *oidctest.Options) { o.WrongChallenge = true })
	refused("a verifier the provider refuses", nil, http.StatusUnauthorized, "invalid_grant: code_verifier does not match the code_challenge")
	p.Configure(func(o *oidctest.Options) { o.WrongChallenge, o.IDAudience = false, "another-client" })
	refused("an ID token for another audience", nil, http.StatusUnauthorized, `audience &#34;agentplane-console&#34;`)
	p.Configure(func(o *oidctest.Options) { o.IDAudience, o.WrongNonce = "", true })
	refused("an ID token of another sign-in", nil, http.StatusUnauthorized, "nonce does not match")
	p.Configure(func(o *oidctest.Options) { o.WrongNonce, o.Deny = false, true })
	refused("a refusal at the provider", nil, http.StatusUnauthorized, "access_denied: the user declined")
	p.Configure(func(o *oidctest.Options) { o.Deny, o.Tenant = false, "" })
	refused("an access token without a tenant", nil, http.StatusUnauthorized, "has no tenant claim")
	p.Configure(func(o *oidctest.Options) { o.Tenant, o.NoAccessSubject = "acme", true })
	refused("an access token without a subject", nil, http.StatusUnauthorized, "names no subject")
	p.Configure(func(o *oidctest.Options) { o.NoAccessSubject = false })

	// A callback replayed (with its state cookie put back) is refused: its
	// state was redeemed.
	c = consoletest.Client(t)
	callback := toCallback(t, c, h.URL)
	cbURL, _ := url.Parse(h.URL + console.OIDCCallbackPath)
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

// TestConsoleOIDCSignInTooLate: a callback more than ten minutes after
// its login is refused, however valid the code.
func TestConsoleOIDCSignInTooLate(t *testing.T) {
	t.Parallel()
	var later atomic.Int64
	h, p := newOIDCHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) {
		d.Now = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	})
	c := consoletest.Client(t)
	callback := toCallback(t, c, h.URL)
	later.Store(int64(session.LoginTTL + time.Second))
	status, body := consoletest.Get(t, c, callback.String())
	if status != http.StatusUnauthorized || !strings.Contains(body, "took longer than 10 minutes") {
		t.Errorf("a late callback: %d\n%s", status, body)
	}
	if p.Redeemed() != 0 {
		t.Errorf("the late callback's code was exchanged")
	}
}

// TestConsoleOIDCInBrowser signs in in Chromium through the provider's
// code flow and lands on the workflows page.
func TestConsoleOIDCInBrowser(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	h, p := newOIDCHarness(t)
	tab := consoletest.Tab(t, browser)
	consoletest.Run(t, tab, "sign-in page", chromedp.Navigate(h.URL+"/console/signin"), chromedp.WaitVisible(chromedp.CSS("#oidc-signin")))
	if label := consoletest.Eval[string](t, tab, `document.getElementById('oidc-signin').textContent`); label != "Sign in with "+strings.TrimPrefix(p.URL, "http://") {
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

// TestConsoleOIDCLoginCountsOnceAgainstTheIPLimit: a sign-in's requests
// are limited by client IP as any unauthenticated request, each counted
// once.
func TestConsoleOIDCLoginCountsOnceAgainstTheIPLimit(t *testing.T) {
	t.Parallel()
	h, _ := newOIDCHarness(t, func(c *httpapi.Config, _ *httpapi.Deps) {
		c.RateLimits.IP = ratelimit.Limit{Rate: 2, Burst: 2, Period: time.Minute}
	})
	c := consoletest.Client(t)
	for i := range 2 {
		if _, status := redirect(t, c, h.URL+"/console/oidc/login"); status != http.StatusSeeOther {
			t.Fatalf("login %d: %d, want 303", i+1, status)
		}
	}
	if _, status := redirect(t, c, h.URL+"/console/oidc/login"); status != http.StatusTooManyRequests {
		t.Errorf("third login: %d, want 429", status)
	}
}
