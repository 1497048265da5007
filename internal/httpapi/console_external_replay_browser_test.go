package httpapi_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/web/webtest"
)

// TestConsoleShowsAnExternalReplayAsADefinedOne replays, from the console,
// a defined agent's workflow and an external agent's (the Go recipe's
// agent, a version 2 with other instructions, the model asked live): the
// workflow pages list both replays alike (outcomes, delta, unrecorded
// calls, the viewer's link), the external one naming the URL that ran;
// its viewer shows both conversations, the delta and the unrecorded call,
// and the report of a batch against that version names the URL too.
func TestConsoleShowsAnExternalReplayAsADefinedOne(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	ms := llmtest.NewOpenAIServer(t, replayScript)
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	agents := &replayAgent{}
	deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": agents.serve(t, func(g string) string { return g }),
		"tools": []string{"payments", "cases"}, "models": []string{"gpt"}})
	// Version 2 also compares with tx-2, a read the record does not have.
	v2 := agents.serve(t, func(g string) string { return g + " Compare with tx-2." })
	deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": v2, "tools": []string{"payments", "cases"}, "models": []string{"gpt"}})
	tok := h.token("acme", replayScopes)
	triage := w.invoke(t, tok, map[string]any{"goal": "triage tx_1200", "context": map[string]any{"transaction_id": "tx_1200"}})["workflow_id"].(string)
	var ext externalWorkflow
	h.do("POST", "/v1/agents/ext-triage/invoke", tok, map[string]any{"goal": "How much is tx-1?"}).json(t, &ext)
	if ext.Outcome != "answered" {
		t.Fatalf("the external agent's workflow: %+v", ext)
	}
	paid := w.payments.Load()

	tab := consoletest.Tab(t, browser)
	consoletest.Run(t, tab, "sign in", chromedp.Navigate(consoletest.Link(t, h.URL, tok)), chromedp.WaitVisible(chromedp.CSS("table.list")))
	// replay submits a workflow's replay form (its default target, the
	// agent's newest other version, as a dry run) and returns the line the
	// page then lists.
	replay := func(wfID string, llm string) string {
		t.Helper()
		form := `form[action="/console/workflows/` + wfID + `/replay"]`
		consoletest.Run(t, tab, "open "+wfID, chromedp.Navigate(h.URL+"/console/workflows/"+wfID), chromedp.WaitVisible(chromedp.CSS(form)))
		if llm != "" {
			consoletest.Run(t, tab, "ask the model live", chromedp.SetValue(chromedp.CSS(form+` select[name="llm"]`), llm))
		}
		consoletest.Run(t, tab, "replay "+wfID, chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`ul.replays li`)))
		consoletest.NoProblems(t, tab, "replays of "+wfID)
		consoletest.Axe(t, tab, "replays of "+wfID)
		return strings.Join(strings.Fields(consoletest.Eval[string](t, tab, `document.querySelector('ul.replays li').textContent`)), " ")
	}
	defined := replay(triage, "")
	external := replay(ext.ID, "live")
	if w.payments.Load() != paid {
		t.Errorf("the dry runs sent %d requests to the tool", w.payments.Load()-paid)
	}
	for _, c := range []struct{ line, want string }{
		{defined, "against fraud-triage@2 (dry run): completed · outcome escalated → cleared · steps 0 added, 2 changed, 1 removed, 1 tool calls changed · open in the replay viewer"},
		{external, "against ext-triage@2 (dry run, completions live), the external agent at " + v2 + ": completed · outcome answered → answered · steps "},
		{external, " · 1 without a recorded answer · open in the replay viewer"},
	} {
		if !strings.Contains(c.line, c.want) {
			t.Errorf("the replay reads %q, want %q in it", c.line, c.want)
		}
	}
	if strings.Contains(defined, "external agent") {
		t.Errorf("a defined version's replay names an external agent: %q", defined)
	}

	// The viewer, from the console's link: the URL, both conversations,
	// the delta and the unrecorded call.
	consoletest.Run(t, tab, "open the viewer", chromedp.Click(chromedp.CSS(`ul.replays li a[href*="/replays/"]`)),
		chromedp.WaitVisible(chromedp.ID("replay-outcome")))
	viewer := consoletest.Eval[map[string]string](t, tab, `Object.fromEntries(['target-url', 'original-conversation', 'replay-conversation', 'tool-calls-changed']
  .map(id => [id, (document.getElementById(id) || {}).textContent || '']))`)
	if viewer["target-url"] != v2 || !strings.Contains(viewer["original-conversation"], "How much is tx-1?") ||
		!strings.Contains(viewer["replay-conversation"], "Compare with tx-2.") || strings.TrimSpace(viewer["tool-calls-changed"]) != "1" {
		t.Errorf("the viewer shows %q", viewer)
	}
	if n := consoletest.Eval[int](t, tab, `[...document.querySelectorAll('td.side.replay')].filter(td => td.textContent.includes('unrecorded')).length`); n != 1 {
		t.Errorf("the viewer shows %d unrecorded steps, want 1", n)
	}
	consoletest.NoProblems(t, tab, "viewer")

	// A batch against the external version: its report names the URL.
	var created batchResult
	h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "ext-triage@2", "llm": "live",
		"workflows": map[string]any{"agent": "ext-triage"}}).json(t, &created)
	b := waitBatch(t, h, tok, created.ID)
	consoletest.Run(t, tab, "open the batch report", chromedp.Navigate(b.ViewerURL), chromedp.WaitVisible(chromedp.ID("batch-status")))
	if got := consoletest.Eval[string](t, tab, `(document.getElementById('target-url') || {}).textContent || ''`); got != v2 {
		t.Errorf("the batch report names the external agent %q, want %q", got, v2)
	}
}
