package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/web/webtest"
)

// TestConsoleActionsInBrowser drives the rest of the console in Chromium:
// an LLM agent's workflow shows its conversation; a replay against another
// version, as a dry run, made from the workflow page leads to the replay
// viewer; a form whose CSRF token was tampered with is refused and changes
// nothing; a reused and an expired sign-in link show the refusal page; in a
// phone-sized window the workflow pages do not scroll sideways and pass
// axe-core.
func TestConsoleActionsInBrowser(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	var skew atomic.Int64 // how far the server's clock is ahead of time.Now
	ms := newModelServer(t)
	h := newHarness(t, withModel(t, ms), func(_ *httpapi.Config, d *httpapi.Deps) {
		d.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "payments-assistant", "definition": map[string]any{
		"tools": []string{"payments"}, "steps": []any{map[string]any{"action": "answer", "plan": map[string]any{"prompt": "goal"}}},
		"outcome": "'answered'"}}); r.Status != 201 {
		t.Fatalf("deploy payments-assistant: %d %s", r.Status, r.Body)
	}
	tok := h.token("acme", replayScopes)
	var llm struct {
		ID string `json:"workflow_id"`
	}
	if r := h.do("POST", "/v1/agents/payments-assistant/invoke", tok, map[string]any{"goal": "is tx-1 fine?", "max_llm_tokens": 100000}); r.Status != 200 {
		t.Fatalf("invoke payments-assistant: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &llm)
	}
	triage := w.invoke(t, tok, map[string]any{"goal": "triage tx_1200", "context": map[string]any{"transaction_id": "tx_1200"}})["workflow_id"].(string)

	check := func(tab context.Context, where string) {
		t.Helper()
		consoletest.NoProblems(t, tab, where)
		consoletest.Axe(t, tab, where)
	}
	link := consoletest.Link(t, h.URL, tok)
	tab := consoletest.Tab(t, browser)
	consoletest.Run(t, tab, "sign in", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("table.list")))

	// The LLM agent's workflow: its conversation, the model's tool call and
	// its answer.
	consoletest.Run(t, tab, "open the LLM workflow", chromedp.Navigate(h.URL+"/console/workflows/"+llm.ID),
		chromedp.WaitVisible(chromedp.CSS(`ol.conversation`)))
	talk := consoletest.Eval[string](t, tab, `document.querySelector('ol.conversation').textContent`)
	for _, want := range []string{"Completion 1", "payments__getTransaction", "the transaction is fine"} {
		if !strings.Contains(talk, want) {
			t.Errorf("the conversation lacks %q: %s", want, talk)
		}
	}
	check(tab, "LLM workflow")
	consoletest.Screenshot(t, tab, "console-conversation.png")

	// A forged CSRF token: the replay form is refused and makes no replay.
	replayForm := `form[action="/console/workflows/` + triage + `/replay"]`
	consoletest.Run(t, tab, "open the triage workflow", chromedp.Navigate(h.URL+"/console/workflows/"+triage),
		chromedp.WaitVisible(chromedp.CSS(replayForm)))
	consoletest.Eval[bool](t, tab, `(document.querySelector('`+replayForm+` input[name="csrf"]').value = '0'.repeat(32)) !== ''`)
	consoletest.Run(t, tab, "submit the forged form", chromedp.Click(chromedp.CSS(replayForm+` button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	if msg := consoletest.Eval[string](t, tab, `document.querySelector('.problem').textContent`); !strings.Contains(msg, "CSRF token") {
		t.Errorf("the forged form's page says %q", msg)
	}
	check(tab, "CSRF refusal")
	if n := replaysOf(t, h, tok, triage); n != 0 {
		t.Fatalf("a forged form made %d replays", n)
	}

	// Replay against version 2 as a dry run, then open it in the viewer.
	consoletest.Run(t, tab, "replay against version 2", chromedp.Navigate(h.URL+"/console/workflows/"+triage),
		chromedp.SetValue(chromedp.CSS(replayForm+` select[name="version"]`), "fraud-triage@2"),
		chromedp.Click(chromedp.CSS(replayForm+` button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href*="/replays/"]`)))
	if loc := consoletest.Eval[string](t, tab, `location.pathname`); loc != "/console/workflows/"+triage {
		t.Errorf("after the replay the browser is at %s", loc)
	}
	made := consoletest.Eval[string](t, tab, `document.querySelector('a[href*="/replays/"]').closest('li').textContent`)
	if !strings.Contains(made, "against fraud-triage@2 (dry run)") {
		t.Errorf("the workflow's replays read %q", made)
	}
	if n := replaysOf(t, h, tok, triage); n != 1 {
		t.Errorf("replays of the workflow: %d, want 1", n)
	}
	consoletest.Run(t, tab, "open the replay viewer", chromedp.Click(chromedp.CSS(`a[href*="/replays/"]`)),
		chromedp.WaitVisible(chromedp.ID("replay-outcome")))
	for id, want := range map[string]string{"original-outcome": "escalated", "replay-outcome": "cleared"} {
		if got := strings.TrimSpace(consoletest.Eval[string](t, tab, `document.getElementById('`+id+`').textContent`)); got != want {
			t.Errorf("viewer #%s = %q, want %q", id, got, want)
		}
	}
	consoletest.NoProblems(t, tab, "replay viewer")

	// A phone-sized window: no sideways scroll of the page, and axe passes.
	consoletest.Run(t, tab, "narrow window", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, p := range []struct{ path, wait, shot string }{
		{"/console/workflows", "table.list", "console-narrow-workflows.png"},
		{"/console/workflows/" + triage, "#steps", "console-narrow-workflow.png"},
		{"/console/workflows/" + llm.ID, "ol.conversation", "console-narrow-conversation.png"},
	} {
		consoletest.Run(t, tab, "narrow "+p.path, chromedp.Navigate(h.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		if wide := consoletest.Eval[[]int](t, tab, `[document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]`); wide[0] > wide[2] || wide[1] > wide[2] {
			t.Errorf("narrow %s scrolls sideways: page %d, body %d wide in a window of %d", p.path, wide[0], wide[1], wide[2])
		}
		check(tab, "narrow "+p.path)
		consoletest.Screenshot(t, tab, p.shot)
	}

	// The link already used, then an unused one past its 60 seconds: each
	// opens the refusal page and signs nobody in.
	refused := func(link, want string, status int64) {
		t.Helper()
		fresh := consoletest.Tab(t, browser)
		resp, err := chromedp.Run(fresh, chromedp.NavigateResponse(link))
		if err != nil {
			t.Fatalf("open the %s link: %v", want, err)
		}
		text := consoletest.Eval[string](t, fresh, `document.querySelector('main').textContent`)
		if resp.Status != status || !strings.Contains(text, want) {
			t.Errorf("a link %s: %d %q", want, resp.Status, text)
		}
		if n := consoletest.Eval[int](t, fresh, `document.querySelectorAll('nav[aria-label="Console"]').length`); n != 0 {
			t.Errorf("a link %s signed the browser in", want)
		}
		check(fresh, "link "+want)
	}
	refused(link, "already used", http.StatusGone)
	late := consoletest.Link(t, h.URL, tok)
	skew.Store(int64(session.LinkTTL + time.Second))
	refused(late, "expired", http.StatusGone)
	skew.Store(0)
}

// replaysOf counts the replays made of a workflow.
func replaysOf(t *testing.T, h *harness, tok, wfID string) int {
	t.Helper()
	var list struct {
		Replays []struct {
			ID string `json:"replay_id"`
		} `json:"replays"`
	}
	r := h.do("GET", "/v1/replays?workflow_id="+wfID, tok, nil)
	if r.Status != 200 {
		t.Fatalf("list replays: %d %s", r.Status, r.Body)
	}
	r.json(t, &list)
	return len(list.Replays)
}
