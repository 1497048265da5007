package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// fakeRun is an attempt whose calls answer from a table; args are the
// last call's arguments.
type fakeRun struct {
	calls int
	args  map[string]any
}

func (*fakeRun) WorkflowID() string { return "wf_1" }
func (*fakeRun) Attempt() int       { return 1 }
func (*fakeRun) Agent() string      { return "support@3" }
func (*fakeRun) Operations() []agent.GatewayOperation {
	return []agent.GatewayOperation{
		{Name: "svc__getOrder", Tool: "svc", OperationInfo: agent.OperationInfo{ID: "getOrder", Kind: "read", Description: "Get an order.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}},
		{Name: "svc__cancel", Tool: "svc", OperationInfo: agent.OperationInfo{ID: "cancel", Kind: "write"}},
		{Name: "svc__text", Tool: "svc", OperationInfo: agent.OperationInfo{ID: "text", Kind: "read", InputSchema: json.RawMessage(`null`)}},
	}
}
func (f *fakeRun) Call(_ context.Context, name string, args map[string]any) (workflow.CallAnswer, error) {
	f.calls++
	f.args = args
	switch name {
	case "svc__getOrder":
		return workflow.CallAnswer{Result: json.RawMessage(`{"id":"o1","total":12}`)}, nil
	case "svc__cancel":
		return workflow.CallAnswer{IsError: true, Message: "refused: needs approval", Result: json.RawMessage(`{"why":"policy"}`)}, nil
	}
	return workflow.CallAnswer{Result: json.RawMessage(`"plain"`)}, nil
}

const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// TestMCPFastMatchesSDK sends each request to the fast path and to the SDK
// alone, and wants the same status, headers and JSON.
func TestMCPFastMatchesSDK(t *testing.T) {
	type req struct {
		name   string
		method string
		header map[string]string
		body   string
		fast   bool // the fast path answers it
	}
	v := func(ver string) map[string]string { return map[string]string{"Mcp-Protocol-Version": ver} }
	sl := func(method, name string) map[string]string {
		h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		return h
	}
	init := func(ver string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + ver + `","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	}
	cases := []req{
		{"initialize 2025-06-18", "POST", nil, init("2025-06-18"), true},
		{"initialize 2025-11-25", "POST", nil, init("2025-11-25"), true},
		{"initialize 2025-03-26", "POST", nil, init("2025-03-26"), true},
		{"initialize 2024-11-05", "POST", nil, init("2024-11-05"), true},
		{"initialize 2026-07-28", "POST", nil, init("2026-07-28"), true},
		{"initialize unknown", "POST", nil, init("1999-01-01"), true},
		{"initialize no params", "POST", nil, `{"jsonrpc":"2.0","id":"a","method":"initialize"}`, false},
		{"initialize null params", "POST", nil, `{"jsonrpc":"2.0","id":"a","method":"initialize","params":null}`, false},
		{"cancelled no params", "POST", nil, `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, false},
		{"tools/list null params", "POST", nil, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":null}`, true},
		{"ping no header", "POST", nil, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, true},
		{"float id", "POST", nil, `{"jsonrpc":"2.0","id":2.5,"method":"ping"}`, false},
		{"null id", "POST", nil, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, false},
		{"initialized", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, true},
		{"initialized no header", "POST", nil, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`, true},
		{"cancelled", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, true},
		{"unknown notification", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","method":"notifications/whatever"}`, false},
		{"ping", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":7,"method":"ping"}`, true},
		{"tools/list", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, true},
		{"tools/list 2025-11-25", "POST", v("2025-11-25"), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, true},
		{"tools/list cursor", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"x"}}`, false},
		{"tools/call", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__getOrder","arguments":{"id":"o1"}}}`, true},
		{"tools/call refused", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__cancel","arguments":{}}}`, true},
		{"tools/call text", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":"s3","method":"tools/call","params":{"name":"svc__text"}}`, true},
		{"tools/call unknown tool", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, false},
		{"tools/call array arguments", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__getOrder","arguments":[1]}}`, false},
		{"tools/call no name", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}`, false},
		{"tools/call bad params", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}`, false},
		{"stateless tools/list", "POST", sl("tools/list", ""), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + statelessMeta + `}}`, true},
		{"stateless tools/call", "POST", sl("tools/call", "svc__getOrder"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__getOrder","arguments":{"id":"o1"},` + statelessMeta + `}}`, true},
		{"stateless tools/call refused", "POST", sl("tools/call", "svc__cancel"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__cancel",` + statelessMeta + `}}`, true},
		{"stateless no Mcp-Method", "POST", v("2026-07-28"), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + statelessMeta + `}}`, false},
		{"stateless Mcp-Name mismatch", "POST", sl("tools/call", "svc__cancel"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__getOrder",` + statelessMeta + `}}`, false},
		{"stateless no meta", "POST", sl("tools/list", ""), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, false},
		{"stateless meta without header", "POST", nil, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + statelessMeta + `}}`, false},
		{"stateless ping", "POST", sl("ping", ""), `{"jsonrpc":"2.0","id":2,"method":"ping","params":{` + statelessMeta + `}}`, false},
		{"discover", "POST", sl("server/discover", ""), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + statelessMeta + `}}`, true},
		{"discover legacy", "POST", v("2025-11-25"), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, false},
		{"batch", "POST", nil, `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, false},
		{"unknown method", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":7,"method":"resources/list"}`, false},
		{"bad version header", "POST", v("2020-01-01"), `{"jsonrpc":"2.0","id":7,"method":"ping"}`, false},
		{"not JSON", "POST", nil, `{"jsonrpc":`, false},
		{"no jsonrpc", "POST", nil, `{"id":7,"method":"ping"}`, false},
		{"keys in capitals", "POST", nil, `{"jsonrpc":"2.0","ID":7,"Method":"ping"}`, false},
		{"name in capitals", "POST", v("2025-06-18"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"Name":"svc__getOrder","arguments":{"id":"o1"}}}`, false},
		{"GET", "GET", nil, ``, false},
		{"DELETE", "DELETE", nil, ``, false},
	}
	for _, accept := range accepts {
		for _, c := range cases {
			t.Run(accept+"/"+c.name, func(t *testing.T) {
				fm := matchSDK(t, c.method, c.header, c.body, accept)
				r := httptest.NewRequest(c.method, "/gateway/mcp", nil)
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", accept)
				for k, v := range c.header {
					r.Header.Set(k, v)
				}
				wantFast := c.fast && c.method == "POST" && accept != "application/json"
				if fast := fastHeaders(r.Header) && fm.fast(httptest.NewRecorder(), r, &fakeRun{}, []byte(c.body)); fast != wantFast {
					t.Errorf("fast path answered: %v, want %v", fast, wantFast)
				}
			})
		}
	}
}

// accepts are the Accept headers both paths are compared under.
var accepts = []string{"application/json, text/event-stream", "*/*", "Application/JSON;q=1, text/*", "application/json"}

// matchSDK sends one request to the fast path and to the SDK alone, fails
// t unless both answer with the same status, headers, JSON and calls, and
// returns the fast path's server.
func matchSDK(t *testing.T, method string, header map[string]string, body, accept string) *mcpServer {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	send := func(serve func(http.ResponseWriter, *http.Request)) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/gateway/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", accept)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		serve(w, r)
		return w
	}
	fastRun, sdkRun := &fakeRun{}, &fakeRun{}
	fm, sm := newMCP(nil, "1.2.3", logger), newMCP(nil, "1.2.3", logger)
	got := send(func(w http.ResponseWriter, r *http.Request) { fm.serve(w, r, fastRun) })
	want := send(func(w http.ResponseWriter, r *http.Request) { sm.sdkServe(w, r, sdkRun) })
	if got.Code != want.Code {
		t.Errorf("status %d, the SDK's %d (body %s)", got.Code, want.Code, want.Body)
	}
	for _, h := range []string{"Content-Type", "Cache-Control", "Mcp-Session-Id", "Allow", "Mcp-Protocol-Version"} {
		if g, w := got.Header().Values(h), want.Header().Values(h); !cmp.Equal(g, w) {
			t.Errorf("%s %q, the SDK's %q", h, g, w)
		}
	}
	if diff := cmp.Diff(decoded(want.Body.Bytes()), decoded(got.Body.Bytes())); diff != "" {
		t.Errorf("body (-sdk +fast):\n%s", diff)
	}
	if fastRun.calls != sdkRun.calls {
		t.Errorf("%d calls, the SDK's %d", fastRun.calls, sdkRun.calls)
	}
	return fm
}

// FuzzMCPFastMatchesSDK: whatever an agent's client sends, the fast path
// answers as the SDK does (or leaves the message to it).
func FuzzMCPFastMatchesSDK(f *testing.F) {
	headers := []map[string]string{
		nil,
		{"Mcp-Protocol-Version": "2025-06-18"},
		{"Mcp-Protocol-Version": "2025-11-25"},
		{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
		{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "svc__getOrder"},
		{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
		{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "ping"},
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	for _, seed := range []struct {
		header uint8
		body   string
	}{
		{0, init},
		{1, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{1, `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		{1, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`},
		{1, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__getOrder","arguments":{"id":"o1"}}}`},
		{2, `{"jsonrpc":"2.0","id":"s3","method":"tools/call","params":{"name":"svc__text"}}`},
		{3, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + statelessMeta + `}}`},
		{4, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"svc__getOrder","arguments":{"id":"o1"},` + statelessMeta + `}}`},
		{5, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + statelessMeta + `}}`},
	} {
		for a := range accepts {
			f.Add(seed.header, uint8(a), seed.body)
		}
	}
	f.Fuzz(func(t *testing.T, header, accept uint8, body string) {
		matchSDK(t, "POST", headers[int(header)%len(headers)], body, accepts[int(accept)%len(accepts)])
	})
}

// decoded is a body as JSON, or as text when it is not JSON.
func decoded(b []byte) any {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	return v
}

// TestMCPBodyLimits: a message the route lets through is served by either
// path, a large one by the SDK too (its own limit, 4 MiB by default, would
// refuse it there), and a body over the route's limit is refused 413 by
// both, never handed on cut short.
func TestMCPBodyLimits(t *testing.T) {
	m := newMCP(nil, "1.2.3", slog.New(slog.DiscardHandler))
	send := func(id string, limit int64) (*httptest.ResponseRecorder, *fakeRun) {
		call := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"svc__getOrder","arguments":{"id":"` +
			strings.Repeat("x", 5<<20) + `"}}}`
		w, run := httptest.NewRecorder(), &fakeRun{}
		r := httptest.NewRequest("POST", "/gateway/mcp", strings.NewReader(call))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		m.serve(w, r, run)
		return w, run
	}
	for _, c := range []struct{ name, id string }{
		{"fast path", "3"},
		{"the SDK", "3.5"}, // the fast path takes no id but an integer or a string
	} {
		if w, run := send(c.id, MaxRequestBody); w.Code != 200 || run.calls != 1 || !strings.Contains(w.Body.String(), `"o1"`) {
			t.Errorf("%s, 5 MiB: %d, %d calls: %.200s", c.name, w.Code, run.calls, w.Body.String())
		}
		w, run := send(c.id, 1<<20)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != http.StatusRequestEntityTooLarge || run.calls != 0 || e.Error.Code != workflow.GatewayInvalidRequest ||
			!strings.Contains(e.Error.Message, "over the 1048576 byte limit") {
			t.Errorf("%s, over the limit: %d, %d calls: %.200s", c.name, w.Code, run.calls, w.Body.String())
		}
	}
}

// TestMCPCallKeepsEveryDigit: both paths hand a call's arguments on with
// their numbers as written, an id past 2^53 with every digit.
func TestMCPCallKeepsEveryDigit(t *testing.T) {
	m := newMCP(nil, "1.2.3", slog.New(slog.DiscardHandler))
	for _, c := range []struct{ name, id string }{
		{"fast path", "3"},
		{"the SDK", "3.5"}, // the fast path takes no id but an integer or a string
	} {
		call := `{"jsonrpc":"2.0","id":` + c.id + `,"method":"tools/call","params":{"name":"svc__text",` +
			`"arguments":{"id":1234567890123456789,"page":{"size":1.0,"after":-9007199254740993}}}}`
		w, run := httptest.NewRecorder(), &fakeRun{}
		r := httptest.NewRequest("POST", "/gateway/mcp", strings.NewReader(call))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		m.serve(w, r, run)
		want := map[string]any{"id": json.Number("1234567890123456789"),
			"page": map[string]any{"size": json.Number("1.0"), "after": json.Number("-9007199254740993")}}
		if diff := cmp.Diff(want, run.args); w.Code != 200 || diff != "" {
			t.Errorf("%s: %d, args (-want +got):\n%s", c.name, w.Code, diff)
		}
	}
}
