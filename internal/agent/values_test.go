package agent

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/tool"
)

// TestExprNumber: a JSON number is a double in expressions, as it always
// was, unless it is an integer its double would change, which is an int,
// or a uint above int64's range; past uint64's range it stays a double.
func TestExprNumber(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want any
	}{
		{"42", 42.0},
		{"-7", -7.0},
		{"12.50", 12.5},
		{"1.0", 1.0},
		{"1e21", 1e21},
		{"9007199254740992", 9007199254740992.0}, // 2^53, a double
		{"1234567890123456800", 1234567890123456800.0}, // the double's own form
		{"9007199254740993", int64(9007199254740993)},
		{"1152921504606846976", int64(1152921504606846976)}, // 2^60: a double, but one written 1152921504606847000
		{"1234567890123456789", int64(1234567890123456789)},
		{"-1234567890123456789", int64(-1234567890123456789)},
		{"12345678901234567.0", int64(12345678901234567)},
		{"-9223372036854775808", int64(math.MinInt64)},
		{"9223372036854775807", int64(math.MaxInt64)},
		{"9223372036854775809", uint64(9223372036854775809)},
		{"18446744073709551615", uint64(math.MaxUint64)},
		{"18446744073709551617", 18446744073709551617.0},
		{"-9223372036854775809", -9223372036854775809.0},
	} {
		got, ok := exprNumber(json.Number(tc.lit))
		if !ok || got != tc.want {
			t.Errorf("%s: %T %v (ok %v), want %T %v", tc.lit, got, got, ok, tc.want, tc.want)
		}
	}
	if got, ok := exprNumber("1e400"); ok {
		t.Errorf("1e400: %v, want it refused, as json.Unmarshal refuses it", got)
	}
	if v, err := decodeValue([]byte(`{"a": 1e400}`)); err == nil {
		t.Errorf("decodeValue gave %v for a number past the doubles' range", v)
	}
}

// TestNormalizeReadsNumbersAsJSON: however a context was built, its
// numbers reach expressions as its JSON text would: a Go int as a double,
// an integer past 2^53 as an int, and normalizing twice changes nothing.
func TestNormalizeReadsNumbersAsJSON(t *testing.T) {
	in := map[string]any{"n": 3, "f": 2.5, "id": json.Number("1234567890123456789"), "big": int64(1234567890123456789),
		"list": []any{json.Number("1"), json.Number("9007199254740993")}, "obj": map[string]any{"u": uint64(math.MaxUint64)}}
	want := map[string]any{"n": 3.0, "f": 2.5, "id": int64(1234567890123456789), "big": int64(1234567890123456789),
		"list": []any{1.0, int64(9007199254740993)}, "obj": map[string]any{"u": uint64(math.MaxUint64)}}
	got := normalize(in)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("normalize (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, normalize(got)); diff != "" {
		t.Errorf("normalize again (-want +got):\n%s", diff)
	}
}

// orderCatalog holds the tool orders: getOrder and refund take integer
// ids.
func orderCatalog() *Catalog {
	c := NewCatalog()
	c.Add(&tool.Tool{Name: "orders"}, []tool.Operation{
		{ID: "getOrder", Kind: tool.Read, Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)},
		{ID: "refund", Kind: tool.Write, Input: json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"},"amount":{"type":"number"},"line":{"type":"integer"},"account":{"type":"integer"}}}`)},
	})
	return c
}

// argsEnv answers getOrder with an order whose id is past 2^53 and keeps
// the args of every call as JSON.
type argsEnv struct {
	NoPlanner
	NoDecisions
	mu   sync.Mutex
	args []string
	keys []string
}

func (e *argsEnv) Call(_ context.Context, _ int, c ToolCall) (CallResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	raw, _ := json.Marshal(c.Args)
	key, err := c.Key()
	if err != nil {
		return CallResult{}, err
	}
	e.args, e.keys = append(e.args, string(raw)), append(e.keys, key)
	if c.Operation == "getOrder" {
		return CallResult{Status: StatusOK, Result: json.RawMessage(`{"id":1234567890123456789,"total":99.5}`)}, nil
	}
	return CallResult{Status: StatusOK, Result: json.RawMessage(`{}`)}, nil
}

// TestCallArgsFromExpressionsKeepEveryDigit: an integer past 2^53 in the
// context or in a call's answer reaches the args of the next call with
// every digit, as an int in expressions; every other number is the double
// it always was.
func TestCallArgsFromExpressionsKeepEveryDigit(t *testing.T) {
	def := parseDef(t, `{"tools": ["orders"], "steps": [
		{"action": "read", "call": "orders.getOrder", "args": {"id": "context.order_id"}, "save_as": "order"},
		{"action": "refund", "call": "orders.refund", "args": {"order": "order.id", "amount": "context.amount", "line": "context.line", "account": "context.account"}},
		{"action": "look", "set": {
			"typed": "[type(context.order_id) == int, type(order.id) == int, type(context.account) == uint, type(context.amount) == double, type(context.line) == double]",
			"compared": "[context.order_id == 1234567890123456789, context.order_id != 1234567890123456788, context.order_id > 1.0, context.line == 3, context.line * 2.0 == 6.0]",
			"label": "'order-' + string(order.id)"}}],
		"output": "{'typed': typed, 'compared': compared, 'label': label, 'id': context.order_id}"}`)
	p, errs := Compile(def, orderCatalog())
	if errs != nil {
		t.Fatal(errs)
	}
	ctx, err := DecodeArgs([]byte(`{"order_id": 1234567890123456789, "amount": 12.50, "line": 3, "account": 18446744073709551615}`))
	if err != nil {
		t.Fatal(err)
	}
	env := &argsEnv{}
	_, res, err := p.Execute(context.Background(), Input{Goal: "refund", Context: ctx, Caller: Caller{Scopes: []string{"tool:*"}}}, env)
	if err != nil || res.Status != WorkflowCompleted {
		t.Fatalf("%v: %+v", err, res)
	}
	want := []string{
		`{"id":1234567890123456789}`,
		`{"account":18446744073709551615,"amount":12.5,"line":3,"order":1234567890123456789}`,
	}
	if diff := cmp.Diff(want, env.args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	wantKeys := []string{
		"orders\ngetOrder\n" + want[0],
		"orders\nrefund\n" + want[1],
	}
	if diff := cmp.Diff(wantKeys, env.keys); diff != "" {
		t.Errorf("call keys (-want +got):\n%s", diff)
	}
	wantOut := map[string]any{"typed": []any{true, true, true, true, true}, "compared": []any{true, true, true, true, true},
		"label": "order-1234567890123456789", "id": int64(1234567890123456789)}
	if diff := cmp.Diff(wantOut, res.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
