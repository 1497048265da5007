package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type impactJSON struct {
	Revision int    `json:"revision"`
	Status   string `json:"status"`
	Breaking bool   `json:"breaking"`
	Impacted bool   `json:"impacted"`
	Versions []struct {
		Agent    string `json:"agent"`
		Version  string `json:"version"`
		External bool   `json:"external"`
		Problems []struct {
			Kind, Step, Operation, Path, Detail string
		} `json:"problems"`
	} `json:"versions"`
	Calls struct {
		Checked, Total int
		Truncated      bool
		Items          []struct {
			WorkflowID string   `json:"workflow_id"`
			Step       int      `json:"step"`
			Operation  string   `json:"operation"`
			Part       string   `json:"part"`
			Errors     []string `json:"errors"`
		} `json:"items"`
	} `json:"calls"`
}

// problems lists an impact's version problems as "agent@version step
// kind path".
func (im impactJSON) problems() []string {
	var out []string
	for _, v := range im.Versions {
		for _, p := range v.Problems {
			out = append(out, strings.TrimSpace(v.Agent+"@"+v.Version+" "+p.Step+" "+p.Kind+" "+p.Path))
		}
	}
	slices.Sort(out)
	return out
}

// TestToolRevisionImpact: an agent's workflow calls the issues API as
// description A has it; B breaks it. The impact names the steps of the
// deployed versions B breaks (and not a version B leaves alone) and the
// recorded calls whose arguments or responses no longer fit B.
func TestToolRevisionImpact(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read agents:write agents:invoke workflows:read tool:issues")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/issues":
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "1", "title": "broken", "email": "a@example.com"})
		case "/users":
			_ = json.NewEncoder(w).Encode(map[string]any{"users": []string{"alice"}})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "7"})
		}
	}))
	t.Cleanup(api.Close)
	at := func(doc string) string {
		return strings.NewReplacer("https://issues.example/v1", api.URL, "https://issues.example/v2", api.URL).Replace(doc)
	}
	spec := newVersionedSpec(t, at(issuesA))
	tl := h.mustRegister(tok, map[string]any{"name": "issues", "type": "openapi", "spec_url": spec.URL})

	deploy := func(name string, steps ...map[string]any) {
		t.Helper()
		def := map[string]any{"tools": []string{"issues"}, "steps": append(steps, map[string]any{"action": "done", "finish": "completed"})}
		if r := h.do("POST", "/v1/agents", tok, map[string]any{"name": name, "definition": def}); r.Status != 201 {
			t.Fatalf("deploy %s: %d %s", name, r.Status, r.Body)
		}
	}
	deploy("triage",
		map[string]any{"action": "list", "call": "issues.listIssues", "args": map[string]any{"state": "'all'", "limit": 5}},
		map[string]any{"action": "users", "call": "issues.listUsers", "args": map[string]any{"page": 2}})
	deploy("reader", map[string]any{"action": "read", "call": "issues.getIssue", "args": map[string]any{"id": "context.id"}})
	deploy("janitor", map[string]any{"action": "drop", "call": "issues.deleteIssue", "args": map[string]any{"id": "'7'"}})
	if r := h.do("POST", "/v1/agents/triage/invoke", tok, map[string]any{"goal": "list the open issues"}); r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/agents/reader/invoke", tok, map[string]any{"goal": "read", "context": map[string]any{"id": "7"}}); r.Status != 200 {
		t.Fatalf("invoke reader: %d %s", r.Status, r.Body)
	}

	spec.set(at(issuesB))
	if got, r := h.refresh(tok, tl.ID); r.Status != 200 || got.Status != "pending" || got.Revision != 1 {
		t.Fatalf("refresh to B: %d %s", r.Status, r.Body)
	}
	var im impactJSON
	r := h.do("GET", "/v1/tools/"+tl.ID+"/revisions/1/impact", h.token("acme", "tools:read"), nil)
	if r.Status != 200 {
		t.Fatalf("impact: %d %s", r.Status, r.Body)
	}
	r.json(t, &im)
	if !im.Impacted || !im.Breaking || im.Status != "pending" {
		t.Errorf("impact: impacted %v breaking %v status %q, want true, true, pending", im.Impacted, im.Breaking, im.Status)
	}
	want := []string{
		"janitor@1 drop operation_removed",
		"triage@1 list literal_invalid state",
		"triage@1 list required_missing org",
		"triage@1 users literal_invalid page",
	}
	if diff := cmp.Diff(want, im.problems()); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	// Three calls recorded (listIssues, listUsers, getIssue): the first two
	// no longer fit, getIssue did not change.
	if im.Calls.Checked != 3 || im.Calls.Total != 2 || len(im.Calls.Items) != 2 || im.Calls.Truncated {
		t.Fatalf("calls: %+v", im.Calls)
	}
	var calls []string
	for _, c := range im.Calls.Items {
		if c.WorkflowID == "" || c.Step == 0 {
			t.Errorf("call without its workflow or step: %+v", c)
		}
		calls = append(calls, c.Operation+" "+c.Part+" "+strings.Join(c.Errors, "; "))
	}
	slices.Sort(calls)
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "listIssues args ") || !strings.Contains(calls[0], "org") ||
		!strings.Contains(calls[0], "args/state") || !strings.HasPrefix(calls[1], "listUsers args args/page") {
		t.Errorf("calls: %q", calls)
	}

	// since: a period with nothing in it checks nothing; a bad one is 422
	// naming since; unknown revisions 404.
	h.do("GET", "/v1/tools/"+tl.ID+"/revisions/1/impact?since=1ns", tok, nil).json(t, &im)
	if im.Calls.Checked != 0 || len(im.Versions) != 2 {
		t.Errorf("impact of the last nanosecond: %d calls checked, %d versions", im.Calls.Checked, len(im.Versions))
	}
	for _, bad := range []string{"x", "-1h", "100d"} {
		r := h.do("GET", "/v1/tools/"+tl.ID+"/revisions/1/impact?since="+bad, tok, nil)
		if r.Status != 422 || r.problem(t).Errors[0].Field != "since" {
			t.Errorf("since=%s: %d %s", bad, r.Status, r.Body)
		}
	}
	for _, n := range []string{"2", "0", "x"} {
		if r := h.do("GET", "/v1/tools/"+tl.ID+"/revisions/"+n+"/impact", tok, nil); r.Status != 404 {
			t.Errorf("impact of revision %s: %d %s", n, r.Status, r.Body)
		}
	}

	// Applied, with a version written for B: its calls' arguments fit, and
	// the listIssues answer still carries email, which B's result no
	// longer has: that response is named.
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/revisions/1/apply", tok, nil); r.Status != 200 {
		t.Fatalf("apply: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/agents", tok, map[string]any{"name": "triage", "definition": map[string]any{"tools": []string{"issues"}, "steps": []any{
		map[string]any{"action": "list", "call": "issues.listIssues", "args": map[string]any{"state": "'open'", "org": "'acme'"}},
		map[string]any{"action": "users", "call": "issues.listUsers", "args": map[string]any{"page": "'2'"}},
		map[string]any{"action": "done", "finish": "completed"}}}, "promote": true}); r.Status != 201 {
		t.Fatalf("deploy triage@2: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/agents/triage/invoke", tok, map[string]any{"goal": "list the open issues"}); r.Status != 200 {
		t.Fatalf("invoke triage@2: %d %s", r.Status, r.Body)
	}
	h.do("GET", "/v1/tools/"+tl.ID+"/revisions/1/impact", tok, nil).json(t, &im)
	if im.Status != "applied" || im.Calls.Checked != 5 || im.Calls.Total != 3 {
		t.Fatalf("impact of the applied revision: %+v", im.Calls)
	}
	if c := im.Calls.Items[0]; c.Operation != "listIssues" || c.Part != "response" || len(c.Errors) != 1 || !strings.HasPrefix(c.Errors[0], "response.email: ") {
		t.Errorf("the newest call: %+v", c)
	}
	if diff := cmp.Diff(want, im.problems()); diff != "" {
		t.Errorf("versions after triage@2 (-want +got):\n%s", diff)
	}
}
