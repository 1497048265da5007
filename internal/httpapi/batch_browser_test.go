package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/web/webtest"
)

// TestReplayBatchReportInBrowser opens a finished batch's report page in
// Chromium: the counts and the matrix are in the DOM, and a changed
// workflow's link opens its replay's page.
func TestReplayBatchReportInBrowser(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	// 1,200 and 3,000 are escalated by v1 and cleared by v2; 20 is cleared by both.
	amounts := []float64{20, 1200, 3000, 20, 20}
	for i, a := range amounts {
		id := fmt.Sprintf("tx_%d", i)
		w.amounts.Store(id, a)
		w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": id}})
	}
	var created batchResult
	h.do("POST", "/v1/replay-batches", tok, map[string]any{
		"target_agent_version": "fraud-triage@2", "workflows": map[string]any{"agent": "fraud-triage"},
	}).json(t, &created)
	b := waitBatch(t, h, tok, created.ID)
	if b.Status != "completed" || b.Changed != 2 || !strings.HasPrefix(b.ViewerURL, h.URL+"/replay-batches/"+b.ID+"?") {
		t.Fatalf("batch: %+v", b)
	}

	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 30*time.Second)
	defer cancelTimeout()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(b.ViewerURL))
	if err != nil {
		t.Fatalf("open the report: %v", err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("report status %d", resp.Status)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}
	for sel, want := range map[string]string{
		"#count-total":     "5",
		"#count-done":      "5",
		"#count-changed":   "2",
		"#count-unchanged": "3",
		"#batch-status":    "completed",
		"#target-version":  "fraud-triage@2",
		`#outcome-matrix td[data-from="escalated"][data-to="cleared"]`: "2",
		`#outcome-matrix td[data-from="cleared"][data-to="cleared"]`:   "3",
	} {
		if got := text(sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#outcome-matrix td').length`))
	if err != nil || cells != 2 {
		t.Errorf("matrix of %d cells (%v), want 2: escalated and cleared, both to cleared", cells, err)
	}
	links, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#changed-replays a.replay-link')].map(a => a.innerText.trim())`))
	if err != nil || len(links) != 2 {
		t.Fatalf("changed workflow links %v (%v), want 2", links, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	webtest.WriteArtifact(t, "replay-batch-report.png", png)

	// Follow the first changed workflow's link to its replay's page.
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS("#changed-replays a.replay-link"))); err != nil {
		t.Fatalf("click: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitVisible(chromedp.ID("replay-outcome"))); err != nil {
		t.Fatalf("the replay page did not open: %v", err)
	}
	if got := text("#workflow-id"); got != links[0] {
		t.Errorf("the link of %s opened the replay of %s", links[0], got)
	}
	if o, r := text("#original-outcome"), text("#replay-outcome"); o != "escalated" || r != "cleared" {
		t.Errorf("replay page outcomes %s → %s, want escalated → cleared", o, r)
	}
	png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	webtest.WriteArtifact(t, "replay-batch-linked-replay.png", png)
}
