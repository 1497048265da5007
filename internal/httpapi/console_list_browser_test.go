package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/client"
	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/demo"
	"github.com/agentplane/agentplane/internal/web/webtest"
	"github.com/agentplane/agentplane/internal/workflow"
)

// demoWorld is a harness holding what serve --demo makes: its APIs
// registered as tools, fraud-triage, the LLM agent payments-assistant on
// the demo model and the external agent triage-code, each with its
// history, and a refund waiting for approval.
type demoWorld struct {
	h     *harness
	token string
	// ahead is how far the runner's clock is ahead of time.Now.
	ahead atomic.Int64
	// Seeded is what demo.Seed made; Waiting the refund that waits,
	// since about waitingSince.
	Seeded       *demo.Seeded
	Waiting      string
	waitingSince time.Time
}

// newDemoWorld seeds a harness as serve --demo does, through the API,
// with a few long goals beside the demo's own.
func newDemoWorld(t *testing.T) *demoWorld {
	t.Helper()
	w := &demoWorld{}
	h := newHarness(t, withExternal(t, nil, func(o *workflow.Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(w.ahead.Load())) }
	}))
	tok, err := h.Issuer.Mint(t.Context(), auth.MintRequest{Tenant: demo.Tenant, Subject: "demo", Scopes: demo.Scopes})
	if err != nil {
		t.Fatal(err)
	}
	apis, err := demo.Start(50*time.Millisecond, 0) // the customers API is slow, as in the demo
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(apis.Close)
	if err := apis.StartAgent(0, demo.ModelName); err != nil {
		t.Fatal(err)
	}
	cl := &client.Client{BaseURL: h.URL, Token: tok, UserAgent: "agentplane-test"}
	seeded, err := demo.Seed(t.Context(), cl, apis, "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w.h, w.token, w.Seeded = h, tok, seeded
	for _, in := range []struct{ tx, goal string }{
		{"tx_1003", "triage tx_1003: the cardholder says they never made this purchase and asks us to block the card before anything else goes through"},
		{"tx_1004", "triage tx_1004 again after the merchant disputed the chargeback and sent the signed delivery receipt"},
	} {
		if r := h.do("POST", "/v1/agents/fraud-triage/invoke", tok, map[string]any{"goal": in.goal,
			"context": map[string]any{"transaction_id": in.tx}}); r.Status != http.StatusOK {
			t.Fatalf("invoke fraud-triage for %s: %d %s", in.tx, r.Status, r.Body)
		}
	}
	// As the demo's ready block does: a refund of version 2 that waits.
	r := h.do("POST", "/v1/agents/fraud-triage@2/invoke", tok, map[string]any{"goal": "refund tx_1007: the customer asks for their money back",
		"context": map[string]any{"transaction_id": "tx_1007", "refund_requested": true}}, "Prefer", "respond-async")
	var wf struct {
		ID string `json:"workflow_id"`
	}
	r.json(t, &wf)
	w.Waiting = wf.ID
	w.waitFor(t, wf.ID, "waiting")
	w.waitingSince = time.Now()
	return w
}

// waitFor waits until workflow id has status.
func (w *demoWorld) waitFor(t *testing.T, id, status string) {
	t.Helper()
	var wf struct {
		Status string `json:"status"`
	}
	for range 400 {
		w.h.do("GET", "/v1/workflows/"+id, w.token, nil).json(t, &wf)
		if wf.Status == status {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("workflow %s is %s, not %s, after 10 s", id, wf.Status, status)
}

// brokenWords lists, for every cell of the page's tables, each word (a
// run of non-space characters of one text node) whose characters are
// drawn on more than one line: a word broken inside.
const brokenWords = `(() => {
  const broken = [];
  for (const cell of document.querySelectorAll('table th, table td')) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node; (node = walk.nextNode());) {
      for (const m of node.data.matchAll(/\S+/g)) {
        const r = document.createRange();
        r.setStart(node, m.index);
        r.setEnd(node, m.index + m[0].length);
        const rects = [...r.getClientRects()].filter(x => x.width > 0);
        if (rects.some(x => x.top >= rects[0].bottom - 1)) {
          broken.push(JSON.stringify(m[0]) + ' in ' + cell.tagName.toLowerCase() + (cell.className ? '.' + cell.className : ''));
        }
      }
    }
  }
  return broken;
})()`

// TestConsoleWorkflowListKeepsWordsWhole opens the workflow list with the
// demo's data at 1280 and 1920 px: no cell's text (pills, outcomes,
// headers, ids, agents, goals) wraps inside a word; each id is shown
// shortened, its whole self in the link's title and in what a selection
// of it copies. The quickstart's replay (tx_1002 against version 2) is
// made from the console and opened in the viewer. Then the demo's refund
// is approved 2 h 14 min after it asked: its timeline draws the wait as
// one collapsed segment saying so, and its steps over the rest of the
// width.
func TestConsoleWorkflowListKeepsWordsWhole(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	w := newDemoWorld(t)
	tab := consoletest.Tab(t, browser)
	consoletest.Run(t, tab, "sign in", chromedp.Navigate(consoletest.Link(t, w.h.URL, w.token)), chromedp.WaitVisible(chromedp.CSS("table.list")))
	rows := consoletest.Eval[int](t, tab, `document.querySelectorAll('table.list tbody tr').length`)
	if want := len(w.Seeded.Workflows) + len(w.Seeded.Assisted) + len(w.Seeded.Coded) + 3; rows != want || len(w.Seeded.Coded) == 0 {
		t.Fatalf("the list shows %d workflows, want %d (the demo's, its external agent's %d among them)", rows, want, len(w.Seeded.Coded))
	}
	text := consoletest.Eval[string](t, tab, `document.querySelector('table.list').textContent`)
	for _, want := range []string{"answered", "completed", "waiting", "escalated", "payments-assistant@1", "triage-code@1", "Outcome", "Duration"} {
		if !strings.Contains(text, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	for _, width := range []int64{1280, 1920} {
		consoletest.Run(t, tab, "resize", chromedp.EmulateViewport(width, 800), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("table.list")))
		if broken := consoletest.Eval[[]string](t, tab, brokenWords); len(broken) > 0 {
			t.Errorf("at %d px the list breaks words inside: %s", width, strings.Join(broken, ", "))
		}
		if wide := consoletest.Eval[[]int](t, tab, `[document.documentElement.scrollWidth, window.innerWidth]`); wide[0] > wide[1] {
			t.Errorf("at %d px the list scrolls sideways: %d px wide", width, wide[0])
		}
		consoletest.NoProblems(t, tab, "workflows")
		consoletest.Axe(t, tab, "workflows")
		if width == 1280 {
			consoletest.Screenshot(t, tab, "console-workflows.png")
		}
	}
	// Each id: shortened on screen, whole in its title and in a copy.
	ids := consoletest.Eval[[][2]string](t, tab, `[...document.querySelectorAll('table.list tbody td.id a')].map(a => {
  const s = getSelection();
  s.selectAllChildren(a);
  const copied = s.toString();
  s.removeAllRanges();
  return [a.title, copied];
})`)
	for _, id := range ids {
		if !strings.HasPrefix(id[0], "wf_") || id[1] != id[0] {
			t.Errorf("an id's title is %q and a selection of it copies %q: want the whole id in both", id[0], id[1])
		}
		if shown := consoletest.Eval[float64](t, tab, `document.querySelector('table.list td.id a[title="`+id[0]+`"] code').getBoundingClientRect().width`); shown > 120 {
			t.Errorf("the id %s takes %.0f px on screen: want it shortened", id[0], shown)
		}
	}

	// The quickstart's replay, from the console: tx_1002's workflow against
	// version 2, the form's default, in the viewer.
	form := `form[action="/console/workflows/` + w.Seeded.ReplayExample + `/replay"]`
	consoletest.Run(t, tab, "replay tx_1002", chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(w.h.URL+"/console/workflows/"+w.Seeded.ReplayExample), chromedp.WaitVisible(chromedp.CSS(form)),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`ul.replays li a[href*="/replays/"]`)),
		chromedp.Click(chromedp.CSS(`ul.replays li a[href*="/replays/"]`)), chromedp.WaitVisible(chromedp.ID("replay-outcome")))
	if got := consoletest.Eval[string](t, tab, `document.getElementById('original-outcome').textContent + ' → ' + document.getElementById('replay-outcome').textContent + ' ' + document.getElementById('target-version').textContent`); got != "escalated → review fraud-triage@2" {
		t.Errorf("the replay of tx_1002 reads %q, want escalated → review against fraud-triage@2, as the quickstart says", got)
	}
	consoletest.NoProblems(t, tab, "replay viewer")
	consoletest.Screenshot(t, tab, "replay-viewer.png")

	// The refund waits 2 h 14 min (by the runner's clock, however long
	// the steps above took), then the demo's approver approves it.
	w.ahead.Store(int64(2*time.Hour + 14*time.Minute + 10*time.Second - time.Since(w.waitingSince)))
	approver, err := w.h.Issuer.Mint(t.Context(), auth.MintRequest{Tenant: demo.Tenant, Subject: "demo-approver", Scopes: demo.ApproverScopes})
	if err != nil {
		t.Fatal(err)
	}
	if r := w.h.do("POST", "/v1/workflows/"+w.Waiting+"/approvals/refund_approval", approver, map[string]any{"decision": "approve"}); r.Status != http.StatusOK {
		t.Fatalf("approve the refund: %d %s", r.Status, r.Body)
	}
	w.waitFor(t, w.Waiting, "completed")
	consoletest.Run(t, tab, "open the refund", chromedp.Navigate(w.h.URL+"/console/workflows/"+w.Waiting), chromedp.WaitVisible(chromedp.CSS("#steps")))
	gaps := consoletest.Eval[[]string](t, tab, `[...document.querySelectorAll('#steps li.gap')].map(g => g.textContent.trim())`)
	if len(gaps) != 1 || gaps[0] != "waited 2 h 14 min for approval" {
		t.Errorf("the refund's timeline shows the waits %q, want one: waited 2 h 14 min for approval", gaps)
	}
	// Each step's bar: the fetches of the transaction and the customer,
	// 2 h 14 min before the refund, still take a visible share. Were the
	// wait not collapsed, every bar would be at its smallest (0.004 of the
	// width); the idle moments between steps (under a second, longer on a
	// loaded machine) are not collapsed and take the rest.
	widths := consoletest.Eval[[]float64](t, tab, `[...document.querySelectorAll('#steps li.step svg.bar')].map(svg =>
  svg.querySelector('rect.fill').getBoundingClientRect().width / svg.getBoundingClientRect().width)`)
	var shown float64
	for _, f := range widths {
		shown += f
	}
	if len(widths) < 4 || shown < 0.2 {
		t.Errorf("the steps' bars take %v of the width (%.2f together): want them scaled to the steps' own time", widths, shown)
	}
	consoletest.NoProblems(t, tab, "refund after a wait")
	consoletest.Axe(t, tab, "refund after a wait")
	consoletest.Eval[bool](t, tab, `document.querySelector('#steps li.gap').scrollIntoView({block: 'center'}) === undefined`)
	consoletest.Screenshot(t, tab, "console-workflow-wait.png")
}
