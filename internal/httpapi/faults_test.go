package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

const booksSpec = `{"openapi": "3.0.3", "info": {"title": "books", "version": "1"},
 "servers": [{"url": "%s"}],
 "paths": {"/entries": {"post": {"operationId": "postEntry", "summary": "Post an entry",
   "requestBody": {"content": {"application/json": {"schema": {"type": "object",
     "properties": {"note": {"type": "string"}}}}}},
   "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"type": "object"}}}}}}}}}`

// booksWorld is a books API whose POST signals arrived and answers only
// once its request ends, registered as a tool, with an agent posting the
// goal as a note.
func booksWorld(t *testing.T, h *harness) (admin string, arrived chan struct{}) {
	t.Helper()
	admin = h.token("acme", adminScopes+" audit:read")
	arrived = make(chan struct{}, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(w, booksSpec, "http://"+r.Host)
			return
		}
		io.Copy(io.Discard, r.Body) // read: the server then sees the client go
		arrived <- struct{}{}
		<-r.Context().Done() // the write is slow
	}))
	t.Cleanup(api.Close)
	if r := h.do("POST", "/v1/tools", admin, map[string]any{"name": "books", "type": "openapi", "spec_url": api.URL + "/openapi.json"}); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	def := json.RawMessage(`{"tools": ["books"], "steps": [{"action": "post", "call": "books.postEntry", "args": {"note": "goal"}}], "outcome": "'posted'"}`)
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "poster", "definition": def}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	return admin, arrived
}

// TestCancelKeepsAWriteThatWasSent checks, through the API, that a write
// cut short by a cancel after it reached its tool is in the workflow's
// history, with status cancelled and its request, and in the audit log.
func TestCancelKeepsAWriteThatWasSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin, arrived := booksWorld(t, h)
	done := make(chan response, 1)
	go func() { done <- h.do("POST", "/v1/agents/poster/invoke", admin, map[string]any{"goal": "pay rent"}) }()
	<-arrived
	id := runningWorkflow(t, h, admin)
	if c := h.do("POST", "/v1/workflows/"+id+"/cancel", admin, nil); c.Status != 200 {
		t.Fatalf("cancel: %d %s", c.Status, c.Body)
	}
	<-done
	var wf struct {
		Status string `json:"status"`
		Steps  []struct {
			Status  string          `json:"status"`
			Sent    bool            `json:"sent"`
			Request json.RawMessage `json:"request"`
			Result  json.RawMessage `json:"result"`
		} `json:"steps"`
	}
	h.do("GET", "/v1/workflows/"+id, admin, nil).json(t, &wf)
	if wf.Status != "cancelled" || len(wf.Steps) != 1 {
		t.Fatalf("workflow %+v", wf)
	}
	var req tool.RecordedRequest
	s := wf.Steps[0]
	if err := json.Unmarshal(s.Request, &req); err != nil || s.Status != "cancelled" || !s.Sent ||
		req.Method != "POST" || string(req.Body) != `{"note":"pay rent"}` || s.Result != nil {
		t.Errorf("step %+v (request %s), want cancelled, sent, with its request and no result", s, s.Request)
	}
	var page auditPage
	h.do("GET", "/v1/audit/query?action=tool.call&workflow_id="+id, admin, nil).json(t, &page)
	if len(page.Records) != 1 || page.Records[0].Outcome != "error" {
		t.Errorf("tool.call records: %+v", page.Records)
	}
}

// exploding is a tool caller that panics, as a broken reader of an answer
// would, when a call's note is "boom", and answers any other at once.
type exploding struct{}

func (exploding) Call(_ context.Context, req tool.CallRequest) (tool.CallResult, error) {
	if req.Args["note"] == "boom" {
		panic("the answer's reader broke")
	}
	return tool.CallResult{Status: 201, Body: json.RawMessage(`{"posted": true}`), Attempts: 1}, nil
}

// TestAPanickingWorkflowLeavesTheServerServing checks, through the API,
// that a workflow whose execution panics ends failed with error_code
// internal and the server goes on answering and running workflows.
func TestAPanickingWorkflowLeavesTheServerServing(t *testing.T) {
	t.Parallel()
	var runner *workflow.Runner
	h := newHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) {
		runner = workflow.New(workflow.Options{Store: d.Workflows, Versions: d.Agents, Tools: d.ToolStore,
			Caller: exploding{}, Lease: 2 * time.Second})
		d.Runner = runner
	})
	t.Cleanup(func() { runner.Close(context.Background()) })
	admin, _ := booksWorld(t, h)
	var wf struct {
		Status, Outcome string
		Error           struct {
			Detail    string `json:"detail"`
			ErrorCode string `json:"error_code"`
		}
	}
	h.do("POST", "/v1/agents/poster/invoke", admin, map[string]any{"goal": "boom"}).json(t, &wf)
	if wf.Status != "failed" || wf.Outcome != "failed" || wf.Error.ErrorCode != "internal" ||
		wf.Error.Detail != "the server failed while executing the workflow" {
		t.Fatalf("panicking workflow: %+v", wf)
	}
	if r := h.do("GET", "/healthz", "", nil); r.Status != 200 {
		t.Errorf("healthz after the panic: %d", r.Status)
	}
	h.do("POST", "/v1/agents/poster/invoke", admin, map[string]any{"goal": "fine"}).json(t, &wf)
	if wf.Status != "completed" || wf.Outcome != "posted" {
		t.Errorf("workflow after the panic: %+v", wf)
	}
}
