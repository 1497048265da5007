package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// rpcAnswer is a JSON-RPC response of /mcp.
type rpcAnswer struct {
	Result map[string]any
	Error  *struct {
		Code    int
		Message string
	}
}

// rpc sends one JSON-RPC request to /mcp as raw Streamable HTTP.
func rpc(t *testing.T, h *harness, token, method string, params map[string]any) rpcAnswer {
	t.Helper()
	r := h.do("POST", "/mcp", token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
		"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-11-25")
	var a rpcAnswer
	if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
		t.Fatalf("%s: %d %s", method, r.Status, r.Body)
	}
	return a
}

// withTasks is a request's _meta declaring the Tasks extension.
var withTasks = map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{
	"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}

// pollTask polls tasks/get (the extension's form) until the task's status
// is one of want.
func pollTask(t *testing.T, h *harness, token, id string, want ...string) map[string]any {
	t.Helper()
	for range 400 {
		a := rpc(t, h, token, "tasks/get", map[string]any{"taskId": id, "_meta": withTasks})
		if a.Error != nil {
			t.Fatalf("tasks/get %s: %+v", id, a.Error)
		}
		for _, w := range want {
			if a.Result["status"] == w {
				return a.Result
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("task %s did not reach %v within 10 s", id, want)
	return nil
}

// TestMCPTasksExtension drives the Tasks extension (SEP-2663) with raw
// JSON-RPC: the capabilities advertised, an agent tool's call answered
// with a task, an approval wait as input_required decided through the
// approvals API, a cancelled task, and the scopes and tenant of each
// message; a call that does not declare the extension is answered as
// before.
func TestMCPTasksExtension(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("t-big", 900.0)
	w.amounts.Store("t-small", 20.0)
	tok := h.tokenFor("alice", "mcp:use agents:invoke workflows:read tool:*")
	approver := h.tokenFor("bob", "workflows:approve approve:refunds")

	// Advertised: initialize and tools/list, and the server card.
	init := rpc(t, h, tok, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	caps, _ := init.Result["capabilities"].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	legacy, _ := caps["tasks"].(map[string]any)
	if exts["io.modelcontextprotocol/tasks"] == nil || legacy["requests"] == nil || legacy["cancel"] == nil || caps["tools"] == nil {
		t.Fatalf("initialize capabilities: %v", caps)
	}
	list := rpc(t, h, tok, "tools/list", nil)
	for _, tl := range list.Result["tools"].([]any) {
		tool := tl.(map[string]any)
		exec, _ := tool["execution"].(map[string]any)
		if agent := strings.HasPrefix(tool["name"].(string), "agent_"); agent != (exec["taskSupport"] == "optional") {
			t.Errorf("tool %v: execution %v", tool["name"], tool["execution"])
		}
	}
	disc := h.do("POST", "/mcp", tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{}}}},
		"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover")
	if !strings.Contains(string(disc.Body), `"extensions":{"io.modelcontextprotocol/tasks":{}}`) || !strings.Contains(string(disc.Body), `"tools":{`) {
		t.Errorf("server/discover: %d %s", disc.Status, disc.Body)
	}
	card := h.do("GET", "/.well-known/mcp/server-card.json", "", nil)
	if !strings.Contains(string(card.Body), `"io.modelcontextprotocol/tasks":{}`) {
		t.Errorf("the server card does not name the Tasks extension: %s", card.Body)
	}

	// A call that does not declare the extension waits, as before.
	plain := rpc(t, h, tok, "tools/call", map[string]any{"name": "agent_refunds", "arguments": map[string]any{"goal": "refund", "context": map[string]any{"transaction_id": "t-small"}}})
	if plain.Result["resultType"] == "task" || plain.Result["structuredContent"] == nil {
		t.Fatalf("plain call: %v", plain.Result)
	}

	// A task that waits for an approval: input_required, with the approval
	// as a URL elicitation; decided through the API, it completes.
	start := func(tx string) string {
		t.Helper()
		a := rpc(t, h, tok, "tools/call", map[string]any{"name": "agent_refunds", "_meta": withTasks,
			"arguments": map[string]any{"goal": "refund", "context": map[string]any{"transaction_id": tx}}})
		id, _ := a.Result["taskId"].(string)
		if a.Error != nil || a.Result["resultType"] != "task" || id == "" || a.Result["pollIntervalMs"] == nil || a.Result["createdAt"] == nil {
			t.Fatalf("tools/call as a task: %+v %v", a.Error, a.Result)
		}
		return id
	}
	id := start("t-big")
	// The same call with the same idempotency key attaches to its task.
	keyed := func() map[string]any {
		t.Helper()
		return rpc(t, h, tok, "tools/call", map[string]any{"name": "agent_refunds", "_meta": map[string]any{
			"io.modelcontextprotocol/clientCapabilities": withTasks["io.modelcontextprotocol/clientCapabilities"],
			"io.agentplane/idempotency-key":              "refund-t-big-1"},
			"arguments": map[string]any{"goal": "refund", "context": map[string]any{"transaction_id": "t-big"}}}).Result
	}
	first, again := keyed(), keyed()
	if first["taskId"] == nil || again["taskId"] != first["taskId"] || again["taskId"] == id || again["_meta"] == nil {
		t.Errorf("a keyed task call, twice: %v then %v", first, again)
	}
	if r := h.do("POST", "/v1/workflows/"+first["taskId"].(string)+"/cancel", tok, nil); r.Status != 200 {
		t.Fatalf("cancel the keyed task's workflow: %d %s", r.Status, r.Body)
	}
	waiting := pollTask(t, h, tok, id, "input_required")
	reqs, _ := waiting["inputRequests"].(map[string]any)
	el, _ := reqs["approval-2"].(map[string]any)
	elp, _ := el["params"].(map[string]any)
	if el["method"] != "elicitation/create" || elp["mode"] != "url" || !strings.Contains(elp["message"].(string), "Refund of 900") {
		t.Fatalf("input_required: %v", waiting)
	}
	if a := rpc(t, h, tok, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"approval-2": map[string]any{"action": "accept"}}}); a.Error != nil || a.Result["resultType"] != "complete" {
		t.Errorf("tasks/update: %+v %v", a.Error, a.Result)
	}
	if r := h.do("POST", "/v1/workflows/"+id+"/approvals/2", approver, map[string]any{"decision": "approve"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	done := pollTask(t, h, tok, id, "completed", "cancelled")
	res, _ := done["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if done["status"] != "completed" || sc["workflow_id"] != id || sc["status"] != "completed" || sc["outcome"] != "refunded" || res["isError"] == true {
		t.Fatalf("completed task: %v", done)
	}
	audit := h.do("GET", "/v1/audit/query?workflow_id="+id+"&action=mcp.request", h.token("acme", "audit:read"), nil)
	if !strings.Contains(string(audit.Body), `"tasks/get"`) || !strings.Contains(string(audit.Body), `"tools/call"`) {
		t.Errorf("the task's mcp.request records: %s", audit.Body)
	}

	// Scopes and tenant: reading needs workflows:read, cancelling
	// agents:invoke; another tenant's token finds no such task.
	if a := rpc(t, h, h.tokenFor("carol", "mcp:use agents:invoke"), "tasks/get", map[string]any{"taskId": id}); a.Error == nil || a.Error.Code != -32003 || !strings.Contains(a.Error.Message, "workflows:read") {
		t.Errorf("tasks/get without workflows:read: %+v", a)
	}
	if a := rpc(t, h, h.token("other", "mcp:use agents:invoke workflows:read"), "tasks/get", map[string]any{"taskId": id}); a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("tasks/get of another tenant's task: %+v", a)
	}
	for _, params := range []map[string]any{{}, {"taskId": 7}, {"taskId": strings.Repeat("w", 300)}, {"taskId": "wf_nope"}} {
		if a := rpc(t, h, tok, "tasks/get", params); a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "taskId") {
			t.Errorf("tasks/get %v: %+v", params, a)
		}
	}
	if a := rpc(t, h, tok, "tasks/nope", map[string]any{"taskId": id}); a.Error == nil || a.Error.Code != -32601 {
		t.Errorf("tasks/nope: %+v", a)
	}

	// A cancelled task.
	id = start("t-big")
	pollTask(t, h, tok, id, "input_required")
	if a := rpc(t, h, h.tokenFor("dave", "mcp:use workflows:read"), "tasks/cancel", map[string]any{"taskId": id, "_meta": withTasks}); a.Error == nil || a.Error.Code != -32003 {
		t.Errorf("tasks/cancel without agents:invoke: %+v", a)
	}
	if a := rpc(t, h, tok, "tasks/cancel", map[string]any{"taskId": id, "_meta": withTasks}); a.Error != nil || a.Result["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %+v %v", a.Error, a.Result)
	}
	if got := pollTask(t, h, tok, id, "cancelled", "completed"); got["status"] != "cancelled" {
		t.Errorf("after tasks/cancel: %v", got)
	}
	r := h.do("GET", "/v1/workflows/"+id, tok, nil)
	if !strings.Contains(string(r.Body), `"status":"cancelled"`) {
		t.Errorf("the cancelled task's workflow: %s", r.Body)
	}

	// A refusal is the tool error the call would answer, not a task; in
	// 2025-11-25's form, whose tools/call answers a task or an error, a
	// JSON-RPC error.
	a := rpc(t, h, h.tokenFor("erin", "mcp:use"), "tools/call", map[string]any{"name": "agent_refunds", "_meta": withTasks, "arguments": map[string]any{"goal": "x"}})
	if a.Result["isError"] != true || a.Result["resultType"] == "task" {
		t.Errorf("a refused task call: %v", a.Result)
	}
	a = rpc(t, h, h.tokenFor("erin", "mcp:use"), "tools/call", map[string]any{"name": "agent_refunds", "task": map[string]any{"ttl": 1000}, "arguments": map[string]any{"goal": "x"}})
	if a.Error == nil || a.Error.Code != -32003 || !strings.Contains(a.Error.Message, "agents:invoke") {
		t.Errorf("a refused 2025-11-25 task call: %+v", a)
	}
	a = rpc(t, h, tok, "tools/call", map[string]any{"name": "agent_refunds", "task": map[string]any{}, "arguments": map[string]any{"goal": "x", "extra": 1}})
	if a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "arguments") {
		t.Errorf("a 2025-11-25 task call with bad arguments: %+v", a)
	}
	// 2025-11-25 refuses to cancel a finished task; the extension acknowledges.
	if a := rpc(t, h, tok, "tasks/cancel", map[string]any{"taskId": id}); a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "finished") {
		t.Errorf("tasks/cancel of a finished task (2025-11-25): %+v", a)
	}
	if a := rpc(t, h, tok, "tasks/cancel", map[string]any{"taskId": id, "_meta": withTasks}); a.Error != nil || a.Result["resultType"] != "complete" {
		t.Errorf("tasks/cancel of a finished task (extension): %+v", a)
	}
	// An unknown agent is an unknown tool, as the SDK answers it.
	a = rpc(t, h, tok, "tools/call", map[string]any{"name": "agent_nope", "_meta": withTasks, "arguments": map[string]any{"goal": "x"}})
	if a.Error == nil && a.Result["isError"] != true || a.Result["resultType"] == "task" {
		t.Errorf("a task call of an unknown agent: %+v %v", a.Error, a.Result)
	}
}

// MCPSDKNodeModulesEnv names the node_modules directory holding the npm
// @modelcontextprotocol/sdk package (.ci/run installs
// @modelcontextprotocol/sdk@1.32.2).
const MCPSDKNodeModulesEnv = "AGENTPLANE_TEST_MCP_SDK_NODE_MODULES"

// TestMCPTasksWithTheTypeScriptSDK lets a third-party client, the official
// TypeScript SDK, read the server card and run agent_<name> calls as tasks
// (its tasks are revision 2025-11-25's): one started, polled and
// completed; one that waits for an approval, input_required until an
// approver decides it through the REST API; one cancelled.
func TestMCPTasksWithTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	modules := os.Getenv(MCPSDKNodeModulesEnv)
	node, err := exec.LookPath("node")
	if modules == "" || err != nil {
		if os.Getenv("CI") == "1" {
			t.Fatalf("CI=1 needs node and %s (npm install --prefix DIR @modelcontextprotocol/sdk@1.32.2; DIR/node_modules)", MCPSDKNodeModulesEnv)
		}
		t.Skipf("node or %s missing: npm install --prefix DIR @modelcontextprotocol/sdk@1.32.2 and set %s=DIR/node_modules", MCPSDKNodeModulesEnv, MCPSDKNodeModulesEnv)
	}
	h := newHarness(t)
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("t-big", 900.0)
	w.amounts.Store("t-small", 20.0)
	args, _ := json.Marshal(map[string]string{
		"server": h.URL, "token": h.tokenFor("alice", "mcp:use agents:invoke workflows:read tool:*"),
		"approver": h.tokenFor("bob", "workflows:approve approve:refunds"),
	})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/mcp_tasks_client.cjs", string(args))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, stdout, stderr.String())
	}
	type task struct {
		TaskID, Status, StatusMessage string
		PollInterval                  *int
	}
	type event struct {
		Event, Label, Message string
		Status                int
		Card                  struct {
			Meta map[string]any `json:"_meta"`
		}
		Capabilities struct{ Tasks map[string]any }
		Tools        []struct {
			Name      string
			Execution struct{ TaskSupport string }
		}
		Task   task
		Result struct {
			IsError           bool
			StructuredContent struct {
				WorkflowID      string `json:"workflow_id"`
				Status, Outcome string
			} `json:"structuredContent"`
			Meta map[string]struct{ TaskID string } `json:"_meta"`
		}
		IDs []string
	}
	var events []event
	for _, line := range strings.Split(strings.TrimSpace(string(stdout)), "\n") {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("client printed %q: %v", line, err)
		}
		events = append(events, e)
	}
	find := func(name, label string) []event {
		var out []event
		for _, e := range events {
			if e.Event == name && e.Label == label {
				out = append(out, e)
			}
		}
		return out
	}
	one := func(name, label string) event {
		t.Helper()
		es := find(name, label)
		if len(es) != 1 {
			t.Fatalf("%d %s events of %q, want 1:\n%s", len(es), name, label, stdout)
		}
		return es[0]
	}
	if one("card", "").Card.Meta["io.agentplane/server"] == nil || one("capabilities", "").Capabilities.Tasks["requests"] == nil {
		t.Errorf("card or capabilities without tasks:\n%s", stdout)
	}
	for _, tl := range one("tools", "").Tools {
		if strings.HasPrefix(tl.Name, "agent_") != (tl.Execution.TaskSupport == "optional") {
			t.Errorf("tool %s: taskSupport %q", tl.Name, tl.Execution.TaskSupport)
		}
	}

	// Started, polled, completed.
	small := one("created", "small").Task
	res := one("result", "small").Result
	if small.Status != "working" && small.Status != "completed" || small.PollInterval == nil || len(find("status", "small")) == 0 ||
		res.IsError || res.StructuredContent.WorkflowID != small.TaskID || res.StructuredContent.Status != "completed" ||
		res.Meta["io.modelcontextprotocol/related-task"].TaskID != small.TaskID {
		t.Errorf("the small refund's task:\n%s", stdout)
	}
	// input_required until approved through the API, then completed.
	big := one("created", "big").Task
	statuses := find("status", "big")
	res = one("result", "big").Result
	if len(statuses) == 0 || statuses[len(statuses)-1].Task.Status != "input_required" ||
		!strings.Contains(statuses[len(statuses)-1].Task.StatusMessage, "Refund of 900") || one("approved", "").Status != 200 ||
		res.StructuredContent.WorkflowID != big.TaskID || res.StructuredContent.Outcome != "refunded" {
		t.Errorf("the big refund's task:\n%s", stdout)
	}
	// Cancelled.
	before, cancelled, after := one("before-cancel", ""), one("cancel", ""), one("after-cancel", "")
	if before.Task.Status != "input_required" || cancelled.Task.Status != "cancelled" || after.Task.Status != "cancelled" ||
		after.Task.TaskID != before.Task.TaskID {
		t.Errorf("the cancelled task:\n%s", stdout)
	}
	if ids := one("list", "").IDs; !slices.Contains(ids, big.TaskID) || !slices.Contains(ids, small.TaskID) || !slices.Contains(ids, after.Task.TaskID) {
		t.Errorf("tasks/list: %v", ids)
	}
	r := h.do("GET", "/v1/workflows/"+after.Task.TaskID, h.token("acme", "workflows:read"), nil)
	if !strings.Contains(string(r.Body), `"status":"cancelled"`) {
		t.Errorf("the cancelled task's workflow: %s", r.Body)
	}
}
