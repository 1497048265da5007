package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/web/webtest"
)

// viewerServer serves the fixture replay's page at /replays/{id} to a
// correctly signed link, 404 otherwise, and the assets, with the headers
// of the real server.
func viewerServer(t *testing.T, s *Signer, r *replay.Replay) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET "+AssetsPath, Assets())
	mux.HandleFunc("GET /replays/{id}", func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("id")
		tools, err := s.Verify(KindReplay, id, req.URL.Query())
		if err != nil || id != r.ID {
			http.NotFound(w, req)
			return
		}
		PageHeaders(w.Header())
		if err := RenderReplay(w, ReplayPage{Replay: r, Agent: "refunds", Goal: "Refund order ord_8812: the hinge arrived broken", Tools: tools}); err != nil {
			t.Errorf("render: %v", err)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// recordCSPViolations makes every document the tab loads collect the
// Content-Security-Policy violations it reports in window.cspViolations.
const recordCSPViolations = `window.cspViolations = [];
document.addEventListener('securitypolicyviolation', e => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));`

// tab opens a new tab of the browser that records CSP violations.
func tab(t *testing.T, browser context.Context, setup ...chromedp.Action[chromedp.Void]) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(cancelTimeout)
	steps := append([]chromedp.Action[chromedp.Void]{
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordCSPViolations})
			return err
		}),
	}, setup...)
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return ctx
}

// run runs an action that returns a value, failing the test on error.
func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func TestReplayPageInBrowser(t *testing.T) {
	browser := webtest.Browser(t)
	r := fixtureReplay(t)
	s, err := NewSigner(testKey, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := viewerServer(t, s, r)
	link := s.ReplayURL(srv.URL, r.ID, []string{"orders", "payments"})

	t.Run("desktop", func(t *testing.T) {
		ctx := tab(t, browser)
		resp := run(t, ctx, "open the signed link", chromedp.NavigateResponse(link))
		if resp.Status != http.StatusOK {
			t.Fatalf("status = %d, want 200", resp.Status)
		}
		for name, want := range map[string]string{
			"Cache-Control":           "no-store",
			"Referrer-Policy":         "no-referrer",
			"Content-Security-Policy": ContentSecurityPolicy,
		} {
			if got, _ := resp.Headers[name].(string); got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}

		for id, want := range map[string]string{
			"original-outcome":   "refunded",
			"replay-outcome":     "escalated",
			"steps-added":        "2",
			"steps-changed":      "1",
			"steps-removed":      "1",
			"tool-calls-changed": "2",
			"original-version":   "refunds@3",
			"target-version":     "refunds@4",
		} {
			if got := strings.TrimSpace(run(t, ctx, "#"+id, chromedp.Text(chromedp.ID(id)))); got != want {
				t.Errorf("#%s = %q, want %q", id, got, want)
			}
		}
		labels := run(t, ctx, "row labels", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('table.steps tbody tr .change .label')].map(e => e.innerText.trim())`))
		if got, want := strings.Join(labels, " | "), "= same | ≠ changed | − removed | + added | + added"; got != want {
			t.Errorf("row labels = %s, want %s", got, want)
		}

		// The stylesheet applied: a changed row has a background a same row has not.
		bg := func(kind string) string {
			return run(t, ctx, kind+" background", chromedp.Evaluate[string](
				`getComputedStyle(document.querySelector('tr.kind-`+kind+` td.side')).backgroundColor`))
		}
		if same, changed, added := bg("same"), bg("changed"), bg("added"); same == changed || same == added || changed == added {
			t.Errorf("row backgrounds same=%s changed=%s added=%s, want three colours", same, changed, added)
		}
		// An added step that failed (the unrecorded call) does not take the
		// added row's green: it keeps the colour of a failure.
		failed := run(t, ctx, "failed added step", chromedp.Evaluate[string](
			`getComputedStyle(document.querySelector('tr.kind-added .step.step-failed')).backgroundColor`))
		if ok := run(t, ctx, "ok added step", chromedp.Evaluate[string](
			`getComputedStyle(document.querySelector('tr.kind-added td.side')).backgroundColor`)); failed == ok || failed == "rgba(0, 0, 0, 0)" {
			t.Errorf("a failed added step's background %s, the added row's %s: want its own", failed, ok)
		}
		if v := run(t, ctx, "CSP violations", chromedp.Evaluate[[]string](`window.cspViolations`)); len(v) > 0 {
			t.Errorf("CSP violations: %v", v)
		}
		if n := run(t, ctx, "hidden notes", chromedp.Evaluate[int](`document.querySelectorAll('.hidden-note').length`)); n != 3 {
			t.Errorf("%d hidden-body notes, want 3 (risk twice, mail once)", n)
		}

		// Open every call's details, so the screenshot shows the bodies.
		run(t, ctx, "open details", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('details').forEach(d => d.open = true)`))
		png := run(t, ctx, "screenshot", chromedp.FullScreenshot(100))
		webtest.WriteArtifact(t, "replay-desktop.png", png)
	})

	t.Run("phone", func(t *testing.T) {
		ctx := tab(t, browser, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		run(t, ctx, "open the signed link", chromedp.Navigate(link))
		type layout struct {
			ScrollWidth, ClientWidth                 int
			OriginalBottom, ReplayTop                float64
			OriginalLeft, ReplayLeft, OutcomeVisible float64
		}
		got := run(t, ctx, "layout", chromedp.Evaluate[layout](`(() => {
			const o = document.querySelector('tr.kind-changed td.original').getBoundingClientRect();
			const r = document.querySelector('tr.kind-changed td.replay').getBoundingClientRect();
			return {
				ScrollWidth: document.documentElement.scrollWidth,
				ClientWidth: document.documentElement.clientWidth,
				OriginalBottom: o.bottom, ReplayTop: r.top, OriginalLeft: o.left, ReplayLeft: r.left,
				OutcomeVisible: document.getElementById('replay-outcome').getBoundingClientRect().width,
			};
		})()`))
		if got.ScrollWidth > got.ClientWidth {
			t.Errorf("page scrolls sideways at a phone's width: scrollWidth %d > clientWidth %d", got.ScrollWidth, got.ClientWidth)
		}
		if got.OriginalBottom > got.ReplayTop || got.OriginalLeft != got.ReplayLeft {
			t.Errorf("the two sides of a step are not stacked: %+v", got)
		}
		if got.OutcomeVisible == 0 {
			t.Error("replay outcome not shown at a phone's width")
		}
		run(t, ctx, "open details", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('details').forEach(d => d.open = true)`))
		png := run(t, ctx, "screenshot", chromedp.FullScreenshot(100))
		webtest.WriteArtifact(t, "replay-phone.png", png)
	})

	t.Run("refused links", func(t *testing.T) {
		ctx := tab(t, browser)
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		tampered := func(k, v string) string {
			q2 := url.Values{}
			for key, vs := range q {
				q2[key] = vs
			}
			q2.Set(k, v)
			u2 := *u
			u2.RawQuery = q2.Encode()
			return u2.String()
		}
		for name, target := range map[string]string{
			"tampered sig":   tampered("sig", flip(q.Get("sig"))),
			"more tools":     tampered("tools", "*"),
			"no sig":         srv.URL + u.Path + "?exp=" + q.Get("exp") + "&tools=" + q.Get("tools"),
			"another replay": s.ReplayURL(srv.URL, "rpl_other", []string{"orders"}),
		} {
			resp := run(t, ctx, name, chromedp.NavigateResponse(target))
			if resp.Status != http.StatusNotFound {
				t.Errorf("%s: status = %d, want 404", name, resp.Status)
			}
		}
	})
}
