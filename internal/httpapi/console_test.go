package httpapi_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/auth/session"
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
	clock = func() time.Time { return now.Add(session.LinkTTL + time.Second) }
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

// TestConsoleCancelIsTheAPICall: a reader without agents:invoke sees a
// waiting workflow without the cancel button; with it, the console's form
// cancels through the API's route, audited as workflow.cancel with the API
// call's status.
func TestConsoleCancelIsTheAPICall(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("t-big", 900.0)
	alice := h.tokenFor("alice", "agents:invoke workflows:read audit:read tool:*")
	if r := h.do("POST", "/v1/agents/refunds/invoke", alice, map[string]any{"goal": "refund t-big",
		"context": map[string]any{"transaction_id": "t-big"}}, "Prefer", "respond-async"); r.Status != 202 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	a := pendingApproval(t, h, h.tokenFor("bob", "workflows:approve"))
	page := "/console/workflows/" + a.WorkflowID

	reader := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, h.tokenFor("carol", "workflows:read")))
	if status, body := consoletest.Get(t, reader, h.URL+page); status != 200 || strings.Contains(body, "/cancel") {
		t.Errorf("without agents:invoke: %d, cancel form shown = %v", status, strings.Contains(body, "/cancel"))
	}

	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, alice))
	_, body := consoletest.Get(t, c, h.URL+page)
	if !strings.Contains(body, `action="`+page+`/cancel"`) {
		t.Fatalf("with agents:invoke the cancel form is missing:\n%s", body)
	}
	form := url.Values{"csrf": {between(body, `name="csrf" value="`, `"`)}, "idempotency_key": {"cancel-1"}, "return": {page}}
	resp, err := c.PostForm(h.URL+page+"/cancel", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page {
		t.Fatalf("cancel: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var wf struct {
		Status string `json:"status"`
	}
	h.do("GET", "/v1/workflows/"+a.WorkflowID, alice, nil).json(t, &wf)
	if wf.Status != "cancelled" {
		t.Errorf("after the console's cancel the workflow is %s", wf.Status)
	}
	var recs struct {
		Records []struct {
			Details map[string]any `json:"details"`
			Status  int            `json:"status"`
		} `json:"records"`
	}
	h.do("GET", "/v1/audit/query?action=workflow.cancel&resource_id="+a.WorkflowID, alice, nil).json(t, &recs)
	// The browser got a 303; the record carries the API handler's 200.
	if len(recs.Records) != 1 || recs.Records[0].Details["via"] != "console" || recs.Records[0].Status != http.StatusOK {
		t.Errorf("audit of the console's cancel: %+v", recs.Records)
	}
}

// TestConsoleWorkflowsVersionFilter: the list filters by a version of an
// agent, and the next page's link keeps every filter beside the cursor; a
// version without its agent is refused naming the field.
func TestConsoleWorkflowsVersionFilter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", "agents:read agents:write agents:invoke workflows:read")
	for _, v := range []map[string]any{scorer("1", "1000.0", false), scorer("2", "5000.0", true)} {
		if r := h.do("POST", "/v1/agents", admin, v); r.Status != 201 {
			t.Fatalf("deploy: %d %s", r.Status, r.Body)
		}
	}
	for _, target := range []string{"scorer@1", "scorer@2", "scorer@1", "scorer@2", "scorer@2"} {
		if r := h.do("POST", "/v1/agents/"+target+"/invoke", admin, map[string]any{"goal": "score the refund",
			"context": map[string]any{"amount": 5}}); r.Status != 200 {
			t.Fatalf("invoke %s: %d %s", target, r.Status, r.Body)
		}
	}
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, admin))

	status, page := consoletest.Get(t, c, h.URL+"/console/workflows?agent=scorer&version=2&status=completed&q=refund&limit=2")
	if status != 200 || strings.Count(page, `title="scorer@2">scorer@2</td>`) != 2 || strings.Contains(page, "scorer@1") {
		t.Fatalf("first page of version 2: %d\n%s", status, page)
	}
	if !strings.Contains(page, `name="version" value="2"`) {
		t.Errorf("the form does not show the version filter it applied")
	}
	next, err := url.Parse(html.UnescapeString(between(page, `<a rel="next" href="`, `"`)))
	if err != nil || next.Path != "/console/workflows" {
		t.Fatalf("next-page link %v: %v", next, err)
	}
	for k, want := range map[string]string{"agent": "scorer", "version": "2", "status": "completed", "q": "refund", "limit": "2"} {
		if got := next.Query().Get(k); got != want {
			t.Errorf("next-page link %s = %q, want %q", k, got, want)
		}
	}
	if next.Query().Get("cursor") == "" {
		t.Errorf("next-page link has no cursor: %s", next)
	}
	status, page = consoletest.Get(t, c, h.URL+next.String())
	if status != 200 || strings.Count(page, `title="scorer@2">scorer@2</td>`) != 1 || strings.Contains(page, "scorer@1") || strings.Contains(page, `rel="next"`) {
		t.Errorf("second page of version 2: %d\n%s", status, page)
	}

	status, page = consoletest.Get(t, c, h.URL+"/console/workflows?version=2")
	if status != http.StatusUnprocessableEntity || !strings.Contains(page, "version: needs agent") {
		t.Errorf("version without agent: %d\n%s", status, page)
	}
}
