package httpapi_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/a2a"
)

// a2aTaskJSON is an A2A Task as the tests read it.
type a2aTaskJSON struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message *struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string `json:"artifactId"`
		Parts      []struct {
			Data map[string]any `json:"data"`
		} `json:"parts"`
	} `json:"artifacts"`
	Metadata map[string]any `json:"metadata"`
}

type rpcReply struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

// rpc sends one JSON-RPC request to the agent's A2A endpoint.
func (h *harness) rpc(t *testing.T, agent, token, method string, params any, headers ...string) rpcReply {
	t.Helper()
	r := h.do("POST", "/a2a/"+agent, token, map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, headers...)
	if r.Status != 200 {
		t.Fatalf("%s: status %d %s", method, r.Status, r.Body)
	}
	var rep rpcReply
	r.json(t, &rep)
	return rep
}

func a2aMessage(id, text string, data map[string]any) map[string]any {
	parts := []any{map[string]any{"text": text}}
	if data != nil {
		parts = append(parts, map[string]any{"data": data})
	}
	return map[string]any{"messageId": id, "role": "ROLE_USER", "parts": parts}
}

func TestA2AServesAgentsOverJSONRPCAndHTTPJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	tok := h.token("acme", "agents:invoke tool:*")

	// The card, with a token; without one it is refused (not public).
	r := h.do("GET", "/a2a/fraud-triage/.well-known/agent-card.json", tok, nil)
	if r.Status != 200 {
		t.Fatalf("card: %d %s", r.Status, r.Body)
	}
	var card struct {
		Name                string `json:"name"`
		SupportedInterfaces []struct {
			URL, ProtocolBinding, ProtocolVersion string
		} `json:"supportedInterfaces"`
		Capabilities map[string]bool `json:"capabilities"`
		Skills       []struct {
			ID string `json:"id"`
		} `json:"skills"`
		SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
	}
	r.json(t, &card)
	if card.Name != "fraud-triage" || len(card.SupportedInterfaces) != 2 || card.SupportedInterfaces[0].URL != h.URL+"/a2a/fraud-triage" ||
		card.SupportedInterfaces[0].ProtocolVersion != "1.0" || !card.Capabilities["streaming"] || len(card.Skills) != 1 {
		t.Errorf("card: %s", r.Body)
	}
	if r := h.do("GET", "/a2a/fraud-triage/.well-known/agent-card.json?tenant=acme", "", nil); r.Status != 401 {
		t.Errorf("a card not deployed public, without a token: %d %s", r.Status, r.Body)
	}

	// A blocking SendMessage: the text is the goal, the data part the context.
	rep := h.rpc(t, "fraud-triage", tok, "SendMessage", map[string]any{
		"message": a2aMessage("m-1", "triage tx-9", map[string]any{"transaction_id": "tx-9"})}, "A2A-Version", "1.0")
	if rep.Error != nil {
		t.Fatalf("SendMessage: %+v", rep.Error)
	}
	var sent struct {
		Task a2aTaskJSON `json:"task"`
	}
	json.Unmarshal(rep.Result, &sent)
	task := sent.Task
	if task.Status.State != "TASK_STATE_COMPLETED" || task.Metadata["outcome"] != "cleared" || len(task.Artifacts) != 1 ||
		task.Artifacts[0].Parts[0].Data["queue"] != "standard" {
		t.Fatalf("SendMessage result: %s", rep.Result)
	}
	// The message id is the idempotency key: a repeat gets the same task.
	rep = h.rpc(t, "fraud-triage", tok, "SendMessage", map[string]any{
		"message": a2aMessage("m-1", "triage tx-9", map[string]any{"transaction_id": "tx-9"})})
	json.Unmarshal(rep.Result, &sent)
	if sent.Task.ID != task.ID || w.payments.Load() != 1 {
		t.Errorf("a repeated message: task %s (first %s), %d payments calls", sent.Task.ID, task.ID, w.payments.Load())
	}
	// The workflow is the task, on both bindings.
	if r := h.do("GET", "/v1/workflows/"+task.ID, h.token("acme", "workflows:read"), nil); r.Status != 200 {
		t.Errorf("the task's workflow: %d", r.Status)
	}
	r = h.do("GET", "/a2a/fraud-triage/tasks/"+task.ID, tok, nil)
	var got a2aTaskJSON
	r.json(t, &got)
	if r.Status != 200 || got.ID != task.ID || got.Status.State != "TASK_STATE_COMPLETED" {
		t.Errorf("GET tasks/{id}: %d %s", r.Status, r.Body)
	}

	// HTTP+JSON message:send in the binding's media type (A2A 1.0.1),
	// answered in it, then ListTasks pages with the cursor.
	r = h.do("POST", "/a2a/fraud-triage/message:send", tok, map[string]any{
		"message": a2aMessage("m-2", "triage tx-10", map[string]any{"transaction_id": "tx-10"})}, "Content-Type", "application/a2a+json")
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/a2a+json" {
		t.Fatalf("message:send: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if ct := h.do("GET", "/a2a/fraud-triage/tasks/"+task.ID, tok, nil).Header.Get("Content-Type"); ct != "application/a2a+json" {
		t.Errorf("GET tasks/{id} answered %q, want application/a2a+json", ct)
	}
	if rep := h.do("POST", "/a2a/fraud-triage", tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "GetTask",
		"params": map[string]any{"id": task.ID}}); rep.Header.Get("Content-Type") != "application/json" {
		t.Errorf("JSON-RPC answered %q, want application/json", rep.Header.Get("Content-Type"))
	}
	var list struct {
		Tasks         []a2aTaskJSON `json:"tasks"`
		NextPageToken string        `json:"nextPageToken"`
	}
	h.do("GET", "/a2a/fraud-triage/tasks?pageSize=1", tok, nil).json(t, &list)
	if len(list.Tasks) != 1 || list.NextPageToken == "" {
		t.Fatalf("first page: %+v", list)
	}
	first := list.Tasks[0].ID
	rep = h.rpc(t, "fraud-triage", tok, "ListTasks", map[string]any{"pageSize": 1, "pageToken": list.NextPageToken})
	json.Unmarshal(rep.Result, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].ID == first {
		t.Errorf("second page: %s", rep.Result)
	}

	// A streaming message: the task, a status update per step with the
	// step in metadata, the output artifact, the final status.
	r = h.do("POST", "/a2a/fraud-triage", tok, map[string]any{"jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage",
		"params": map[string]any{"message": a2aMessage("m-3", "triage tx-11", map[string]any{"transaction_id": "tx-11"})}})
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("SendStreamingMessage: %d %s", r.Status, r.Body)
	}
	var kinds []string
	for _, e := range parseSSE(t, "a2a stream", r.Body) {
		var ev struct {
			ID     string                     `json:"id"`
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil || ev.ID != "s" {
			t.Fatalf("event %q: %v", e.data, err)
		}
		for k, v := range ev.Result {
			var u struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
				Metadata struct {
					Step struct {
						Action string `json:"action"`
					} `json:"step"`
				} `json:"metadata"`
			}
			json.Unmarshal(v, &u)
			kinds = append(kinds, strings.TrimSuffix(k+":"+u.Status.State+":"+u.Metadata.Step.Action, ":"))
		}
	}
	want := []string{"task:TASK_STATE_WORKING", "statusUpdate:TASK_STATE_WORKING:fetch_transaction", "statusUpdate:TASK_STATE_WORKING:fraud_score",
		"statusUpdate:TASK_STATE_WORKING:route_queue", "artifactUpdate:", "statusUpdate:TASK_STATE_COMPLETED"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("stream:\n got %v\nwant %v", kinds, want)
	}
}

func TestA2AApprovalIsInputRequiredAndCancelCancels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("tx-big", 900.0)
	tok := h.tokenFor("alice", "agents:invoke tool:*")
	approver := h.tokenFor("bob", "workflows:approve approve:refunds")

	rep := h.rpc(t, "refunds", tok, "SendMessage", map[string]any{"message": a2aMessage("r-1", "refund", map[string]any{"transaction_id": "tx-big"})})
	var sent struct {
		Task a2aTaskJSON `json:"task"`
	}
	json.Unmarshal(rep.Result, &sent)
	if sent.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" || sent.Task.Status.Message == nil ||
		sent.Task.Status.Message.Parts[0].Text != "Refund of 900" {
		t.Fatalf("a task at an approval: %s %+v", rep.Result, rep.Error)
	}
	// A message to it is no decision.
	rep = h.rpc(t, "refunds", tok, "SendMessage", map[string]any{"message": map[string]any{"messageId": "r-2", "role": "ROLE_USER",
		"taskId": sent.Task.ID, "parts": []any{map[string]any{"text": "approve"}}}})
	if rep.Error == nil || rep.Error.Code != -32004 {
		t.Errorf("a message to a waiting task: %+v", rep.Error)
	}
	if r := h.do("POST", "/v1/workflows/"+sent.Task.ID+"/approvals/refund_approval", approver, map[string]any{"decision": "approve"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	var task a2aTaskJSON
	for range 200 {
		h.do("GET", "/a2a/refunds/tasks/"+sent.Task.ID, tok, nil).json(t, &task)
		if task.Status.State != "TASK_STATE_INPUT_REQUIRED" && task.Status.State != "TASK_STATE_WORKING" {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if task.Status.State != "TASK_STATE_COMPLETED" || task.Metadata["outcome"] != "refunded" {
		t.Errorf("after the approval: %+v", task)
	}

	// Cancel a task waiting at its approval; an ended task is not cancelable.
	rep = h.rpc(t, "refunds", tok, "SendMessage", map[string]any{"message": a2aMessage("r-3", "refund", map[string]any{"transaction_id": "tx-big"}),
		"configuration": map[string]any{"returnImmediately": true}})
	json.Unmarshal(rep.Result, &sent)
	if sent.Task.Status.State != "TASK_STATE_WORKING" && sent.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Errorf("returnImmediately: %s", rep.Result)
	}
	pendingApproval(t, h, approver)
	r := h.do("POST", "/a2a/refunds/tasks/"+sent.Task.ID+":cancel", tok, map[string]any{"id": sent.Task.ID})
	r.json(t, &task)
	if r.Status != 200 || task.Status.State != "TASK_STATE_CANCELED" {
		t.Errorf("cancel: %d %s", r.Status, r.Body)
	}
	rep = h.rpc(t, "refunds", tok, "CancelTask", map[string]any{"id": sent.Task.ID})
	if rep.Error == nil || rep.Error.Code != -32002 {
		t.Errorf("cancel of a canceled task: %+v", rep.Error)
	}
}

func TestA2APublicCard(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", adminScopes)
	def := `{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'done'", "a2a": {"public_card": true}}`
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "greeter", "definition": json.RawMessage(def)}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	r := h.do("GET", "/a2a/greeter/.well-known/agent-card.json?tenant=acme", "", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"name":"greeter"`) {
		t.Errorf("public card: %d %s", r.Status, r.Body)
	}
	for _, q := range []string{"?tenant=globex", ""} {
		if r := h.do("GET", "/a2a/greeter/.well-known/agent-card.json"+q, "", nil); r.Status != 401 {
			t.Errorf("public card of another tenant %q: %d", q, r.Status)
		}
	}
}

// TestA2ASubscribeResumes follows a task again from an event id, as a
// client that lost its stream does.
func TestA2ASubscribeResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	newFraudWorld(t, h)
	tok := h.token("acme", "agents:invoke tool:*")
	r := h.do("POST", "/a2a/fraud-triage/message:stream", tok, map[string]any{
		"message": a2aMessage("sub-1", "triage tx-30", map[string]any{"transaction_id": "tx-30"})})
	first := parseSSE(t, "stream", r.Body)
	if len(first) != 6 {
		t.Fatalf("stream of %d events: %s", len(first), r.Body)
	}
	taskID := r.Header.Get("Workflow-Id")
	// After the first step's event: the task, then the rest.
	r = h.do("POST", "/a2a/fraud-triage/tasks/"+taskID+":subscribe", tok, nil, "Last-Event-ID", strconv.Itoa(first[1].id))
	again := parseSSE(t, "resumed", r.Body)
	if r.Status != 200 || len(again) != len(first)-1 || again[0].id != first[1].id {
		t.Fatalf("resumed: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(again[0].data, `"task":`) || !strings.Contains(again[1].data, `"fraud_score"`) || !strings.Contains(again[len(again)-1].data, "TASK_STATE_COMPLETED") {
		t.Errorf("resumed events: %s", r.Body)
	}
	// Without Last-Event-ID an ended task has nothing to follow.
	if r := h.do("GET", "/a2a/fraud-triage/tasks/"+taskID+":subscribe", tok, nil); r.Status != 400 {
		t.Errorf("subscribe to an ended task: %d %s", r.Status, r.Body)
	}
}

// TestA2AListTasksCountsEveryPage checks ListTasks' totalSize: the tasks
// matching the request on every page, not the page's length.
func TestA2AListTasksCountsEveryPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	newFraudWorld(t, h)
	tok := h.token("acme", "agents:invoke tool:*")
	for i := range 3 {
		id := "count-" + strconv.Itoa(i)
		rep := h.rpc(t, "fraud-triage", tok, "SendMessage", map[string]any{
			"message": a2aMessage(id, "triage "+id, map[string]any{"transaction_id": id})})
		if rep.Error != nil {
			t.Fatalf("SendMessage %s: %+v", id, rep.Error)
		}
	}
	// Another tenant's tasks of an agent of the same name are not counted.
	if r := h.do("POST", "/v1/agents", h.token("globex", adminScopes), map[string]any{"name": "fraud-triage",
		"definition": json.RawMessage(`{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'done'"}`)}); r.Status != 201 {
		t.Fatalf("deploy for globex: %d %s", r.Status, r.Body)
	}
	other := h.token("globex", "agents:invoke")
	rep := h.rpc(t, "fraud-triage", other, "SendMessage", map[string]any{"message": a2aMessage("g-1", "triage", nil)})
	if rep.Error != nil {
		t.Fatalf("SendMessage for globex: %+v", rep.Error)
	}

	type page struct {
		Tasks         []a2aTaskJSON `json:"tasks"`
		NextPageToken string        `json:"nextPageToken"`
		PageSize      int           `json:"pageSize"`
		TotalSize     int           `json:"totalSize"`
	}
	var first, second page
	h.do("GET", "/a2a/fraud-triage/tasks?pageSize=2", tok, nil).json(t, &first)
	if len(first.Tasks) != 2 || first.TotalSize != 3 || first.PageSize != 2 || first.NextPageToken == "" {
		t.Fatalf("first page: %d tasks, totalSize %d, pageSize %d, next %q; want 2, 3, 2 and a token",
			len(first.Tasks), first.TotalSize, first.PageSize, first.NextPageToken)
	}
	rep = h.rpc(t, "fraud-triage", tok, "ListTasks", map[string]any{"pageSize": 2, "pageToken": first.NextPageToken})
	if err := json.Unmarshal(rep.Result, &second); err != nil || len(second.Tasks) != 1 || second.TotalSize != 3 {
		t.Fatalf("second page: %s %+v", rep.Result, rep.Error)
	}
	for _, c := range []struct {
		query string
		want  int
	}{
		{"status=TASK_STATE_COMPLETED&pageSize=1", 3},
		{"status=TASK_STATE_WORKING", 0},
		{"contextId=" + first.Tasks[0].ID, 1},
		{"contextId=wf_nothing", 0},
	} {
		var p page
		h.do("GET", "/a2a/fraud-triage/tasks?"+c.query, tok, nil).json(t, &p)
		if p.TotalSize != c.want {
			t.Errorf("%s: totalSize %d, want %d", c.query, p.TotalSize, c.want)
		}
	}
	var theirs page
	h.do("GET", "/a2a/fraud-triage/tasks", other, nil).json(t, &theirs)
	if len(theirs.Tasks) != 1 || theirs.TotalSize != 1 {
		t.Errorf("globex's tasks: %d, totalSize %d; want 1 and 1", len(theirs.Tasks), theirs.TotalSize)
	}
}

// TestA2AProblemPagesAreServed: the A2A errors, the A2A package's own
// kinds, have their pages beside the problem table's.
func TestA2AProblemPagesAreServed(t *testing.T) {
	h := newHarness(t)
	for _, k := range a2a.Kinds {
		r := h.do("GET", "/problems/"+string(k.Code), "", nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), k.Title) {
			t.Errorf("%s: %d %s", k.Code, r.Status, r.Body)
		}
	}
}
