package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a token to every request of an MCP client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// mcpSession connects the SDK's own client to the harness's /mcp.
func mcpSession(t *testing.T, h *harness, token string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentplane-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             h.URL + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{token, http.DefaultTransport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and decodes its structured content.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("call %s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPServesTheTenant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_77", 1500.0)
	tok := h.token("acme", "mcp:use agents:invoke tool:* workflows:read")
	cs := mcpSession(t, h, tok)
	ctx := context.Background()

	// The tools: the agent and the two operation tools, in a fixed order.
	var names []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	if want := []string{"agent_fraud-triage", "call_operation", "search_operations"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	// Search finds the registered OpenAPI tool's operation, with the input
	// schema that says which arguments call_operation takes.
	var found struct {
		Operations []struct {
			Tool, ID, Kind string
			Score          float64
			InputSchema    map[string]any `json:"input_schema"`
		}
	}
	callTool(t, cs, "search_operations", map[string]any{"query": "read transaction"}, &found)
	if len(found.Operations) == 0 || found.Operations[0].Tool != "payments" || found.Operations[0].ID != "getTransaction" {
		t.Fatalf("search: %+v", found)
	}
	if props, _ := found.Operations[0].InputSchema["properties"].(map[string]any); props["id"] == nil {
		t.Errorf("search result's input_schema = %v, want the id argument", found.Operations[0].InputSchema)
	}

	// Call it: the tool's service receives the call, and it is a workflow.
	before := w.payments.Load()
	var called struct {
		WorkflowID string          `json:"workflow_id"`
		Status     string          `json:"status"`
		HTTPStatus int             `json:"http_status"`
		Result     json.RawMessage `json:"result"`
	}
	res := callTool(t, cs, "call_operation", map[string]any{"tool": "payments", "operation": "getTransaction", "args": map[string]any{"id": "tx_77"}}, &called)
	if res.IsError || called.Status != "ok" || called.HTTPStatus != 200 || !strings.Contains(string(called.Result), `"amount":1500`) {
		t.Fatalf("call_operation: %s", resultText(res))
	}
	if got := w.payments.Load() - before; got != 1 {
		t.Errorf("the payments service received %d calls, want 1", got)
	}
	r := h.do("GET", "/v1/workflows/"+called.WorkflowID, tok, nil)
	var wf map[string]any
	r.json(t, &wf)
	if r.Status != 200 || wf["agent"] != "mcp" || wf["agent_version"] != "payments.getTransaction" || wf["status"] != "completed" {
		t.Errorf("the call's workflow: %d %s", r.Status, r.Body)
	}
	audit := h.do("GET", "/v1/audit/query?workflow_id="+called.WorkflowID, h.token("acme", "audit:read"), nil)
	if !strings.Contains(string(audit.Body), `"action":"tool.call"`) || !strings.Contains(string(audit.Body), `"action":"workflow.step"`) {
		t.Errorf("audit of the call: %s", audit.Body)
	}
	// Exported as OCSF 1.9, the call's step names its agent and version.
	agents := 0
	for _, line := range strings.Split(strings.TrimSpace(string(h.do("GET", "/v1/audit/export?limit=5000", h.token("acme", "audit:read"), nil).Body)), "\n") {
		var e struct {
			API      struct{ Operation string }      `json:"api"`
			AIAgent  *struct{ Name, Version string } `json:"ai_agent"`
			Unmapped struct {
				WorkflowID string `json:"workflow_id"`
			} `json:"unmapped"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.API.Operation == "workflow.step" && e.Unmapped.WorkflowID == called.WorkflowID {
			if e.AIAgent == nil || e.AIAgent.Name != "mcp" || e.AIAgent.Version != "payments.getTransaction" {
				t.Errorf("the step's OCSF event names agent %+v, want mcp@payments.getTransaction", e.AIAgent)
			}
			agents++
		}
	}
	if agents == 0 {
		t.Error("the OCSF export holds no workflow.step event of the call")
	}
	// The call replays from its record like any workflow.
	rp := h.do("POST", "/v1/workflows/"+called.WorkflowID+"/replay", h.token("acme", "workflows:replay"),
		map[string]any{"target_agent_version": "mcp@payments.getTransaction"})
	if rp.Status != 201 || !strings.Contains(string(rp.Body), `"steps_changed":0`) {
		t.Errorf("replay of the call: %d %s", rp.Status, rp.Body)
	}
	if got := w.payments.Load() - before; got != 1 {
		t.Errorf("after the replay the payments service received %d calls, want 1", got)
	}

	// Invoke the agent.
	var invoked struct {
		WorkflowID string `json:"workflow_id"`
		Status     string `json:"status"`
		Outcome    string `json:"outcome"`
	}
	res = callTool(t, cs, "agent_fraud-triage", map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_77"}}, &invoked)
	if res.IsError || invoked.Status != "completed" || invoked.Outcome != "escalated" {
		t.Fatalf("agent_fraud-triage: %s", resultText(res))
	}

	// Unknown operations and bad arguments are tool errors the model reads.
	res = callTool(t, cs, "call_operation", map[string]any{"tool": "payments", "operation": "nope"}, nil)
	if !res.IsError || !strings.Contains(resultText(res), `has no operation "nope"`) {
		t.Errorf("unknown operation: %v %s", res.IsError, resultText(res))
	}
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "mcp", "definition": json.RawMessage(`{"steps":[{"action":"a","finish":"done"}]}`)}); r.Status != 422 {
		t.Errorf("deploying an agent named mcp: %d %s", r.Status, r.Body)
	}
}

func TestMCPRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	_ = w
	// Without tool:payments the call is refused as a tool error, recorded
	// as a denied workflow; the agent needs agents:invoke.
	cs := mcpSession(t, h, h.token("acme", "mcp:use tool:cases"))
	before := w.payments.Load()
	res := callTool(t, cs, "call_operation", map[string]any{"tool": "payments", "operation": "getTransaction", "args": map[string]any{"id": "tx_1"}}, nil)
	if !res.IsError || !strings.Contains(resultText(res), `"status":"denied"`) || !strings.Contains(resultText(res), "tool:payments") {
		t.Errorf("call without tool:payments: %v %s", res.IsError, resultText(res))
	}
	if w.payments.Load() != before {
		t.Error("a refused call reached the payments service")
	}
	res = callTool(t, cs, "agent_fraud-triage", map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx_1"}}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "agents:invoke") {
		t.Errorf("agent without agents:invoke: %v %s", res.IsError, resultText(res))
	}

	// Another tenant sees none of acme's agents and finds none of its operations.
	other := mcpSession(t, h, h.token("globex", "mcp:use agents:invoke tool:*"))
	var names []string
	for tl, err := range other.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"call_operation", "search_operations"}) {
		t.Errorf("another tenant's tools: %v", names)
	}
	var found struct{ Operations []any }
	callTool(t, other, "search_operations", map[string]any{"query": "transaction"}, &found)
	if len(found.Operations) != 0 {
		t.Errorf("another tenant found %v", found.Operations)
	}
	res = callTool(t, other, "call_operation", map[string]any{"tool": "payments", "operation": "getTransaction", "args": map[string]any{"id": "tx_1"}}, nil)
	if !res.IsError || !strings.Contains(resultText(res), `no tool named "payments"`) {
		t.Errorf("another tenant's call: %s", resultText(res))
	}

	// No token: 401 naming the protected resource metadata, which names
	// the issuer; mcp:use is required.
	r := h.do("POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	want := `resource_metadata="` + h.URL + `/.well-known/oauth-protected-resource/mcp"`
	if r.Status != 401 || !strings.Contains(r.Header.Get("WWW-Authenticate"), want) {
		t.Errorf("no token: %d, WWW-Authenticate %q, want it to hold %s", r.Status, r.Header.Get("WWW-Authenticate"), want)
	}
	md := h.do("GET", "/.well-known/oauth-protected-resource/mcp", "", nil)
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	md.json(t, &meta)
	if md.Status != 200 || meta.Resource != h.URL+"/mcp" || !slices.Contains(meta.ScopesSupported, "mcp:use") ||
		!slices.Equal(meta.AuthorizationServers, []string{h.URL}) {
		t.Errorf("protected resource metadata: %d %s", md.Status, md.Body)
	}
	// The API's own limits and errors apply to the message.
	big := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{"pad": strings.Repeat("x", 2<<20)}}
	if r := h.do("POST", "/mcp", h.token("acme", "mcp:use"), big); r.Status != 413 || r.problem(t).Code != "payload-too-large" {
		t.Errorf("a 2 MiB message: %d %.200s", r.Status, r.Body)
	}
	// A tenant's list is private to its callers.
	list := h.do("POST", "/mcp", h.token("acme", "mcp:use"), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
		"Accept", "application/json, text/event-stream")
	if list.Status != 200 || !strings.Contains(string(list.Body), `"cacheScope":"private"`) {
		t.Errorf("tools/list: %d %s", list.Status, list.Body)
	}
	if r := h.do("POST", "/mcp", h.token("acme", "agents:invoke tool:*"), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}); r.Status != 403 {
		t.Errorf("without mcp:use: %d %s", r.Status, r.Body)
	}
}
