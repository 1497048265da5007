package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const refundsDef = `{"tools": ["payments", "cases"], "steps": [
	{"action": "fetch", "call": "payments.getTransaction", "args": {"id": "context.transaction_id"}, "save_as": "txn"},
	{"action": "refund_approval", "approve": {"when": "txn.amount > 500.0",
	  "reason": "'Refund of ' + string(txn.amount)", "approver_scope": "approve:refunds"}},
	{"action": "open_case", "call": "cases.createCase", "args": {"transaction": "txn.id", "queue": "'refunds'"}}],
	"outcome": "'refunded'"}`

// deployRefunds adds the refunds agent to a fraud world.
func deployRefunds(t *testing.T, w *fraudWorld) {
	t.Helper()
	r := w.h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "refunds", "definition": json.RawMessage(refundsDef)})
	if r.Status != 201 {
		t.Fatalf("deploy refunds: %d %s", r.Status, r.Body)
	}
}

func (h *harness) tokenFor(sub, scopes string) string {
	h.t.Helper()
	tok, err := h.Issuer.Mint(context.Background(), mint("acme", sub, scopes))
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

type approvalJSON struct {
	WorkflowID    string  `json:"workflow_id"`
	Step          int     `json:"step"`
	Action        string  `json:"action"`
	Reason        string  `json:"reason"`
	ApproverScope *string `json:"approver_scope"`
	Status        string  `json:"status"`
	Invoker       string  `json:"invoker"`
	Deadline      string  `json:"deadline"`
	DecidedBy     *string `json:"decided_by"`
	Comment       *string `json:"comment"`
}

// pendingApproval waits until the tenant lists a pending approval.
func pendingApproval(t *testing.T, h *harness, token string) approvalJSON {
	t.Helper()
	for range 200 {
		r := h.do("GET", "/v1/approvals?status=pending", token, nil)
		if r.Status != 200 {
			t.Fatalf("list approvals: %d %s", r.Status, r.Body)
		}
		var page struct {
			Approvals []approvalJSON `json:"approvals"`
		}
		r.json(t, &page)
		if len(page.Approvals) > 0 {
			return page.Approvals[0]
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("no approval became pending within 5 s")
	return approvalJSON{}
}

func TestApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("t-big", 900.0)
	invoker := h.tokenFor("alice", "agents:invoke workflows:read workflows:replay tool:* workflows:approve approve:refunds")
	bob := h.tokenFor("bob", "workflows:approve approve:refunds audit:read")
	carol := h.tokenFor("carol", "workflows:approve")

	streamed := make(chan response, 1)
	go func() {
		streamed <- h.do("POST", "/v1/agents/refunds/invoke", invoker,
			map[string]any{"goal": "refund t-big", "context": map[string]any{"transaction_id": "t-big"}, "stream": true})
	}()
	a := pendingApproval(t, h, bob)
	wantScope := "approve:refunds"
	want := approvalJSON{WorkflowID: a.WorkflowID, Step: 2, Action: "refund_approval", Reason: "Refund of 900",
		ApproverScope: &wantScope, Status: "pending", Invoker: "alice", Deadline: a.Deadline}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("pending approval (-want +got):\n%s", diff)
	}
	got := h.do("GET", "/v1/workflows/"+a.WorkflowID, invoker, nil)
	var wf map[string]any
	got.json(t, &wf)
	if wf["status"] != "waiting" || wf["outcome"] != nil {
		t.Errorf("waiting workflow reads as %v/%v", wf["status"], wf["outcome"])
	}

	path := "/v1/workflows/" + a.WorkflowID + "/approvals/2"
	r := h.do("POST", path, invoker, map[string]any{"decision": "approve"})
	if d := r.problem(t); r.Status != 403 || d.Type != "https://agentplane.dev/problems/insufficient-scope" || !strings.Contains(d.Detail, "invoked") {
		t.Errorf("the invoker deciding: %d %+v; want 403 insufficient-scope saying why", r.Status, d)
	}
	r = h.do("POST", path, carol, map[string]any{"decision": "approve"})
	if r.Status != 403 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="approve:refunds"`) {
		t.Errorf("without the step's approver_scope: %d, WWW-Authenticate %q", r.Status, r.Header.Get("WWW-Authenticate"))
	}
	if r := h.do("POST", "/v1/workflows/"+a.WorkflowID+"/approvals/1", bob, map[string]any{"decision": "approve"}); r.Status != 409 {
		t.Errorf("a step that does not wait: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", path, bob, map[string]any{"decision": "yes"}); r.Status != 422 {
		t.Errorf("decision yes: %d %s", r.Status, r.Body)
	}
	if w.cases.Load() != 0 {
		t.Fatal("the case was opened before the approval")
	}
	r = h.do("POST", "/v1/workflows/"+a.WorkflowID+"/approvals/refund_approval", bob, map[string]any{"decision": "approve", "comment": "customer verified"})
	if r.Status != 200 {
		t.Fatalf("bob approves: %d %s", r.Status, r.Body)
	}
	var decided approvalJSON
	r.json(t, &decided)
	if decided.Status != "approved" || decided.DecidedBy == nil || *decided.DecidedBy != "bob" || *decided.Comment != "customer verified" {
		t.Errorf("decision answered %+v", decided)
	}
	if r := h.do("POST", path, bob, map[string]any{"decision": "deny"}); r.Status != 409 {
		t.Errorf("a second decision: %d %s", r.Status, r.Body)
	}

	var events []streamEvent
	select {
	case resp := <-streamed:
		events = streamEvents(t, resp.Body)
	case <-time.After(10 * time.Second):
		t.Fatal("the streamed invoke did not end after the approval")
	}
	var steps []string
	for _, ev := range events {
		steps = append(steps, str(ev.Data["action"])+":"+str(ev.Data["status"])+str(ev.Data["outcome"]))
	}
	wantSteps := []string{"fetch:ok", "refund_approval:waiting_approval", "refund_approval:approved", "open_case:ok", ":completedrefunded"}
	if diff := cmp.Diff(wantSteps, steps); diff != "" {
		t.Fatalf("streamed events (-want +got):\n%s", diff)
	}
	if events[1].Data["reason"] != "Refund of 900" {
		t.Errorf("waiting event %v lacks the reason", events[1].Data)
	}
	if ap, _ := events[2].Data["approval"].(map[string]any); ap["decided_by"] != "bob" || ap["decision"] != "approve" {
		t.Errorf("decision event %v does not say who decided", events[2].Data)
	}
	if w.cases.Load() != 1 {
		t.Errorf("cases received %d calls, want 1", w.cases.Load())
	}

	r = h.do("GET", "/v1/audit/query?action=workflow.approval", bob, nil)
	var audit struct {
		Records []struct {
			Actor      map[string]any `json:"actor"`
			WorkflowID string         `json:"workflow_id"`
			Details    map[string]any `json:"details"`
		} `json:"records"`
	}
	r.json(t, &audit)
	if len(audit.Records) != 1 || audit.Records[0].Actor["sub"] != "bob" || audit.Records[0].WorkflowID != a.WorkflowID ||
		audit.Records[0].Details["decision"] != "approved" {
		t.Errorf("approval audit records %s; want one naming bob", r.Body)
	}

	// A dry-run replay serves the recorded decision: nothing changes.
	res := w.replay(t, invoker, a.WorkflowID, map[string]any{"target_agent_version": "refunds@1"})
	if res.ReplayOutcome != "refunded" || res.Delta["steps_changed"] != 0 || res.Delta["steps_added"] != 0 {
		t.Errorf("replay of an approved workflow: %s, delta %v", res.ReplayOutcome, res.Delta)
	}
	// The viewer shows the reason, who decided and when, on both sides.
	page := h.do("GET", strings.TrimPrefix(res.ViewerURL, h.URL), "", nil)
	// The reason is on the waiting and the decision step of each side.
	for want, count := range map[string]int{"<dt>decided by</dt><dd>bob</dd>": 2, "<dt>reason</dt>": 4, `<dt>decided at</dt><dd><time datetime="20`: 2, "<dt>comment</dt><dd>customer verified</dd>": 2} {
		if n := strings.Count(string(page.Body), want); page.Status != 200 || n != count {
			t.Errorf("replay viewer: %d, %q found %d times, want %d", page.Status, want, n, count)
		}
	}

	// A sync invoke answers at once with the workflow waiting.
	w.amounts.Store("t-big-2", 2000.0)
	r = h.do("POST", "/v1/agents/refunds/invoke", invoker, map[string]any{"goal": "refund", "context": map[string]any{"transaction_id": "t-big-2"}})
	var sync map[string]any
	r.json(t, &sync)
	if r.Status != 200 || sync["status"] != "waiting" || sync["outcome"] != nil || len(sync["steps"].([]any)) != 2 {
		t.Errorf("sync invoke: %d %s; want 200 with the workflow waiting", r.Status, r.Body)
	}
	r = h.do("GET", "/v1/workflows?status=waiting", invoker, nil)
	var list struct {
		Workflows []map[string]any `json:"workflows"`
	}
	r.json(t, &list)
	if len(list.Workflows) != 1 || list.Workflows[0]["workflow_id"] != sync["workflow_id"] {
		t.Errorf("workflows waiting: %s", r.Body)
	}
	r = h.do("GET", "/v1/approvals?status=decided", bob, nil)
	var decidedPage struct {
		Approvals []approvalJSON `json:"approvals"`
	}
	r.json(t, &decidedPage)
	if len(decidedPage.Approvals) != 1 || decidedPage.Approvals[0].WorkflowID != a.WorkflowID {
		t.Errorf("decided approvals: %s", r.Body)
	}
	if r := h.do("GET", "/v1/approvals", h.token("acme", "workflows:read"), nil); r.Status != 403 {
		t.Errorf("listing approvals without workflows:approve: %d", r.Status)
	}
}
