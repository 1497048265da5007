package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/internal/tool"
)

// testCatalog registers payments (policy class financial) and cases, and
// knows the models "default" and "gpt-4o-mini".
func testCatalog() *Catalog {
	c := NewCatalog()
	c.AddModel(DefaultModel)
	c.AddModel("gpt-4o-mini")
	c.Add(&tool.Tool{Name: "payments", PolicyClass: "financial"}, []tool.Operation{
		{ID: "getTransaction", Kind: tool.Read, Summary: "Get a transaction",
			Input: json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"}}}`),
			HTTP:  &tool.HTTPBinding{Method: "GET", Path: "/transactions/{id}", Params: []tool.Param{{Name: "id", In: "path", Required: true}}}},
		{ID: "refund", Kind: tool.Write, Summary: "Refund an amount",
			Input: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`)},
	})
	c.Add(&tool.Tool{Name: "cases", PolicyClass: "case-management"}, []tool.Operation{
		{ID: "createCase", Kind: tool.Write, Summary: "Open a review case",
			Input: json.RawMessage(`{"type":"object","properties":{"transaction":{"type":"string"},"queue":{"type":"string"}}}`)},
	})
	return c
}

// loadDef reads a definition from testdata; each call returns a fresh copy.
func loadDef(t testing.TB, name string) Definition {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	def, errs := DecodeDefinition(data)
	if errs != nil {
		t.Fatalf("decode %s: %v", name, errs)
	}
	return def
}

// parseDef decodes an inline JSON definition.
func parseDef(t testing.TB, src string) Definition {
	t.Helper()
	def, errs := DecodeDefinition([]byte(src))
	if errs != nil {
		t.Fatalf("decode: %v", errs)
	}
	return def
}

func mustCompile(t testing.TB, def Definition) *Program {
	t.Helper()
	p, errs := Compile(def, testCatalog())
	if errs != nil {
		t.Fatalf("compile: %v", errs)
	}
	return p
}

// fakeEnv answers tool calls from handlers keyed by "tool.operation" and
// records every call it was asked to make.
type fakeEnv struct {
	NoPlanner
	NoDecisions
	mu       sync.Mutex
	handlers map[string]func(args map[string]any) CallResult
	calls    []string
	steps    []int
	callIDs  []string
}

func (f *fakeEnv) Call(_ context.Context, step int, c ToolCall) (CallResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := c.Tool + "." + c.Operation
	f.calls = append(f.calls, key)
	f.steps = append(f.steps, step)
	f.callIDs = append(f.callIDs, c.CallID)
	h, ok := f.handlers[key]
	if !ok {
		return CallResult{}, fmt.Errorf("no fake for %s", key)
	}
	return h(c.Args), nil
}

// ok returns a handler answering a fixed JSON result.
func ok(result string) func(map[string]any) CallResult {
	return func(map[string]any) CallResult {
		return CallResult{Status: StatusOK, Result: json.RawMessage(result)}
	}
}

// answering returns a fake answering one operation with res.
func answering(key string, res CallResult) *fakeEnv {
	return &fakeEnv{handlers: map[string]func(map[string]any) CallResult{
		key: func(map[string]any) CallResult { return res },
	}}
}

// fraudEnv serves a transaction of the given amount and opens case_9.
func fraudEnv(amount string) *fakeEnv {
	return &fakeEnv{handlers: map[string]func(map[string]any) CallResult{
		"payments.getTransaction": func(args map[string]any) CallResult {
			return CallResult{Status: StatusOK, Result: json.RawMessage(fmt.Sprintf(`{"id":%q,"amount":%s}`, args["id"], amount))}
		},
		"cases.createCase": ok(`{"case_id":"case_9"}`),
		"payments.refund":  ok(`{"refunded":true}`),
	}}
}

func fraudInput(scopes ...string) Input {
	return Input{
		Goal:    "triage transaction tx_1",
		Context: map[string]any{"transaction_id": "tx_1"},
		Caller:  Caller{Sub: "user_1", Tenant: "acme", Scopes: scopes},
		Agent:   "fraud-triage", Version: "1",
	}
}

func ptr[T any](v T) *T { return &v }
