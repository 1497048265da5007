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

// TestReplayBatchChecksReportInBrowser opens the report of a batch with
// checks and a gate in Chromium: the verdict, each check's pass rate and
// gate, and the workflows that failed a check, whose link opens the replay.
func TestReplayBatchChecksReportInBrowser(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	// 1,200 and 3,000 change from escalated to cleared; 20 and 999 do not.
	for i, a := range []float64{20, 1200, 3000, 999} {
		id := fmt.Sprintf("tx_%d", i)
		w.amounts.Store(id, a)
		w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": id}})
	}
	r := h.do("POST", "/v1/replay-batches", tok, map[string]any{
		"target_agent_version": "fraud-triage@2", "workflows": map[string]any{"agent": "fraud-triage"},
		"checks": []map[string]any{{"name": "outcome_unchanged"}, {"name": "completed", "expr": `replay.status == "completed"`}},
		"gate":   map[string]any{"outcome_unchanged": 0.75},
	})
	if r.Status != http.StatusAccepted {
		t.Fatalf("create batch: %d %s", r.Status, r.Body)
	}
	var created checkedBatch
	r.json(t, &created)
	b := getCheckedBatch(t, h, tok, created.ID)
	if b.Verdict != "failed" {
		t.Fatalf("batch verdict %q, want failed: 2 of 4 outcomes kept, under the 75%% gate", b.Verdict)
	}

	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 30*time.Second)
	defer cancelTimeout()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(b.ViewerURL))
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("open the report: %v %v", resp, err)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return strings.Join(strings.Fields(v), " ")
	}
	for sel, want := range map[string]string{
		"#batch-verdict": "failed",
		`#check-totals tr[data-check="outcome_unchanged"] .pass-rate`: "50%",
		`#check-totals tr[data-check="outcome_unchanged"] .gate`:      "≥ 75% missed",
		`#check-totals tr[data-check="completed"] .pass-rate`:         "100%",
		`#check-totals tr[data-check="completed"] .gate`:              "—",
	} {
		if got := text(sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	failed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#failed-replays a.replay-link')].map(a => a.innerText.trim())`))
	if err != nil || len(failed) != 2 {
		t.Fatalf("workflows that failed a check %v (%v), want 2", failed, err)
	}
	order, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#failed-replays').compareDocumentPosition(document.querySelector('#outcome-matrix')) === Node.DOCUMENT_POSITION_FOLLOWING`))
	if err != nil || !order {
		t.Errorf("the failed checks do not come before the outcome matrix (%v)", err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	webtest.WriteArtifact(t, "replay-batch-checks-report.png", png)

	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS("#failed-replays a.replay-link"))); err != nil {
		t.Fatalf("click: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitVisible(chromedp.ID("replay-outcome"))); err != nil {
		t.Fatalf("the replay page did not open: %v", err)
	}
	if got := text("#workflow-id"); got != failed[0] {
		t.Errorf("the link of %s opened the replay of %s", failed[0], got)
	}
}
