package httpapi_test

import (
	"strings"
	"testing"
)

// TestArchiveAVersionThenTheAgent walks the archive rules over HTTP: the
// default and a version with a running workflow are refused; an archived
// version cannot be invoked or replayed against but its history stays
// readable; archiving the whole agent frees its tools and hides it from
// the default listing.
func TestArchiveAVersionThenTheAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", adminScopes+" workflows:replay audit:read schedules:write")
	w.deployVersion(t, "2")
	ctx := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-1"}}
	first := w.invoke(t, tok, ctx)
	wf1 := first["workflow_id"].(string)

	wantProblem := func(r response, status int, code, mentions string) {
		t.Helper()
		d := r.problem(t)
		if r.Status != status || string(d.Code) != code || !strings.Contains(d.Detail, mentions) {
			t.Fatalf("got %d %s %q, want %d %s mentioning %q", r.Status, d.Code, d.Detail, status, code, mentions)
		}
	}
	wantProblem(h.do("DELETE", "/v1/agents/fraud-triage@1", tok, nil), 409, "conflict", "PUT /v1/agents/fraud-triage/default")
	wantProblem(h.do("DELETE", "/v1/agents/fraud-triage@9", tok, nil), 404, "agent-version-not-found", `"9"`)
	wantProblem(h.do("DELETE", "/v1/agents/nobody", tok, nil), 404, "not-found", "nobody")
	if r := h.do("DELETE", "/v1/agents/fraud-triage@2", h.token("acme", "agents:read"), nil); r.Status != 403 {
		t.Fatalf("archive without agents:write: %d %s", r.Status, r.Body)
	}

	// A version with a running workflow is refused, naming the workflow.
	release := gate(t, w)
	done := make(chan response, 1)
	go func() {
		done <- h.do("POST", "/v1/agents/fraud-triage@2/invoke", tok, ctx)
	}()
	running := runningWorkflow(t, h, tok)
	wantProblem(h.do("DELETE", "/v1/agents/fraud-triage@2", tok, nil), 409, "conflict", running)
	release()
	if r := <-done; r.Status != 200 {
		t.Fatalf("the gated invoke: %d %s", r.Status, r.Body)
	}

	if r := h.do("PUT", "/v1/agents/fraud-triage/default", tok, map[string]any{"version": "2"}); r.Status != 200 {
		t.Fatalf("promote 2: %d %s", r.Status, r.Body)
	}
	r := h.do("DELETE", "/v1/agents/fraud-triage@1", tok, nil)
	var archived map[string]any
	r.json(t, &archived)
	if r.Status != 200 || archived["ref"] != "fraud-triage@1" || archived["archived_at"] == nil {
		t.Fatalf("archive 1: %d %s", r.Status, r.Body)
	}

	wantProblem(h.do("POST", "/v1/agents/fraud-triage@1/invoke", tok, ctx), 409, "agent-version-archived", "fraud-triage@1")
	wantProblem(h.do("POST", "/v1/workflows/"+wf1+"/replay", tok, map[string]any{"target_agent_version": "fraud-triage@1"}),
		409, "agent-version-archived", "fraud-triage@1")
	wantProblem(h.do("PUT", "/v1/agents/fraud-triage/default", tok, map[string]any{"version": "1"}), 409, "agent-version-archived", "fraud-triage@1")
	rep := w.replay(t, tok, wf1, map[string]any{"target_agent_version": "fraud-triage@2"})
	if r := h.do("POST", "/v1/schedules", tok, map[string]any{"agent": "fraud-triage@1", "cron": "@daily", "goal": "g"}); r.Status != 422 ||
		!strings.Contains(string(r.Body), "archived") {
		t.Errorf("a schedule of an archived version: %d %s, want 422 saying it is archived", r.Status, r.Body)
	}
	// A schedule of the live default holds the whole agent until it goes.
	r = h.do("POST", "/v1/schedules", tok, map[string]any{"agent": "fraud-triage", "cron": "@daily", "goal": "g",
		"context": map[string]any{"transaction_id": "tx-1"}})
	var sch struct{ ID string }
	r.json(t, &sch)
	wantProblem(h.do("DELETE", "/v1/agents/fraud-triage", tok, nil), 409, "conflict", sch.ID)
	if r := h.do("DELETE", "/v1/schedules/"+sch.ID, tok, nil); r.Status != 200 {
		t.Fatalf("delete the schedule: %d %s", r.Status, r.Body)
	}

	// History stays readable: the workflow, its replay, the version.
	for _, path := range []string{"/v1/workflows/" + wf1, "/v1/replays/" + rep.ReplayID, "/v1/agents/fraud-triage@1"} {
		if r := h.do("GET", path, tok, nil); r.Status != 200 {
			t.Errorf("GET %s after the archive: %d %s", path, r.Status, r.Body)
		}
	}
	var versions struct {
		Versions []map[string]any `json:"versions"`
	}
	h.do("GET", "/v1/agents/fraud-triage/versions", tok, nil).json(t, &versions)
	for _, v := range versions.Versions {
		if got := v["archived_at"] != nil; got != (v["version"] == "1") {
			t.Errorf("version %v lists archived_at %v", v["version"], v["archived_at"])
		}
	}

	// The tools stay held by the live version 2 until the whole agent goes.
	var tools struct {
		Tools []struct{ ID, Name string } `json:"tools"`
	}
	h.do("GET", "/v1/tools", tok, nil).json(t, &tools)
	if len(tools.Tools) != 2 {
		t.Fatalf("tools: %v", tools.Tools)
	}
	if r := h.do("DELETE", "/v1/tools/"+tools.Tools[0].ID, tok, nil); r.Status != 409 {
		t.Fatalf("delete a tool a live version uses: %d %s", r.Status, r.Body)
	}
	r = h.do("DELETE", "/v1/agents/fraud-triage", tok, nil)
	r.json(t, &archived)
	if r.Status != 200 || archived["archived_at"] == nil || archived["versions_archived"] != 1.0 {
		t.Fatalf("archive the agent: %d %s", r.Status, r.Body)
	}
	for _, tool := range tools.Tools {
		if r := h.do("DELETE", "/v1/tools/"+tool.ID, tok, nil); r.Status != 200 {
			t.Errorf("delete %s once only archived versions named it: %d %s", tool.Name, r.Status, r.Body)
		}
	}
	wantProblem(h.do("POST", "/v1/agents/fraud-triage/invoke", tok, ctx), 409, "agent-version-archived", "deploy a new version")

	var list struct {
		Agents []map[string]any `json:"agents"`
	}
	h.do("GET", "/v1/agents", tok, nil).json(t, &list)
	if len(list.Agents) != 0 {
		t.Errorf("the archived agent is listed by default: %v", list.Agents)
	}
	h.do("GET", "/v1/agents?archived=true", tok, nil).json(t, &list)
	if len(list.Agents) != 1 || list.Agents[0]["archived_at"] == nil {
		t.Errorf("?archived=true lists %v, want the archived agent", list.Agents)
	}
	wantProblem(h.do("GET", "/v1/agents?archived=yes", tok, nil), 422, "validation-failed", "archived")

	var audit struct {
		Records []struct {
			Outcome  string `json:"outcome"`
			Resource struct {
				ID string `json:"id"`
			} `json:"resource"`
		} `json:"records"`
	}
	h.do("GET", "/v1/audit/query?action=agent.archive&outcome=success", tok, nil).json(t, &audit)
	var ids []string
	for _, rec := range audit.Records {
		ids = append(ids, rec.Resource.ID)
	}
	if strings.Join(ids, " ") != "fraud-triage fraud-triage@1" {
		t.Errorf("successful agent.archive records name %v, want the agent, then version 1 (newest first)", ids)
	}
}
