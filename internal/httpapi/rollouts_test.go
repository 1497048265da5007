package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// deployFinishing deploys a version of name whose one step finishes it
// with outcome.
func deployFinishing(t *testing.T, h *harness, token, name, outcome string) {
	t.Helper()
	def := `{"tools": [], "steps": [{"action": "done", "finish": "` + outcome + `"}]}`
	if r := h.do("POST", "/v1/agents", token, map[string]any{"name": name, "definition": json.RawMessage(def)}); r.Status != 201 {
		t.Fatalf("deploy %s: %d %s", name, r.Status, r.Body)
	}
}

type rolloutJSON struct {
	ID          string  `json:"id"`
	Target      string  `json:"target"`
	Percent     float64 `json:"percent"`
	Mode        string  `json:"mode"`
	State       string  `json:"state"`
	FailedCheck string  `json:"failed_check"`
	Arms        []struct {
		Arm     string `json:"arm"`
		Version string `json:"version"`
		Runs    int    `json:"runs"`
	} `json:"arms"`
}

// TestRolloutAPI: PUT starts a rollout (the same request again finds it,
// another is 409), bad input is 422 naming the field, a workflow says its
// arm, GET shows the arms side by side, DELETE ends it; each change is
// audited.
func TestRolloutAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", adminScopes+" audit:read")
	deployFinishing(t, h, admin, "triage", "cleared")
	deployFinishing(t, h, admin, "triage", "escalated")
	deployFinishing(t, h, admin, "other", "cleared")
	deployFinishing(t, h, admin, "other", "cleared")
	if r := h.do("DELETE", "/v1/agents/triage@2", admin, nil); r.Status != 200 {
		t.Fatalf("archive triage@2: %d %s", r.Status, r.Body)
	}
	deployFinishing(t, h, admin, "triage", "escalated")

	if r := h.do("GET", "/v1/agents/triage/rollout", admin, nil); r.Status != 404 {
		t.Errorf("GET before any rollout: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"target": "2", "percent": 10}, "target"},       // archived
		{map[string]any{"target": "1", "percent": 10}, "target"},       // the default itself
		{map[string]any{"target": "other@2", "percent": 10}, "target"}, // another agent's
		{map[string]any{"target": "9", "percent": 10}, "target"},       // unknown
		{map[string]any{"target": "3", "percent": 101}, "percent"},     // out of range
		{map[string]any{"target": "3"}, "percent"},                     // missing
		{map[string]any{"target": "3", "percent": 5, "mode": "blue"}, "mode"},
		{map[string]any{"target": "3", "percent": 5, "sticky": "context.("}, "sticky"},
		{map[string]any{"target": "3", "percent": 5, "checks": []map[string]any{{"name": "ok", "expr": "run.outcome =="}}}, "checks[0].expr"},
		{map[string]any{"target": "3", "percent": 5, "checks": []map[string]any{{"name": "ok", "expr": "original.outcome == 'x'"}}}, "checks[0].expr"},
		{map[string]any{"target": "3", "percent": 5, "min_runs": 0}, "min_runs"},
	} {
		r := h.do("PUT", "/v1/agents/triage/rollout", admin, tc.body)
		if r.Status != 422 {
			t.Errorf("PUT %v: %d %s, want 422", tc.body, r.Status, r.Body)
			continue
		}
		if p := r.problem(t); len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("PUT %v: errors %+v, want the field %s", tc.body, p.Errors, tc.field)
		}
	}

	put := map[string]any{"target": "3", "percent": 100, "sticky": "context.customer_id",
		"checks": []map[string]any{{"name": "cleared", "expr": "run.outcome == 'cleared'"}}, "min_runs": 50}
	r := h.do("PUT", "/v1/agents/triage/rollout", admin, put)
	if r.Status != 201 {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	var ro rolloutJSON
	r.json(t, &ro)
	if ro.State != "active" || ro.Target != "3" || ro.Mode != "canary" || len(ro.Arms) != 2 {
		t.Fatalf("rollout = %s", r.Body)
	}
	if again := h.do("PUT", "/v1/agents/triage/rollout", admin, put); again.Status != 200 || !strings.Contains(string(again.Body), ro.ID) {
		t.Errorf("the same PUT again: %d %s, want 200 with %s", again.Status, again.Body, ro.ID)
	}
	other := map[string]any{"target": "3", "percent": 20}
	if r := h.do("PUT", "/v1/agents/triage/rollout", admin, other); r.Status != 409 {
		t.Errorf("another PUT while one is active: %d %s, want 409", r.Status, r.Body)
	}
	bad := map[string]any{"target": "3", "percent": 120}
	if r := h.do("PUT", "/v1/agents/triage/rollout", admin, bad); r.Status != 422 || len(r.problem(t).Errors) != 1 || r.problem(t).Errors[0].Field != "percent" {
		t.Errorf("a bad PUT while one is active: %d %s, want 422 naming percent", r.Status, r.Body)
	}

	inv := h.do("POST", "/v1/agents/triage/invoke", admin, map[string]any{"goal": "triage", "context": map[string]any{"customer_id": "c1"}})
	if inv.Status != 200 {
		t.Fatalf("invoke: %d %s", inv.Status, inv.Body)
	}
	var wf struct {
		WorkflowID   string `json:"workflow_id"`
		AgentVersion string `json:"agent_version"`
		Rollout      *struct {
			ID  string `json:"id"`
			Arm string `json:"arm"`
		} `json:"rollout"`
	}
	inv.json(t, &wf)
	if wf.AgentVersion != "3" {
		t.Errorf("at 100 %% the invocation ran version %s", wf.AgentVersion)
	}
	if wf.Rollout == nil || wf.Rollout.ID != ro.ID || wf.Rollout.Arm != "canary" {
		t.Errorf("invoke's answer: rollout %+v, want canary of %s", wf.Rollout, ro.ID)
	}
	wf.Rollout = nil
	got := h.do("GET", "/v1/workflows/"+wf.WorkflowID, admin, nil)
	got.json(t, &wf)
	if wf.Rollout == nil || wf.Rollout.ID != ro.ID || wf.Rollout.Arm != "canary" {
		t.Errorf("GET workflow: rollout %+v, want canary of %s", wf.Rollout, ro.ID)
	}
	pinned := h.do("POST", "/v1/agents/triage@1/invoke", admin, map[string]any{"goal": "triage"})
	pinned.json(t, &wf)
	if wf.AgentVersion != "1" {
		t.Errorf("a pinned invocation ran version %s", wf.AgentVersion)
	}

	r = h.do("GET", "/v1/agents/triage/rollout", admin, nil)
	r.json(t, &ro)
	if r.Status != 200 || ro.Arms[0].Arm != "default" || ro.Arms[0].Version != "1" || ro.Arms[1].Arm != "canary" || ro.Arms[1].Version != "3" {
		t.Errorf("GET: %d %s", r.Status, r.Body)
	}
	r = h.do("DELETE", "/v1/agents/triage/rollout", admin, nil)
	r.json(t, &ro)
	if r.Status != 200 || ro.State != "ended" {
		t.Errorf("DELETE: %d %s", r.Status, r.Body)
	}
	if r := h.do("DELETE", "/v1/agents/triage/rollout", admin, nil); r.Status != 404 {
		t.Errorf("DELETE again: %d %s, want 404", r.Status, r.Body)
	}
	inv = h.do("POST", "/v1/agents/triage/invoke", admin, map[string]any{"goal": "triage", "context": map[string]any{"customer_id": "c1"}})
	inv.json(t, &wf)
	if wf.AgentVersion != "1" {
		t.Errorf("after the end the invocation ran version %s", wf.AgentVersion)
	}
	if r := h.do("PUT", "/v1/agents/triage/rollout", admin, other); r.Status != 201 {
		t.Errorf("a new rollout after the end: %d %s", r.Status, r.Body)
	}
	audits := h.do("GET", "/v1/audit/query?resource_type=agent&resource_id=triage", admin, nil)
	for _, action := range []string{"agent.rollout.start", "agent.rollout.end", "agent.rollout.read"} {
		if !strings.Contains(string(audits.Body), `"`+action+`"`) {
			t.Errorf("no %s record in %s", action, audits.Body)
		}
	}
}
