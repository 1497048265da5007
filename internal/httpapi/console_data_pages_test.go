package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/webhook"
)

// scorer is an agent of no tools at a threshold; version 2 adds a step.
func scorer(version string, threshold string, extra bool) map[string]any {
	steps := []any{
		map[string]any{"action": "score_it", "score": "context.amount > " + threshold + " ? 0.9 : 0.1"},
		map[string]any{"action": "route_it", "route": []any{map[string]any{"when": "score >= 0.8", "queue": "review"}, map[string]any{"queue": "standard"}}},
	}
	if extra {
		steps = append(steps, map[string]any{"action": "remember", "set": map[string]any{"seen": "true"}})
	}
	return map[string]any{"name": "scorer", "version": version, "description": "Scores at " + threshold,
		"definition": map[string]any{"tools": []string{}, "steps": steps, "outcome": "queue",
			"policies": map[string]any{"financial": map[string]any{"allow": "args.amount <= " + threshold}}}}
}

// TestConsoleAgentPages: the agents list, one agent's versions with its
// definition, the diff of two versions, and promoting a version through
// the form, which is PUT /v1/agents/{id}/default; a reader without
// agents:write sees no promote button.
func TestConsoleAgentPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", "agents:read agents:write agents:invoke workflows:read audit:read")
	for _, v := range []map[string]any{scorer("1", "1000.0", false), scorer("2", "5000.0", true)} {
		if r := h.do("POST", "/v1/agents", admin, v); r.Status != 201 {
			t.Fatalf("deploy: %d %s", r.Status, r.Body)
		}
	}
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, admin))

	status, page := consoletest.Get(t, c, h.URL+"/console/agents")
	if status != 200 || !strings.Contains(page, `<a href="/console/agents/scorer">scorer</a>`) {
		t.Fatalf("agents page: %d\n%s", status, page)
	}
	status, page = consoletest.Get(t, c, h.URL+"/console/agents/scorer")
	for _, want := range []string{
		`<h2 id="definition-title">Version 1 (default)</h2>`,
		"score_it.score: context.amount &gt; 1000.0 ? 0.9 : 0.1",
		"financial: allow args.amount &lt;= 1000.0",
		`<button type="submit">Make default<span class="visually-hidden">: version 2</span></button>`,
	} {
		if status != 200 || !strings.Contains(page, want) {
			t.Errorf("agent page (%d) lacks %s", status, want)
		}
	}

	status, page = consoletest.Get(t, c, h.URL+"/console/agents/scorer/diff?from=1&to=2")
	for _, want := range []string{
		`<details class="diff-section" open data-section="Expressions">`,
		`<details class="diff-section" open data-section="Steps">`,
		`<tr class="row-changed">`, `<tr class="row-added">`,
		"<code>score_it.score: context.amount &gt; 5000.0 ? 0.9 : 0.1</code>",
		"<code>remember: set seen</code>",
	} {
		if status != 200 || !strings.Contains(page, want) {
			t.Errorf("diff page (%d) lacks %s", status, want)
		}
	}
	if status, _ := consoletest.Get(t, c, h.URL+"/console/agents/scorer/diff?from=1&to=9"); status != http.StatusNotFound {
		t.Errorf("diff against a missing version: %d, want 404", status)
	}
	if status, page := consoletest.Get(t, c, h.URL+"/console/agents/scorer/diff?from=1"); status != http.StatusUnprocessableEntity || !strings.Contains(page, "to") {
		t.Errorf("diff without to: %d", status)
	}

	// A rollout of version 2 shows its arms side by side.
	if r := h.do("PUT", "/v1/agents/scorer/rollout", admin, map[string]any{"target": "2", "percent": 100,
		"checks": []map[string]any{{"name": "routed", "expr": "run.outcome != ''"}}}); r.Status != 201 {
		t.Fatalf("rollout: %d %s", r.Status, r.Body)
	}
	status, page = consoletest.Get(t, c, h.URL+"/console/agents/scorer")
	for _, want := range []string{`<h2 id="rollout-title">Rollout of version 2</h2>`, `<span class="badge ok">active</span>`,
		`<th scope="row">default</th>`, `<th scope="row">canary</th>`, `<th scope="col">routed (gate 100.0 %)</th>`} {
		if status != 200 || !strings.Contains(page, want) {
			t.Errorf("agent page with a rollout (%d) lacks %s", status, want)
		}
	}
	if r := h.do("DELETE", "/v1/agents/scorer/rollout", admin, nil); r.Status != 200 {
		t.Fatalf("end the rollout: %d %s", r.Status, r.Body)
	}

	_, page = consoletest.Get(t, c, h.URL+"/console/agents/scorer")
	form := url.Values{"csrf": {between(page, `name="csrf" value="`, `"`)}, "idempotency_key": {"promote-2"},
		"return": {"/console/agents/scorer"}, "version": {"2"}}
	resp, err := c.PostForm(h.URL+"/console/agents/scorer/default", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/agents/scorer" {
		t.Fatalf("promote: %d to %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	var got struct {
		DefaultVersion string `json:"default_version"`
	}
	h.do("GET", "/v1/agents/scorer", admin, nil).json(t, &got)
	if got.DefaultVersion != "2" {
		t.Errorf("default after promoting: %q", got.DefaultVersion)
	}
	var audited struct {
		Records []struct {
			Action string `json:"action"`
		} `json:"records"`
	}
	h.do("GET", "/v1/audit/query?action=agent.set_default", admin, nil).json(t, &audited)
	if len(audited.Records) != 1 {
		t.Errorf("promoting from the console was audited %d times as agent.set_default, want once", len(audited.Records))
	}

	reader := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, h.token("acme", "agents:read")))
	_, page = consoletest.Get(t, reader, h.URL+"/console/agents/scorer")
	if strings.Contains(page, "Make default") {
		t.Error("a reader without agents:write is offered to promote")
	}
	resp, err = reader.PostForm(h.URL+"/console/agents/scorer/default", url.Values{"csrf": {between(page, `name="csrf" value="`, `"`)}, "version": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("promote without agents:write: %d, want 403", resp.StatusCode)
	}
}

// TestConsoleAuditAndUsagePages: the audit query filters; verify shows the
// chain's state; the usage page draws its charts; the tools page searches.
func TestConsoleAuditAndUsagePages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "agents:read agents:write audit:read usage:read models:read tools:read")
	if r := h.do("POST", "/v1/agents", tok, scorer("1", "10.0", false)); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, tok))
	status, page := consoletest.Get(t, c, h.URL+"/console/audit?action=agent.deploy")
	if status != 200 || !strings.Contains(page, "<code>agent.deploy</code>") || strings.Contains(page, "<code>console.signin</code>") {
		t.Errorf("audit filtered by action (%d):\n%s", status, page)
	}
	if status, _ := consoletest.Get(t, c, h.URL+"/console/audit?outcome=maybe"); status != http.StatusUnprocessableEntity {
		t.Errorf("a bad outcome: %d, want 422", status)
	}
	status, page = consoletest.Get(t, c, h.URL+"/console/audit/verify")
	if status != 200 || !strings.Contains(page, `id="chain-state">intact<`) {
		t.Errorf("verify (%d):\n%s", status, page)
	}
	status, page = consoletest.Get(t, c, h.URL+"/console/usage?by=model&days=7")
	if status != 200 || !strings.Contains(page, `<title id="usage-tokens-title">Tokens per day by model</title>`) {
		t.Errorf("usage (%d):\n%s", status, page)
	}
	if status, _ := consoletest.Get(t, c, h.URL+"/console/tools?q=anything"); status != 200 {
		t.Errorf("tools search: %d", status)
	}
}

// TestConsoleSchedulesAndWebhooks: pausing and resuming a schedule and
// sending a delivery again from the console are the API's routes (their
// audit actions); a reader without the write scopes sees no such button.
func TestConsoleSchedulesAndWebhooks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", "agents:read agents:write agents:invoke workflows:read schedules:read schedules:write webhooks:read webhooks:write audit:read")
	if r := h.do("POST", "/v1/agents", admin, scorer("1", "10.0", false)); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	var sch, wh struct {
		ID string `json:"id"`
	}
	h.do("POST", "/v1/schedules", admin, map[string]any{"agent": "scorer", "cron": "@daily", "goal": "sweep the queue"}).json(t, &sch)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(rcv.Close)
	h.do("POST", "/v1/webhooks", admin, map[string]any{"url": rcv.URL, "events": []string{"workflow.completed"}}).json(t, &wh)
	if sch.ID == "" || wh.ID == "" {
		t.Fatalf("schedule %q, webhook %q", sch.ID, wh.ID)
	}
	if r := h.do("POST", "/v1/agents/scorer/invoke", admin, map[string]any{"goal": "g", "context": map[string]any{"amount": 5}}); r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	d := &webhook.Deliverer{Store: h.DB, Webhooks: h.DB, HTTP: http.DefaultClient, Timeout: time.Second}
	if n, err := d.RunOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("deliverer sent %d, %v", n, err)
	}

	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, admin))
	post := func(path, page string, form url.Values) {
		t.Helper()
		form.Set("csrf", between(page, `name="csrf" value="`, `"`))
		resp, err := c.PostForm(h.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	// The latest due time was skipped: the page says so, and why.
	if _, err := h.DB.SkipDue(t.Context(), sch.ID, time.Now().Add(-time.Minute).Truncate(time.Second), schedule.ReasonOverlap, nil); err != nil {
		t.Fatal(err)
	}
	_, page := consoletest.Get(t, c, h.URL+"/console/schedules")
	if !strings.Contains(page, "<code>"+sch.ID+"</code>") || !strings.Contains(page, ">Pause<") ||
		!strings.Contains(page, `<span class="muted">skipped: `+schedule.ReasonOverlap+`</span>`) {
		t.Fatalf("schedules page:\n%s", page)
	}
	post("/console/schedules/"+sch.ID+"/pause", page, url.Values{"return": {"/console/schedules"}})
	var got struct {
		Paused bool `json:"paused"`
	}
	h.do("GET", "/v1/schedules/"+sch.ID, admin, nil).json(t, &got)
	if !got.Paused {
		t.Error("the schedule is not paused after the console's pause")
	}
	_, page = consoletest.Get(t, c, h.URL+"/console/schedules")
	post("/console/schedules/"+sch.ID+"/resume", page, url.Values{})
	h.do("GET", "/v1/schedules/"+sch.ID, admin, nil).json(t, &got)
	if got.Paused {
		t.Error("the schedule is still paused after the console's resume")
	}

	_, page = consoletest.Get(t, c, h.URL+"/console/webhooks")
	if !strings.Contains(page, `href="/console/webhooks/`+wh.ID+`"`) {
		t.Fatalf("webhooks page:\n%s", page)
	}
	status, page := consoletest.Get(t, c, h.URL+"/console/webhooks/"+wh.ID+"?status=delivered")
	dlv := between(page, `/deliveries/`, `/retry"`)
	if status != 200 || dlv == "" || !strings.Contains(page, "<code>workflow.completed</code>") {
		t.Fatalf("deliveries page (%d):\n%s", status, page)
	}
	post("/console/webhooks/"+wh.ID+"/deliveries/"+dlv+"/retry", page, url.Values{})
	if n, err := d.RunOnce(t.Context()); err != nil || n != 1 {
		t.Errorf("after sending again from the console the deliverer sent %d, %v; want 1", n, err)
	}
	if status, _ := consoletest.Get(t, c, h.URL+"/console/webhooks/"+wh.ID+"?status=lost"); status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown status: %d, want 422", status)
	}
	var audited struct {
		Records []struct {
			Action string `json:"action"`
		} `json:"records"`
	}
	for _, action := range []string{"schedule.pause", "schedule.resume", "webhook.retry"} {
		h.do("GET", "/v1/audit/query?action="+action, admin, nil).json(t, &audited)
		if len(audited.Records) != 1 {
			t.Errorf("%s audited %d times, want once", action, len(audited.Records))
		}
	}

	reader := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, h.token("acme", "schedules:read webhooks:read")))
	for _, path := range []string{"/console/schedules", "/console/webhooks/" + wh.ID} {
		if _, page := consoletest.Get(t, reader, h.URL+path); strings.Contains(page, `method="post" action="/console/schedules/`) || strings.Contains(page, "/retry") {
			t.Errorf("%s offers an action to a reader", path)
		}
	}
}

// TestConsoleToolsShowWhereCallsGo: the tools page names each tool's
// endpoint, an OpenAPI tool's server as well as a GraphQL tool's endpoint.
func TestConsoleToolsShowWhereCallsGo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	var tool struct {
		BaseURL string `json:"base_url"`
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	h.do("GET", "/v1/tools", w.admin, nil).json(t, &list)
	for _, raw := range list.Tools {
		if strings.Contains(string(raw), `"name":"payments"`) {
			json.Unmarshal(raw, &tool)
		}
	}
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, w.admin))
	status, page := consoletest.Get(t, c, h.URL+"/console/tools")
	if tool.BaseURL == "" || status != 200 || !strings.Contains(page, "<code>"+tool.BaseURL+"</code>") {
		t.Errorf("the tools page (%d) does not name payments' endpoint %q:\n%s", status, tool.BaseURL, page)
	}
}

// TestConsoleWorkflowHeadingAndReplayDefault: a workflow's page is headed
// by its agent and goal, its id beneath, and its replay form offers the
// agent's newest other version first.
func TestConsoleWorkflowHeadingAndReplayDefault(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	def, err := os.ReadFile("testdata/fraud_triage.json")
	if err != nil {
		t.Fatal(err)
	}
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "fraud-triage", "definition": json.RawMessage(def)}); r.Status != 201 {
		t.Fatalf("deploy version 2: %d %s", r.Status, r.Body)
	}
	var wf struct {
		ID string `json:"workflow_id"`
	}
	r := h.do("POST", "/v1/agents/fraud-triage@1/invoke", w.admin, map[string]any{"goal": "triage tx-1", "context": map[string]any{"transaction_id": "tx-1"}})
	r.json(t, &wf)
	if wf.ID == "" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	tok := h.token("acme", adminScopes+" workflows:replay")
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, tok))
	status, page := consoletest.Get(t, c, h.URL+"/console/workflows/"+wf.ID)
	if status != 200 || !strings.Contains(page, "<h1>fraud-triage: triage tx-1</h1>") || !strings.Contains(page, `<p class="wf-id"><code>`+wf.ID+`</code></p>`) {
		t.Errorf("the workflow page's heading (%d):\n%s", status, page)
	}
	if !strings.Contains(page, `<option value="fraud-triage@2" selected>`) {
		t.Errorf("the replay form does not offer version 2 first:\n%s", page)
	}
}
