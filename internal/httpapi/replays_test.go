package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const replayScopes = adminScopes + " workflows:replay audit:read"

// deployVersion deploys a variant of the fraud-triage definition, edited
// by replacing old with new in its text, without promoting it.
func (w *fraudWorld) deployVersion(t *testing.T, version string, edits ...string) {
	t.Helper()
	def, err := os.ReadFile("testdata/fraud_triage.json")
	if err != nil {
		t.Fatal(err)
	}
	text := string(def)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("definition has no %q", edits[i])
		}
		text = strings.ReplaceAll(text, edits[i], edits[i+1])
	}
	r := w.h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "fraud-triage", "version": version, "definition": json.RawMessage(text)})
	if r.Status != 201 {
		t.Fatalf("deploy %s: %d %s", version, r.Status, r.Body)
	}
}

type replayResult struct {
	ReplayID         string         `json:"replay_id"`
	WorkflowID       string         `json:"workflow_id"`
	Target           string         `json:"target_agent_version"`
	DryRun           bool           `json:"dry_run"`
	OriginalOutcome  string         `json:"original_outcome"`
	ReplayOutcome    string         `json:"replay_outcome"`
	Delta            map[string]int `json:"delta"`
	ViewerURL        string         `json:"viewer_url"`
	ReplayWorkflowID string         `json:"replay_workflow_id"`
	Steps            []struct {
		Kind     string         `json:"kind"`
		Fields   []string       `json:"changed_fields"`
		Original map[string]any `json:"original"`
		Replay   map[string]any `json:"replay"`
	} `json:"steps"`
}

func (w *fraudWorld) replay(t *testing.T, token, wfID string, body map[string]any) replayResult {
	t.Helper()
	r := w.h.do("POST", "/v1/workflows/"+wfID+"/replay", token, body)
	if r.Status != 201 {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	var res replayResult
	r.json(t, &res)
	if strings.Contains(string(r.Body), "0001-01-01") {
		t.Errorf("the replay shows a zero time: %s", r.Body)
	}
	if loc := r.Header.Get("Location"); loc != "/v1/replays/"+res.ReplayID {
		t.Errorf("Location = %q, want /v1/replays/%s", loc, res.ReplayID)
	}
	return res
}

func delta(added, changed, removed, calls int) map[string]int {
	return map[string]int{"steps_added": added, "steps_changed": changed, "steps_removed": removed, "tool_calls_changed": calls}
}

func TestReplayRaisedThresholdClearsAnEscalatedWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	if wf["outcome"] != "escalated" {
		t.Fatalf("v1 outcome = %v, want escalated", wf["outcome"])
	}
	before := w.payments.Load() + w.cases.Load()

	res := w.replay(t, tok, wf["workflow_id"].(string), map[string]any{"target_agent_version": "fraud-triage@2"})
	if res.OriginalOutcome != "escalated" || res.ReplayOutcome != "cleared" || !res.DryRun {
		t.Errorf("outcomes %s → %s (dry run %v), want escalated → cleared, dry run", res.OriginalOutcome, res.ReplayOutcome, res.DryRun)
	}
	if diff := cmp.Diff(delta(0, 2, 1, 1), res.Delta); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
	var kinds []string
	for _, e := range res.Steps {
		kinds = append(kinds, e.Kind+":"+strings.Join(e.Fields, ","))
	}
	if diff := cmp.Diff([]string{"same:", "changed:score", "changed:queue", "removed:"}, kinds); diff != "" {
		t.Errorf("aligned steps (-want +got):\n%s", diff)
	}
	if after := w.payments.Load() + w.cases.Load(); after != before {
		t.Errorf("the tools received %d requests during a dry run, want none", after-before)
	}

	// The same replay again gives the same result.
	again := w.replay(t, tok, wf["workflow_id"].(string), map[string]any{"target_agent_version": "fraud-triage@2", "workflow_id": wf["workflow_id"]})
	if diff := cmp.Diff(res.Steps, again.Steps); diff != "" || again.ReplayOutcome != res.ReplayOutcome {
		t.Errorf("a second replay differs (-first +second):\n%s", diff)
	}

	// Read back, and listed by workflow and target.
	r := h.do("GET", "/v1/replays/"+res.ReplayID, tok, nil)
	var got replayResult
	r.json(t, &got)
	if r.Status != 200 || got.ReplayOutcome != "cleared" || got.ViewerURL == "" {
		t.Errorf("GET replay: %d %s", r.Status, r.Body)
	}
	r = h.do("GET", "/v1/replays?workflow_id="+res.WorkflowID+"&target=fraud-triage@2&limit=1", tok, nil)
	var list struct {
		Replays    []replayResult `json:"replays"`
		NextCursor *string        `json:"next_cursor"`
	}
	r.json(t, &list)
	if r.Status != 200 || len(list.Replays) != 1 || list.Replays[0].ReplayID != again.ReplayID || list.NextCursor == nil {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	r = h.do("GET", "/v1/replays?workflow_id="+res.WorkflowID+"&cursor="+*list.NextCursor, tok, nil)
	list.Replays = nil
	r.json(t, &list)
	if len(list.Replays) != 1 || list.Replays[0].ReplayID != res.ReplayID {
		t.Errorf("second page: %s", r.Body)
	}

	// Another tenant sees neither the workflow nor the replay.
	other := h.token("globex", replayScopes)
	if r := h.do("POST", "/v1/workflows/"+res.WorkflowID+"/replay", other, map[string]any{"target_agent_version": "fraud-triage@2"}); r.Status != 404 {
		t.Errorf("another tenant's replay: %d, want 404", r.Status)
	}
	if r := h.do("GET", "/v1/replays/"+res.ReplayID, other, nil); r.Status != 404 {
		t.Errorf("another tenant's GET: %d, want 404", r.Status)
	}

	// The replay is audited, once, as workflow.replay.
	r = h.do("GET", "/v1/audit/query?action=workflow.replay&workflow_id="+res.WorkflowID, tok, nil)
	var audit struct {
		Records []struct {
			Resource map[string]string `json:"resource"`
			Details  map[string]any    `json:"details"`
		} `json:"records"`
	}
	r.json(t, &audit)
	if len(audit.Records) != 2 || audit.Records[1].Resource["id"] != res.ReplayID || audit.Records[1].Details["replay_outcome"] != "cleared" {
		t.Errorf("audit records: %s", r.Body)
	}
}

func TestReplayCountsEachKindOfChangeOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	id := wf["workflow_id"].(string)
	tests := []struct {
		version string
		edits   []string
		outcome string
		delta   map[string]int
	}{
		{"added", []string{`{"action": "route_queue"`, `{"action": "note", "set": {"note": "'checked'"}},
    {"action": "route_queue"`}, "escalated", delta(1, 0, 0, 0)},
		{"removed", []string{`"when": "queue == 'fraud-review'"`, `"when": "false"`}, "escalated", delta(0, 0, 1, 1)},
		{"changed-call", []string{`"amount": "txn.amount"}`, `"amount": "txn.amount", "priority": "'high'"}`}, "escalated", delta(0, 1, 0, 1)},
		{"policy", []string{`args.amount <= 5000.0`, `args.amount <= 1000.0`}, "denied", delta(0, 1, 0, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			w.deployVersion(t, tc.version, tc.edits...)
			res := w.replay(t, tok, id, map[string]any{"target_agent_version": "fraud-triage@" + tc.version})
			if res.ReplayOutcome != tc.outcome {
				t.Errorf("replay outcome = %s, want %s", res.ReplayOutcome, tc.outcome)
			}
			if diff := cmp.Diff(tc.delta, res.Delta); diff != "" {
				t.Errorf("delta (-want +got):\n%s", diff)
			}
			if tc.version == "policy" {
				last := res.Steps[len(res.Steps)-1]
				if last.Kind != "changed" || last.Replay["status"] != "denied" {
					t.Errorf("open_case = %+v, want changed to denied", last)
				}
			}
		})
	}
	if n := w.cases.Load(); n != 1 {
		t.Errorf("cases received %d requests, want only the original's", n)
	}
}

func TestReplayValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1"}})
	id := wf["workflow_id"].(string)
	tests := []struct {
		name   string
		token  string
		id     string
		body   any
		status int
		code   string
	}{
		{"no target", tok, id, map[string]any{}, 422, "validation-failed"},
		{"target without version", tok, id, map[string]any{"target_agent_version": "fraud-triage"}, 422, "validation-failed"},
		{"body id differs", tok, id, map[string]any{"target_agent_version": "fraud-triage@1", "workflow_id": "wf_other"}, 422, "validation-failed"},
		{"unknown version", tok, id, map[string]any{"target_agent_version": "fraud-triage@9"}, 404, "agent-version-not-found"},
		{"unknown agent", tok, id, map[string]any{"target_agent_version": "nobody@1"}, 404, "agent-version-not-found"},
		{"unknown workflow", tok, "wf_01JD0000000000000000000000", map[string]any{"target_agent_version": "fraud-triage@1"}, 404, "not-found"},
		{"unknown field", tok, id, map[string]any{"target_agent_version": "fraud-triage@1", "dryrun": false}, 400, "malformed-request"},
		{"no replay scope", h.token("acme", adminScopes), id, map[string]any{"target_agent_version": "fraud-triage@1"}, 403, "insufficient-scope"},
		{"real run without agents:invoke", h.token("acme", "workflows:replay tool:*"), id, map[string]any{"target_agent_version": "fraud-triage@1", "dry_run": false}, 403, "insufficient-scope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/workflows/"+tc.id+"/replay", tc.token, tc.body)
			if r.Status != tc.status || string(r.problem(t).Code) != tc.code {
				t.Errorf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
		})
	}

	// A running workflow cannot be replayed yet.
	release := gate(t, w)
	calls := w.payments.Load()
	started := make(chan string, 1)
	go func() {
		wf := w.invoke(t, tok, map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "tx_2"}})
		started <- wf["workflow_id"].(string)
	}()
	waitFor(t, func() bool { return w.payments.Load() > calls })
	r := h.do("POST", "/v1/workflows/"+runningWorkflow(t, h, tok)+"/replay", tok, map[string]any{"target_agent_version": "fraud-triage@1"})
	release()
	if r.Status != 409 || r.problem(t).Code != "workflow-not-replayable" {
		t.Errorf("replay of a running workflow: %d %s, want 409 workflow-not-replayable", r.Status, r.Body)
	}
	<-started
}

func TestReplayThatIsNotADryRunRunsANewWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	payments := w.payments.Load()

	res := w.replay(t, tok, wf["workflow_id"].(string), map[string]any{"target_agent_version": "fraud-triage@2", "dry_run": false})
	if res.DryRun || res.ReplayWorkflowID == "" || res.ReplayOutcome != "cleared" {
		t.Fatalf("replay = %+v, want a real run ending cleared", res)
	}
	if diff := cmp.Diff(delta(0, 2, 1, 1), res.Delta); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
	if got := w.payments.Load(); got != payments+1 {
		t.Errorf("payments received %d requests, want one more", got-payments)
	}
	r := h.do("GET", "/v1/workflows/"+res.ReplayWorkflowID, tok, nil)
	var nw map[string]any
	r.json(t, &nw)
	if nw["replay_of"] != wf["workflow_id"] || nw["agent_version"] != "2" || nw["outcome"] != "cleared" {
		t.Errorf("the new workflow: %s", r.Body)
	}
}

func TestReplayViewerPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := h.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	res := w.replay(t, tok, wf["workflow_id"].(string), map[string]any{"target_agent_version": "fraud-triage@2"})
	if !strings.HasPrefix(res.ViewerURL, h.URL+"/replays/"+res.ReplayID+"?") {
		t.Fatalf("viewer_url = %s, want one under %s", res.ViewerURL, h.URL)
	}
	u, _ := url.Parse(res.ViewerURL)

	r := h.do("GET", u.RequestURI(), "", nil)
	if r.Status != 200 {
		t.Fatalf("viewer: %d %s", r.Status, r.Body)
	}
	for k, v := range map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP = %q", csp)
	}
	page := string(r.Body)
	for _, want := range []string{"escalated", "cleared", "fraud-triage@2", "tx_1200"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}

	// A link signed by a caller without tool scopes shows no bodies.
	narrow := h.token("acme", "workflows:replay")
	r = h.do("GET", "/v1/replays/"+res.ReplayID, narrow, nil)
	var got replayResult
	r.json(t, &got)
	if o := got.Steps[0].Original; o["result"] != nil || o["args"] != nil {
		t.Errorf("a caller without tool:payments sees its bodies: %v", o)
	}
	nu, _ := url.Parse(got.ViewerURL)
	if r := h.do("GET", nu.RequestURI(), "", nil); r.Status != 200 || strings.Contains(string(r.Body), "tx_1200") {
		t.Errorf("narrow link: %d, shows bodies: %v", r.Status, strings.Contains(string(r.Body), "tx_1200"))
	}

	// Tampered or foreign links are 404.
	q := u.Query()
	for name, mutate := range map[string]func(url.Values) string{
		"sig":   func(q url.Values) string { q.Set("sig", strings.Repeat("0", 64)); return "/replays/" + res.ReplayID },
		"tools": func(q url.Values) string { q.Set("tools", "payments"); return "/replays/" + res.ReplayID },
		"id":    func(q url.Values) string { return "/replays/rpl_01JD0000000000000000000000" },
		"none":  func(q url.Values) string { q.Del("sig"); return "/replays/" + res.ReplayID },
	} {
		c := url.Values{}
		for k, v := range q {
			c[k] = append([]string(nil), v...)
		}
		path := mutate(c)
		if r := h.do("GET", path+"?"+c.Encode(), "", nil); r.Status != http.StatusNotFound {
			t.Errorf("tampered %s: %d, want 404", name, r.Status)
		}
	}

	// Each view is audited in the replay's tenant.
	r = h.do("GET", "/v1/audit/query?action=replay.view", tok, nil)
	var audit struct {
		Records []map[string]any `json:"records"`
	}
	r.json(t, &audit)
	if len(audit.Records) != 2 {
		t.Errorf("replay.view records: %s", r.Body)
	}
	if strings.Contains(string(r.Body), q.Get("sig")) {
		t.Errorf("the audit log holds the signature")
	}
}

// TestReplayAcrossReplicas makes a replay on one replica of a PostgreSQL
// deployment and reads it, and opens its viewer link, on the other: the
// replay and the viewer's key live in the shared store.
func TestReplayAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs, _ := newReplicas(t, 2)
	one, two := rs[0].harness(t), rs[1].harness(t)
	w := newFraudWorld(t, one)
	w.amounts.Store("tx_1200", 1200.0)
	w.deployVersion(t, "2", "txn.amount > 1000.0", "txn.amount > 5000.0")
	tok := one.token("acme", replayScopes)
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1200"}})
	res := w.replay(t, tok, wf["workflow_id"].(string), map[string]any{"target_agent_version": "fraud-triage@2"})

	r := two.do("GET", "/v1/replays/"+res.ReplayID, tok, nil)
	var got replayResult
	r.json(t, &got)
	if r.Status != 200 || got.ReplayOutcome != "cleared" || got.Delta["steps_removed"] != 1 {
		t.Fatalf("replica 2 reads: %d %s", r.Status, r.Body)
	}
	u, err := url.Parse(res.ViewerURL)
	if err != nil || u.Host != "agentplane.test" {
		t.Fatalf("viewer_url %q is not under the public URL", res.ViewerURL)
	}
	if r := two.do("GET", u.RequestURI(), "", nil); r.Status != 200 || !strings.Contains(string(r.Body), "cleared") {
		t.Errorf("replica 2 serves the link made on replica 1: %d", r.Status)
	}
}

// TestARefusedViewerLinkIsAPageForBrowsers: a bad signed link is a 404
// problem document for a program and an HTML page for a browser.
func TestARefusedViewerLinkIsAPageForBrowsers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	path := "/replays/rpl_01J00000000000000000000000?exp=1&tools=*&sig=" + strings.Repeat("ab", 32)
	r := h.do("GET", path, "", nil)
	if r.Status != http.StatusNotFound || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("without Accept: %d %s, want a 404 problem document", r.Status, r.Header.Get("Content-Type"))
	}
	r = h.do("GET", path, "", nil, "Accept", "text/html,application/xhtml+xml")
	if r.Status != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(r.Body), "agentplane replays get rpl_01J00000000000000000000000") {
		t.Errorf("a browser: %d %s\n%s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
}
