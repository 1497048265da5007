// Package consoletest drives the web console in tests: a sign-in link from
// the API, a cookie-keeping HTTP client signed in with it, and, in Debian's
// headless Chromium (internal/web/webtest), tabs that record Content
// Security Policy violations and script errors, an axe-core accessibility
// check, and screenshots.
package consoletest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/web/webtest"
)

// Link asks the server at base for a one-time sign-in link with token.
func Link(t *testing.T, base, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/console/links", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("sign-in link: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("sign-in link: status %d: %s", resp.StatusCode, body)
	}
	var v struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.URL == "" {
		t.Fatalf("sign-in link: %s (%v)", body, err)
	}
	return v.URL
}

// Client returns an HTTP client with a cookie jar that does not follow
// redirects, so tests see each 303.
func Client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// SignInHTTP follows a sign-in link with a new Client and returns it,
// signed in.
func SignInHTTP(t *testing.T, link string) *http.Client {
	t.Helper()
	c := Client(t)
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: status %d, want 303", resp.StatusCode)
	}
	return c
}

// Get fetches a console page with c and returns its status and body.
func Get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// recordProblems makes every document a tab loads collect its CSP
// violations and uncaught script errors in window.consoleProblems.
const recordProblems = `window.consoleProblems = [];
document.addEventListener('securitypolicyviolation', e => window.consoleProblems.push('CSP ' + e.violatedDirective + ' ' + e.blockedURI));
window.addEventListener('error', e => window.consoleProblems.push('error ' + e.message));`

// Tab opens a tab of browser (webtest.Browser) that records CSP violations
// and script errors; each step of a test should end with NoProblems.
func Tab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	return openTab(t, browser)
}

// Person opens a tab as Tab does, in a browser context of its own: its
// cookies are its own, as a second person's browser would be, so signing
// in there leaves the other tabs' session alone.
func Person(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	return openTab(t, browser, chromedp.WithNewBrowserContext())
}

func openTab(t *testing.T, browser context.Context, opts ...chromedp.ContextOption) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, opts...)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelTimeout)
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordProblems})
		return err
	}))
	if err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return ctx
}

// Run runs browser actions, failing the test with what on error.
func Run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v (the tab shows %s)", what, err, describe(ctx))
	}
}

// describe says where a tab is and what it shows, for a failure message.
func describe(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + ': ' + (document.body ? document.body.innerText.slice(0, 600) : '')`))
	if err != nil {
		return "nothing that can be read: " + err.Error()
	}
	return v
}

// Eval evaluates a JavaScript expression in the tab's page.
func Eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// NoProblems fails the test if the page reported a CSP violation or a
// script error.
func NoProblems(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	got := Eval[[]string](t, ctx, `window.consoleProblems || []`)
	if len(got) > 0 {
		t.Errorf("%s: the page reported %s", where, strings.Join(got, "; "))
	}
}

// AxeEnv names the file axe.min.js (npm axe-core) that Axe injects.
const AxeEnv = "AGENTPLANE_TEST_AXE_CORE"

// Axe runs axe-core on the tab's page and fails the test on any serious or
// critical violation. Without AGENTPLANE_TEST_AXE_CORE it fails under CI
// and skips the check (with a log line) elsewhere.
func Axe(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	path := os.Getenv(AxeEnv)
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is unset: .ci/run installs axe-core from npm", AxeEnv)
		}
		t.Logf("%s: accessibility check skipped: %s is unset (npm install axe-core; set it to axe.min.js)", where, AxeEnv)
		return
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read axe-core: %v", err)
	}
	// The script is evaluated through the DevTools protocol, which the
	// page's CSP does not govern.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](string(src)+";1")); err != nil {
		t.Fatalf("inject axe-core: %v", err)
	}
	type violation struct {
		ID, Impact, Help string
		Nodes            []struct {
			Target []any `json:"target"`
		}
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]violation](
		`axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical'))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe-core: %v", err)
	}
	for _, v := range out {
		var where2 []string
		for _, n := range v.Nodes {
			where2 = append(where2, fmt.Sprint(n.Target...))
		}
		t.Errorf("%s: accessibility (%s) %s: %s at %s", where, v.Impact, v.ID, v.Help, strings.Join(where2, ", "))
	}
}

// DocsEnv names a directory where Screenshot also writes its PNGs (the
// docs' images: AGENTPLANE_CONSOLE_SCREENSHOTS=$PWD/docs/img).
const DocsEnv = "AGENTPLANE_CONSOLE_SCREENSHOTS"

// Screenshot saves the tab's viewport as name (a .png) among the test's
// artifacts, and in $AGENTPLANE_CONSOLE_SCREENSHOTS when set.
func Screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	webtest.WriteArtifact(t, name, png)
	if dir := os.Getenv(DocsEnv); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
	}
}
