package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/web/webtest"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestConsoleDataPagesInTheBrowser opens the agents, tools, usage, audit,
// schedules and webhooks pages in Chromium: each shows with no CSP violation or script
// error and no serious accessibility violation (axe-core). A reader picks
// two versions and reads the changed expression, then reads an external
// version's url and governance; a replay whose score changed links to the
// same diff from its viewer.
func TestConsoleDataPagesInTheBrowser(t *testing.T) {
	t.Parallel()
	browser := webtest.Browser(t)
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes+" usage:read models:read schedules:read schedules:write webhooks:read webhooks:write")
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	res := w.replay(t, tok, wf["workflow_id"].(string), map[string]any{"target_agent_version": "fraud-triage@2"})
	if r := h.do("POST", "/v1/schedules", tok, map[string]any{"agent": "fraud-triage", "cron": "0 9 * * 1-5", "timezone": "Europe/Paris",
		"goal": "triage the morning's first transaction", "context": map[string]any{"transaction_id": "tx_1200"}}); r.Status != 201 {
		t.Fatalf("schedule: %d %s", r.Status, r.Body)
	}
	if r := h.do("PUT", "/v1/agents/fraud-triage/rollout", tok, map[string]any{"target": "2", "percent": 100,
		"checks": []map[string]any{{"name": "not_failed", "expr": "run.outcome != 'failed'"}}, "gate": map[string]any{"not_failed": 0.95}}); r.Status != 201 {
		t.Fatalf("rollout: %d %s", r.Status, r.Body)
	}
	w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	var wh struct {
		ID string `json:"id"`
	}
	h.do("POST", "/v1/webhooks", tok, map[string]any{"url": "https://hooks.example.com/agentplane", "events": []string{"workflow.completed"}}).json(t, &wh)
	now := time.Now().UTC()
	for d, agentName := range []string{"fraud-triage", "fraud-triage", "refunds", "fraud-triage"} {
		err := h.DB.RecordUsage(t.Context(), workflow.UsageRecord{Tenant: "acme", Agent: agentName, Model: "gpt-small",
			InputTokens: int64(1000 * (d + 1)), OutputTokens: 300, Cost: 0.01 * float64(d+1), Currency: "EUR", At: now.AddDate(0, 0, -d)})
		if err != nil {
			t.Fatal(err)
		}
	}

	tab := consoletest.Tab(t, browser)
	consoletest.Run(t, tab, "sign in", chromedp.Navigate(consoletest.Link(t, h.URL, tok)), chromedp.WaitVisible(chromedp.CSS("main")))
	for _, p := range []struct{ path, shot, wait string }{
		{"/console/agents", "console-agents.png", "table.list"},
		{"/console/agents/fraud-triage", "console-agent.png", "#rollout-arms"},
		{"/console/tools?q=transaction", "console-tools.png", "details.operation"},
		{"/console/usage", "console-usage.png", "figure.chart svg rect"},
		{"/console/audit?resource_type=agent", "console-audit.png", "table.list"},
		{"/console/audit/verify", "console-audit-verify.png", "#chain-state"},
		{"/console/schedules", "console-schedules.png", "table.list"},
		{"/console/webhooks", "console-webhooks.png", "table.list"},
		{"/console/webhooks/" + wh.ID, "console-webhook.png", "#live"},
	} {
		consoletest.Run(t, tab, p.path, chromedp.Navigate(h.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		consoletest.NoProblems(t, tab, p.path)
		consoletest.Axe(t, tab, p.path)
		consoletest.Screenshot(t, tab, p.shot)
	}
	consoletest.Run(t, tab, "verify", chromedp.Navigate(h.URL+"/console/audit/verify"), chromedp.WaitVisible(chromedp.ID("chain-state")))
	if state := consoletest.Eval[string](t, tab, `document.getElementById('chain-state').textContent`); state != "intact" {
		t.Errorf("the chain's state reads %q", state)
	}

	// Pick the two versions on the agent's page and compare them.
	consoletest.Run(t, tab, "pick versions", chromedp.Navigate(h.URL+"/console/agents/fraud-triage"),
		chromedp.SetValue(chromedp.CSS(`select[name="from"]`), "1"), chromedp.SetValue(chromedp.CSS(`select[name="to"]`), "2"),
		chromedp.Click(chromedp.CSS(`form[aria-label="Compare two versions"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`details[data-section="Expressions"] tr.row-changed`)))
	changed := consoletest.Eval[string](t, tab, `document.querySelector('details[data-section="Expressions"] tr.row-changed td.right').textContent`)
	if !strings.Contains(changed, "fraud_score.score:") || !strings.Contains(changed, "5000.0") {
		t.Errorf("the changed expression reads %q", changed)
	}
	consoletest.NoProblems(t, tab, "diff")
	consoletest.Axe(t, tab, "diff")
	consoletest.Screenshot(t, tab, "console-agent-diff.png")

	// An external version shows its url and governance instead of steps.
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "fraud-triage", "version": "3", "description": "Fraud triage, in Python",
		"external": map[string]any{"url": "https://203.0.113.7/fraud", "tools": []string{"payments", "cases"},
			"approvals": []any{map[string]any{"when": "operation == 'createCase'", "approver_scope": "approve:cases"}},
			"limits":    map[string]any{"max_tool_calls": 10}}}); r.Status != 201 {
		t.Fatalf("deploy an external version: %d %s", r.Status, r.Body)
	}
	consoletest.Run(t, tab, "external version", chromedp.Navigate(h.URL+"/console/agents/fraud-triage?version=3"),
		chromedp.WaitVisible(chromedp.ID("external-agent")))
	shown := consoletest.Eval[string](t, tab, `document.querySelector('section[aria-labelledby="definition-title"]').innerText`)
	for _, want := range []string{"https://203.0.113.7/fraud", "url: https://203.0.113.7/fraud", "max_attempts: 3 (default)",
		"approvals[0]: when operation == 'createCase'; by approve:cases", "max_tool_calls: 10", "cases\npayments"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the external version's section lacks %q:\n%s", want, shown)
		}
	}
	consoletest.NoProblems(t, tab, "external version")
	consoletest.Axe(t, tab, "external version")
	consoletest.Screenshot(t, tab, "console-agent-external.png")

	// From the replay's viewer to the diff of the versions it compared.
	consoletest.Run(t, tab, "viewer to diff", chromedp.Navigate(res.ViewerURL), chromedp.Click(chromedp.ID("version-diff")),
		chromedp.WaitVisible(chromedp.ID("diff-verdict")))
	if loc, err := chromedp.Run(tab, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/console/agents/fraud-triage/diff?from=1&to=2") {
		t.Errorf("the viewer's link led to %s (%v)", loc, err)
	}
}
