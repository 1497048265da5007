package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notesServer is an MCP server written with the SDK: six tools listed two
// to a page, one of them read-only, one answering 2 MiB.
func notesServer(t *testing.T) (url string, requests, adds *atomic.Int64) {
	t.Helper()
	requests, adds = new(atomic.Int64), new(atomic.Int64)
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	type addIn struct {
		Text string `json:"text"`
	}
	type addOut struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add_note", Description: "Add a note.\nIt is kept forever."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			n := adds.Add(1)
			return nil, addOut{ID: fmt.Sprintf("note-%d", n), Text: in.Text}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "list_notes", Title: "List notes", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, map[string]any{"notes": []string{}}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "export_notes"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, map[string]any{"dump": strings.Repeat("n", 2<<20)}, nil
		})
	for _, name := range []string{"delete_note", "pin_note", "share_note"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: strings.ReplaceAll(name, "_", " ")},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return nil, nil, fmt.Errorf("%s is not allowed here", name)
			})
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, requests, adds
}

func TestRegisterMCPServerAsTool(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", adminScopes+" workflows:replay")
	url, requests, adds := notesServer(t)

	r := h.do("POST", "/v1/tools", admin, map[string]any{"name": "notes", "type": "mcp", "spec_url": url})
	var tl struct {
		ID             string `json:"id"`
		OperationCount int    `json:"operations"`
	}
	r.json(t, &tl)
	if r.Status != 201 || tl.OperationCount != 6 {
		t.Fatalf("register: %d %s; want 201 with 6 operations", r.Status, r.Body)
	}
	r = h.do("GET", "/v1/tools/"+tl.ID+"/operations?limit=10", admin, nil)
	var ops struct {
		Operations []struct{ ID, Kind, Summary string }
	}
	r.json(t, &ops)
	kinds := map[string]string{}
	for _, o := range ops.Operations {
		kinds[o.ID] = o.Kind + " " + o.Summary
	}
	if kinds["list_notes"] != "read List notes" || kinds["add_note"] != "write Add a note." || len(kinds) != 6 {
		t.Errorf("operations: %v", kinds)
	}
	if r := h.do("POST", "/v1/tools", admin, map[string]any{"name": "inline", "type": "mcp", "spec": "[]"}); r.Status != 422 {
		t.Errorf("inline mcp spec: %d %s", r.Status, r.Body)
	}
	notMCP := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notMCP.Close)
	r = h.do("POST", "/v1/tools", admin, map[string]any{"name": "nothing", "type": "mcp", "spec_url": notMCP.URL})
	if p := r.problem(t); r.Status != 422 || p.Code != "spec-unreachable" || !strings.Contains(p.Detail, "initialize of the MCP server at "+notMCP.URL) {
		t.Errorf("a URL that is no MCP server: %d %s", r.Status, r.Body)
	}

	// An agent calls it; the result is recorded.
	def := `{"tools": ["notes"], "steps": [
	  {"action": "add", "call": "notes.add_note", "args": {"text": "goal"}, "save_as": "note"},
	  {"action": "forbidden", "call": "notes.delete_note", "on_error": "continue"},
	  {"action": "export", "call": "notes.export_notes", "on_error": "continue"}],
	 "outcome": "note.id == 'note-1' ? 'added' : 'other'", "output": "note"}`
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "scribe", "definition": json.RawMessage(def)}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	r = h.do("POST", "/v1/agents/scribe/invoke", admin, map[string]any{"goal": "remember this"})
	var wf struct {
		WorkflowID string `json:"workflow_id"`
		Outcome    string `json:"outcome"`
		Steps      []struct {
			Status string `json:"status"`
		} `json:"steps"`
	}
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "added" || len(wf.Steps) != 3 || wf.Steps[0].Status != "ok" || wf.Steps[1].Status != "error" || wf.Steps[2].Status != "error" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if adds.Load() != 1 {
		t.Errorf("add_note ran %d times", adds.Load())
	}
	detail := h.do("GET", "/v1/workflows/"+wf.WorkflowID, admin, nil)
	if !strings.Contains(string(detail.Body), `"method":"tools/call"`) || !strings.Contains(string(detail.Body), "delete_note is not allowed here") ||
		!strings.Contains(string(detail.Body), "over the response limit of 1048576 bytes") {
		t.Errorf("the history: %s", detail.Body)
	}

	// A dry-run replay serves both calls from the record: no request reaches the server.
	before := requests.Load()
	rp := h.do("POST", "/v1/workflows/"+wf.WorkflowID+"/replay", admin, map[string]any{"target_agent_version": "scribe@1"})
	if rp.Status != 201 || !strings.Contains(string(rp.Body), `"replay_outcome":"added"`) || !strings.Contains(string(rp.Body), `"steps_changed":0`) {
		t.Errorf("replay: %d %s", rp.Status, rp.Body)
	}
	if got := requests.Load() - before; got != 0 {
		t.Errorf("the replay sent %d requests to the MCP server", got)
	}
}
