package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/web/webtest"
)

// TestReplayViewerInBrowser opens a real replay's viewer_url in Chromium and
// reads both outcomes and the four delta counts from the rendered page.
func TestReplayViewerInBrowser(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	res := w.replay(t, tok, wf["workflow_id"].(string), map[string]any{"target_agent_version": "fraud-triage@2"})

	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 30*time.Second)
	defer cancelTimeout()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(res.ViewerURL))
	if err != nil {
		t.Fatalf("open %s: %v", res.ViewerURL, err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("viewer: %d", resp.Status)
	}
	for id, want := range map[string]string{
		"original-outcome": "escalated", "replay-outcome": "cleared",
		"steps-added": "0", "steps-changed": "2", "steps-removed": "1", "tool-calls-changed": "1",
	} {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("#%s: %v", id, err)
		}
		if strings.TrimSpace(got) != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", webtest.WriteArtifact(t, "replay-viewer.png", png))

	u, _ := url.Parse(res.ViewerURL)
	q := u.Query()
	q.Set("sig", strings.Repeat("ab", 32))
	u.RawQuery = q.Encode()
	resp, err = chromedp.Run(ctx, chromedp.NavigateResponse(u.String()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusNotFound {
		t.Errorf("tampered sig: %d, want 404", resp.Status)
	}
	// A person who follows a bad link reads what happened and how to get
	// a fresh one, not a problem document.
	for id, want := range map[string]string{"refused-title": "This link does not open a page", "fresh-link": "agentplane replays get " + res.ReplayID} {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("#%s on the refused link's page: %v", id, err)
		}
		if strings.TrimSpace(got) != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
}
