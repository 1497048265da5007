package mcp

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestTaskStatus: a workflow's status as its task's; a failed workflow's
// call answered a tool result, so its task has completed.
func TestTaskStatus(t *testing.T) {
	for st, want := range map[string]string{
		workflow.Running: "working", workflow.Waiting: "input_required", workflow.Completed: "completed",
		workflow.Failed: "completed", workflow.Cancelled: "cancelled",
	} {
		if got := taskStatus(&workflow.Workflow{Status: st}); got != want {
			t.Errorf("taskStatus(%s) = %s, want %s", st, got, want)
		}
	}
}

// TestHasExtension reads the per-request capabilities, whatever their shape.
func TestHasExtension(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`: true,
		`{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"other/ext":{}}}}`:                     false,
		`{"io.modelcontextprotocol/clientCapabilities":{"extensions":["io.modelcontextprotocol/tasks"]}}`:    false,
		`{"io.modelcontextprotocol/clientCapabilities":"tasks"}`:                                             false,
		`{}`: false,
	} {
		var meta map[string]any
		if err := json.Unmarshal([]byte(raw), &meta); err != nil {
			t.Fatal(err)
		}
		if got := hasExtension(meta); got != want {
			t.Errorf("hasExtension(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestAdvertise adds the tasks to the SDK's JSON answers, keeping what was
// there, and passes any other answer (an error status, an event stream)
// through as it is.
func TestAdvertise(t *testing.T) {
	answer := func(method, ct string, status int, body string) string {
		rw := &recorder{header: map[string][]string{"Content-Type": {ct}}}
		rw.WriteHeader(status)
		_, _ = rw.Write([]byte(body))
		w := httptest.NewRecorder()
		rw.flush(w, advertise(method))
		if w.Code != status {
			t.Errorf("%s: status %d, want %d", method, w.Code, status)
		}
		return w.Body.String()
	}
	got := answer("initialize", "application/json", 200,
		`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{},"extensions":{"x/y":{"a":1}}},"protocolVersion":"2025-11-25"}}`)
	for _, want := range []string{`"x/y":{"a":1}`, `"io.modelcontextprotocol/tasks":{}`, `"tasks":{"list":{}`, `"tools":{}`, `"protocolVersion":"2025-11-25"`} {
		if !strings.Contains(got, want) {
			t.Errorf("initialize: %s lacks %s", got, want)
		}
	}
	if got := answer("server/discover", "application/json", 200, `{"jsonrpc":"2.0","id":1,"result":{"capabilities":{}}}`); !strings.Contains(got, `"extensions":{"io.modelcontextprotocol/tasks":{}}`) || strings.Contains(got, `"tasks":{"list"`) {
		t.Errorf("server/discover: %s", got)
	}
	got = answer("tools/list", "application/json", 200, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"agent_a"},{"name":"call_operation"}]}}`)
	if !strings.Contains(got, `{"execution":{"taskSupport":"optional"},"name":"agent_a"}`) || strings.Count(got, "execution") != 1 {
		t.Errorf("tools/list: %s", got)
	}
	for _, body := range []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no"}}`, `not json`} {
		if got := answer("initialize", "application/json", 200, body); got != body {
			t.Errorf("initialize answered %s: %s", body, got)
		}
	}
	if got := answer("initialize", "text/event-stream", 200, "data: {}\n\n"); got != "data: {}\n\n" {
		t.Errorf("an event stream: %q", got)
	}
	if got := answer("initialize", "application/json", 400, `{"result":{}}`); got != `{"result":{}}` {
		t.Errorf("a 400: %q", got)
	}
}

// TestValidID: a task message is answered here only with an id the SDK
// would take.
func TestValidID(t *testing.T) {
	for raw, want := range map[string]bool{`1`: true, `"a"`: true, `-2.5`: true, `null`: false, ``: false, `{}`: false, `[1]`: false, `true`: false} {
		if got := validID(json.RawMessage(raw)); got != want {
			t.Errorf("validID(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestInputRequestsAreTheApprovalWaitedAt: an external agent's first
// approval keeps its asking step beside its decision's; a task waiting at
// its second asks for that one alone.
func TestInputRequestsAreTheApprovalWaitedAt(t *testing.T) {
	s := &Server{cfg: Config{PublicURL: "https://ap.example"}}
	wf := &workflow.Workflow{ID: "wf_1", Status: workflow.Waiting}
	steps := []workflow.Step{
		{Step: 1, Kind: agent.KindCompletion, Status: agent.StatusOK},
		{Step: 2, Kind: agent.KindApprove, Status: agent.StatusWaitingApproval, Reason: "Open a case for 900"},
		{Step: 3, Kind: agent.KindApprove, Status: agent.StatusApproved},
		{Step: 4, Kind: agent.KindCall, Status: agent.StatusOK},
		{Step: 5, Kind: agent.KindApprove, Status: agent.StatusWaitingApproval, Reason: "Open a case for 700"},
	}
	got := s.inputRequests(wf, steps)
	el, _ := got["approval-5"].(map[string]any)
	params, _ := el["params"].(map[string]any)
	if len(got) != 1 || !strings.Contains(params["message"].(string), "Open a case for 700") {
		t.Errorf("input requests %v, want approval-5 alone", got)
	}
	if m := taskOf(wf, steps).Message; !strings.Contains(m, "Step 5") {
		t.Errorf("task message %q", m)
	}
}
