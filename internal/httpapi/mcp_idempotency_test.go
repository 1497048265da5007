package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callKeyed calls a tool with an idempotency key in _meta.
func callKeyed(t *testing.T, cs *mcp.ClientSession, key, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"io.agentplane/idempotency-key": key}, Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// workflowOf is the workflow id of a call's result.
func workflowOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var v struct {
		WorkflowID string `json:"workflow_id"`
	}
	if err := json.Unmarshal([]byte(resultText(res)), &v); err != nil || v.WorkflowID == "" {
		t.Fatalf("result without a workflow: %v %s", res.IsError, resultText(res))
	}
	return v.WorkflowID
}

func TestMCPCallsWithAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_77", 1500.0)
	w.amounts.Store("tx_78", 20.0)
	tok := h.token("acme", "mcp:use agents:invoke tool:*")
	cs := mcpSession(t, h, tok)
	read := h.token("acme", "workflows:read")
	count := func(agent string) int {
		t.Helper()
		var list struct {
			Workflows []any `json:"workflows"`
		}
		h.do("GET", "/v1/workflows?agent="+agent, read, nil).json(t, &list)
		return len(list.Workflows)
	}
	get := map[string]any{"tool": "payments", "operation": "getTransaction", "args": map[string]any{"id": "tx_77"}}

	// A repeated call_operation with the key attaches to the first call's
	// workflow: the API is called once, one workflow is recorded.
	before := w.payments.Load()
	first := callKeyed(t, cs, "op-1", "call_operation", get)
	again := callKeyed(t, cs, "op-1", "call_operation", get)
	if first.IsError || again.IsError {
		t.Fatalf("calls: %s / %s", resultText(first), resultText(again))
	}
	if a, b := workflowOf(t, first), workflowOf(t, again); a != b {
		t.Errorf("repeat made workflow %s, the first %s: want one", b, a)
	}
	if first.Meta["io.agentplane/idempotent-replayed"] != nil || again.Meta["io.agentplane/idempotent-replayed"] != true {
		t.Errorf("_meta: first %v, repeat %v; want the repeat marked idempotent-replayed", first.Meta, again.Meta)
	}
	if got := w.payments.Load() - before; got != 1 {
		t.Errorf("the payments service received %d calls, want 1", got)
	}
	if n := count("mcp"); n != 1 {
		t.Errorf("%d mcp workflows, want 1", n)
	}

	// The same key with other arguments, or for another tool, is refused.
	other := map[string]any{"tool": "payments", "operation": "getTransaction", "args": map[string]any{"id": "tx_78"}}
	for name, args := range map[string]any{"call_operation": other, "agent_fraud-triage": map[string]any{"goal": "triage"}} {
		res := callKeyed(t, cs, "op-1", name, args)
		if !res.IsError || !strings.Contains(resultText(res), "idempotency key was used with another call") {
			t.Errorf("%s with a used key and other arguments: %v %s", name, res.IsError, resultText(res))
		}
	}
	if got := w.payments.Load() - before; got != 1 {
		t.Errorf("after the refusals the payments service received %d calls, want 1", got)
	}

	// An agent tool: the key in _meta, or in the POST's Idempotency-Key
	// header, is one key.
	triage := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_77"}}
	agentWF := workflowOf(t, callKeyed(t, cs, "triage-1", "agent_fraud-triage", triage))
	call := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call",
		"params": map[string]any{"name": "agent_fraud-triage", "arguments": triage}}
	r := h.do("POST", "/mcp", tok, call, "Accept", "application/json, text/event-stream", "Idempotency-Key", "triage-1")
	var rpc struct {
		Result mcp.CallToolResult `json:"result"`
	}
	r.json(t, &rpc)
	if r.Status != 200 || rpc.Result.IsError || workflowOf(t, &rpc.Result) != agentWF {
		t.Errorf("repeat through the header: %d %s, want workflow %s", r.Status, r.Body, agentWF)
	}
	if n := count("fraud-triage"); n != 1 {
		t.Errorf("%d fraud-triage workflows, want 1", n)
	}
	// Header and _meta must agree.
	call["params"].(map[string]any)["_meta"] = map[string]any{"io.agentplane/idempotency-key": "triage-2"}
	r = h.do("POST", "/mcp", tok, call, "Accept", "application/json, text/event-stream", "Idempotency-Key", "triage-1")
	r.json(t, &rpc)
	if r.Status != 200 || !rpc.Result.IsError || !strings.Contains(resultText(&rpc.Result), "differs from the Idempotency-Key header") {
		t.Errorf("header and _meta differing: %d %s", r.Status, r.Body)
	}

	// Without a key every call is a workflow of its own, as before.
	callTool(t, cs, "call_operation", get, nil)
	callTool(t, cs, "call_operation", get, nil)
	if n := count("mcp"); n != 3 {
		t.Errorf("%d mcp workflows after two calls without a key, want 3", n)
	}
}
