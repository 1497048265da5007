package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/web/webtest"
)

// TestConsoleInBrowser drives the console in Chromium: sign in through a
// one-time link; filter the workflow list; open a workflow and find its
// steps and a tool call's response; watch a waiting workflow's next steps
// arrive without a reload once a second person approves it; the invoker
// is refused. Each page passes axe-core and reports no CSP violation.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	h := newHarness(t)
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("t-big", 900.0)
	w.amounts.Store("t-small", 120.0)
	alice := h.tokenFor("alice", "agents:invoke workflows:read workflows:replay tool:* workflows:approve approve:refunds")
	bob := h.tokenFor("bob", "workflows:read workflows:approve approve:refunds tool:*")

	if r := h.do("POST", "/v1/agents/refunds/invoke", alice, map[string]any{"goal": "refund t-small for a scratched lid",
		"context": map[string]any{"transaction_id": "t-small"}}); r.Status != 200 {
		t.Fatalf("invoke t-small: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/agents/refunds/invoke", alice, map[string]any{"goal": "refund t-big for a broken hinge",
		"context": map[string]any{"transaction_id": "t-big"}}, "Prefer", "respond-async"); r.Status != 202 {
		t.Fatalf("invoke t-big: %d %s", r.Status, r.Body)
	}
	pending := pendingApproval(t, h, bob)

	page := func(tab context.Context, where, shot string) {
		t.Helper()
		consoletest.NoProblems(t, tab, where)
		consoletest.Axe(t, tab, where)
		if shot != "" {
			consoletest.Screenshot(t, tab, shot)
		}
	}

	// Alice signs in and lands on the workflow list, newest first.
	a := consoletest.Tab(t, browser)
	consoletest.Run(t, a, "sign in", chromedp.Navigate(consoletest.Link(t, h.URL, alice)), chromedp.WaitVisible(chromedp.CSS("table.list")))
	if loc := consoletest.Eval[string](t, a, `location.pathname`); loc != "/console/workflows" {
		t.Fatalf("after sign-in: %s", loc)
	}
	if n := consoletest.Eval[int](t, a, `document.querySelectorAll('table.list tbody tr').length`); n != 2 {
		t.Errorf("workflow rows = %d, want 2", n)
	}
	page(a, "workflows", "") // the list's image is TestConsoleWorkflowListKeepsWordsWhole's, with the demo's data

	// Filter by goal words: only the small refund.
	consoletest.Run(t, a, "filter", chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), "scratched"),
		chromedp.Submit(chromedp.CSS(`input[name="q"]`)), chromedp.WaitVisible(chromedp.CSS(`input[name="q"][value="scratched"]`)))
	goals := consoletest.Eval[[]string](t, a, `[...document.querySelectorAll('table.list td.goal')].map(td => td.textContent)`)
	if len(goals) != 1 || !strings.Contains(goals[0], "scratched lid") {
		t.Errorf("filtered goals = %q", goals)
	}

	// Open it: its steps, each with a bar, and the payments API's response.
	consoletest.Run(t, a, "open the workflow", chromedp.Click(chromedp.CSS(`table.list tbody tr a`)), chromedp.WaitVisible(chromedp.CSS(`#steps`)))
	actions := consoletest.Eval[[]string](t, a, `[...document.querySelectorAll('#steps .step-action')].map(e => e.textContent)`)
	// A refund under 500 skips the approval step.
	if strings.Join(actions, ",") != "fetch,open_case" {
		t.Errorf("steps = %q", actions)
	}
	if n := consoletest.Eval[int](t, a, `document.querySelectorAll('#steps svg.bar rect.fill').length`); n != 2 {
		t.Errorf("bars = %d, want 2", n)
	}
	resp := consoletest.Eval[string](t, a, `document.querySelector('#step-1 details.response pre').textContent`)
	if !strings.Contains(resp, "120") {
		t.Errorf("the fetch step's response = %q, want the transaction", resp)
	}
	page(a, "workflow", "console-workflow.png")

	// Alice invoked the big refund: deciding it herself is refused.
	consoletest.Run(t, a, "approvals", chromedp.Navigate(h.URL+"/console/approvals"), chromedp.WaitVisible(chromedp.CSS(`form.decide`)))
	page(a, "approvals", "console-approvals.png")
	consoletest.Run(t, a, "approve own", chromedp.Click(chromedp.CSS(`form.decide button[value="approve"]`)), chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	if msg := consoletest.Eval[string](t, a, `document.querySelector('.problem').textContent`); !strings.Contains(msg, "invoked") {
		t.Errorf("the invoker approving: %q", msg)
	}
	page(a, "refused decision", "")

	// Alice watches the waiting workflow; Bob approves it in his tab.
	consoletest.Run(t, a, "open the waiting workflow", chromedp.Navigate(h.URL+"/console/workflows/"+pending.WorkflowID), chromedp.WaitVisible(chromedp.CSS(`#step-2`)))
	consoletest.Eval[bool](t, a, `window.notReloaded = true`)
	if n := consoletest.Eval[int](t, a, `document.querySelectorAll('#steps .step').length`); n != 2 {
		t.Fatalf("waiting workflow shows %d steps, want 2", n)
	}
	b := consoletest.Person(t, browser)
	consoletest.Run(t, b, "bob signs in", chromedp.Navigate(consoletest.Link(t, h.URL, bob)), chromedp.WaitVisible(chromedp.CSS("nav")))
	consoletest.Run(t, b, "bob approves", chromedp.Navigate(h.URL+"/console/approvals"),
		chromedp.SendKeys(chromedp.CSS(`form.decide input[name="comment"]`), "customer verified"),
		chromedp.Click(chromedp.CSS(`form.decide button[value="approve"]`)))
	consoletest.Run(t, b, "no pending approval left", chromedp.WaitVisible(chromedp.CSS(`a[aria-current="true"]`)))
	// The click posts the form and the browser follows the redirect back to
	// the approvals page: until that page is in, #live may not be there.
	for i := 0; ; i++ {
		body := consoletest.Eval[string](t, b, `document.getElementById('live')?.textContent ?? ''`)
		if strings.Contains(body, "No pending approval") {
			break
		}
		if i > 100 {
			t.Fatalf("after bob approved, the approvals page shows %q", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	consoletest.Run(t, a, "the last step arrives live", chromedp.WaitVisible(chromedp.CSS(`#step-3`)))
	if !consoletest.Eval[bool](t, a, `window.notReloaded === true`) {
		t.Error("the page was reloaded; it should have updated in place")
	}
	consoletest.Run(t, a, "completed", chromedp.Poll[chromedp.Void](`document.getElementById('wf-status').textContent === 'completed'`, chromedp.WithPollingTimeout(10*time.Second)))
	if who := consoletest.Eval[string](t, a, `document.querySelector('.approvals').textContent`); !strings.Contains(who, "bob") || !strings.Contains(who, "customer verified") {
		t.Errorf("approvals of the workflow: %q", who)
	}
	page(a, "live workflow", "console-workflow-live.png")
}
