package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/httpapi"
)

// TestConsoleSignInLink: a link signs in once, to pages with the console's
// headers; a reused, unknown or expired link is refused with a page that
// says which; without a session a page sends the reader to sign in.
func TestConsoleSignInLink(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	link := consoletest.Link(t, h.URL, h.token("acme", "workflows:read workflows:approve"))
	if !strings.HasPrefix(link, h.URL+"/console/signin?link=") {
		t.Fatalf("link = %s", link)
	}
	c := consoletest.SignInHTTP(t, link)
	u, _ := url.Parse(h.URL)
	var cookie *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == console.CookieName {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie after sign-in")
	}

	resp, err := c.Get(h.URL + "/console/workflows")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("workflows page: %d", resp.StatusCode)
	}
	for k, want := range map[string]string{"Cache-Control": "no-store", "Content-Security-Policy": console.ContentSecurityPolicy} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}

	status, body := consoletest.Get(t, consoletest.Client(t), link)
	if status != http.StatusGone || !strings.Contains(body, "already used") {
		t.Errorf("reused link: %d %s", status, body)
	}
	status, body = consoletest.Get(t, consoletest.Client(t), h.URL+"/console/signin?link="+strings.Repeat("ab", 32))
	if status != http.StatusNotFound || !strings.Contains(body, "not valid") {
		t.Errorf("unknown link: %d %s", status, body)
	}

	resp, err = consoletest.Client(t).Get(h.URL + "/console/approvals")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/signin?next=") {
		t.Errorf("signed out: %d Location %q", resp.StatusCode, loc)
	}
}

// TestConsoleExpiredLink: a link used after its 60 seconds is refused.
func TestConsoleExpiredLink(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	h := newHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) { d.Now = func() time.Time { return clock() } })
	link := consoletest.Link(t, h.URL, h.token("acme", "workflows:read"))
	clock = func() time.Time { return now.Add(console.LinkTTL + time.Second) }
	status, body := consoletest.Get(t, consoletest.Client(t), link)
	if status != http.StatusGone || !strings.Contains(body, "expired") {
		t.Errorf("expired link: %d %s", status, body)
	}
}

// TestConsoleCSRF: a form without its session's CSRF token is refused and
// changes nothing; with it, sign-out ends the session.
func TestConsoleCSRF(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, h.token("acme", "workflows:read")))
	for _, forged := range []string{"", strings.Repeat("0", 32)} {
		resp, err := c.PostForm(h.URL+"/console/signout", url.Values{"csrf": {forged}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("sign-out with csrf %q: %d, want 403", forged, resp.StatusCode)
		}
	}
	if status, _ := consoletest.Get(t, c, h.URL+"/console/workflows"); status != 200 {
		t.Fatalf("after forged sign-outs the session should stand: %d", status)
	}
	_, page := consoletest.Get(t, c, h.URL+"/console/workflows")
	token := between(page, `name="csrf" value="`, `"`)
	resp, err := c.PostForm(h.URL+"/console/signout", url.Values{"csrf": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if status, _ := consoletest.Get(t, c, h.URL+"/console/workflows"); status != http.StatusSeeOther {
		t.Errorf("after sign-out: %d, want 303 to sign in", status)
	}
}

// between returns the text of s after the first before, up to after.
func between(s, before, after string) string {
	_, rest, ok := strings.Cut(s, before)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, after)
	return v
}
