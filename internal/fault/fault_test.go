package fault_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

func rate(r float64) *float64 { return &r }

// TestCompileNamesEachBadField refuses each kind of bad fault, naming the
// field.
func TestCompileNamesEachBadField(t *testing.T) {
	ok := fault.Result{Status: 503}
	for _, tc := range []struct {
		name  string
		fault fault.Fault
		field string
	}{
		{"no tool", fault.Fault{Result: ok}, "faults[0].tool"},
		{"rate over 1", fault.Fault{Tool: "p", Rate: rate(1.5), Result: ok}, "faults[0].rate"},
		{"rate under 0", fault.Fault{Tool: "p", Rate: rate(-0.1), Result: ok}, "faults[0].rate"},
		{"when that does not parse", fault.Fault{Tool: "p", When: "args.amount >", Result: ok}, "faults[0].when"},
		{"when that is not a bool", fault.Fault{Tool: "p", When: "args.amount + 1", Result: ok}, "faults[0].when"},
		{"when over an unknown variable", fault.Fault{Tool: "p", When: "context.x == 1", Result: ok}, "faults[0].when"},
		{"neither status nor error", fault.Fault{Tool: "p"}, "faults[0].result"},
		{"both status and error", fault.Fault{Tool: "p", Result: fault.Result{Status: 503, Error: "timeout"}}, "faults[0].result"},
		{"status under 100", fault.Fault{Tool: "p", Result: fault.Result{Status: 99}}, "faults[0].result.status"},
		{"status over 599", fault.Fault{Tool: "p", Result: fault.Result{Status: 600}}, "faults[0].result.status"},
		{"unknown error", fault.Fault{Tool: "p", Result: fault.Result{Error: "dns"}}, "faults[0].result.error"},
		{"error with a body", fault.Fault{Tool: "p", Result: fault.Result{Error: "timeout", Body: json.RawMessage(`{}`)}}, "faults[0].result.error"},
		{"body not JSON", fault.Fault{Tool: "p", Result: fault.Result{Status: 503, Body: json.RawMessage(`{`)}}, "faults[0].result.body"},
		{"bad header", fault.Fault{Tool: "p", Result: fault.Result{Status: 503, Headers: map[string]string{"Retry After": "1"}}}, "faults[0].result.headers"},
		{"header with a line break", fault.Fault{Tool: "p", Result: fault.Result{Status: 503, Headers: map[string]string{"Retry-After": "1\r\nX: y"}}}, "faults[0].result.headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, errs := fault.Compile("faults", "wf_1", []fault.Fault{tc.fault})
			if p != nil || len(errs) == 0 {
				t.Fatalf("compiled %+v", tc.fault)
			}
			if !slices.ContainsFunc(errs, func(e problem.FieldError) bool { return e.Field == tc.field }) {
				t.Errorf("errors %+v do not name %s", errs, tc.field)
			}
		})
	}
	if _, errs := fault.Compile("faults", "wf_1", make([]fault.Fault, fault.MaxFaults+1)); len(errs) != 1 || errs[0].Field != "faults" {
		t.Errorf("too many faults: %+v", errs)
	}
}

// TestChanceIsTheDocumentedHash computes the documented formula here and
// checks that rates split calls about as asked.
func TestChanceIsTheDocumentedHash(t *testing.T) {
	for _, tc := range []struct {
		seed        string
		step, index int
	}{{"wf_01ABC", 1, 0}, {"wf_01ABC", 2, 0}, {"wf_01ABC", 1, 1}, {"wf_zz", 17, 3}} {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", tc.seed, tc.step, tc.index))
		want := float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
		if got := fault.Chance(tc.seed, tc.step, tc.index); got != want || got < 0 || got >= 1 {
			t.Errorf("Chance(%q, %d, %d) = %v, want %v", tc.seed, tc.step, tc.index, got, want)
		}
	}
	under := 0
	const n = 10000
	for i := range n {
		if fault.Chance(fmt.Sprintf("wf_%d", i), 1, 0) < 0.3 {
			under++
		}
	}
	if under < 2800 || under > 3200 {
		t.Errorf("%d of %d under 0.3", under, n)
	}
}

// TestInjectMatches injects by tool, operation, when and rate, the first
// fault that applies winning.
func TestInjectMatches(t *testing.T) {
	ctx := context.Background()
	p, errs := fault.Compile("faults", "wf_seed", []fault.Fault{
		{Tool: "payments", Operation: "refund", When: "args.amount > 100", Result: fault.Result{Status: 503, Body: json.RawMessage(`{"error":"busy"}`)}},
		{Tool: "payments", Operation: "getTransaction", Rate: rate(0.5), Result: fault.Result{Error: fault.ErrorTimeout}},
		{Tool: "cases", Rate: rate(0), Result: fault.Result{Status: 500}},
		{Tool: "payments", Result: fault.Result{Status: 200, Body: json.RawMessage(`{"ok":true}`)}},
		{Tool: "ledger", When: "args.id.startsWith('tx_')", Result: fault.Result{Status: 500}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		name      string
		step      int
		tool, op  string
		args      map[string]any
		wantFault int // -1: none
	}{
		{"when holds", 1, "payments", "refund", map[string]any{"amount": 150.0}, 0},
		{"a string function on an argument", 1, "ledger", "post", map[string]any{"id": "tx_1"}, 4},
		{"a string function that does not hold", 1, "ledger", "post", map[string]any{"id": "other"}, -1},
		{"when does not hold: the next fault", 1, "payments", "refund", map[string]any{"amount": 50.0}, 3},
		{"when cannot be evaluated: the next fault", 1, "payments", "refund", map[string]any{}, 3},
		{"rate 0 never", 1, "cases", "createCase", nil, -1},
		{"another tool", 1, "billing", "post", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := p.Inject(ctx, tc.step, tc.tool, tc.op, tc.args)
			got := -1
			if in != nil {
				got = in.Fault
			}
			if got != tc.wantFault {
				t.Errorf("fault %d, want %d", got, tc.wantFault)
			}
		})
	}
	// Rate 0.5: the steps whose Chance is under it, and no others.
	for step := 1; step <= 200; step++ {
		in := p.Inject(ctx, step, "payments", "getTransaction", nil)
		want := 3
		if fault.Chance("wf_seed", step, 1) < 0.5 {
			want = 1
		}
		if in == nil || in.Fault != want {
			t.Fatalf("step %d: %+v, want fault %d", step, in, want)
		}
	}
	var none *fault.Plan
	if none.Inject(ctx, 1, "payments", "refund", nil) != nil {
		t.Error("a nil plan injected")
	}
}

// TestCallResultIsARealAnswersShape maps each injected answer to the call
// result a real answer of its kind gives.
func TestCallResultIsARealAnswersShape(t *testing.T) {
	const mark = " (a fault injected by the replay; the call was not sent)"
	for _, tc := range []struct {
		result fault.Result
		want   agent.CallResult
	}{
		{fault.Result{Status: 503, Body: json.RawMessage(`{"error":"busy"}`)}, agent.CallResult{Status: agent.StatusError,
			Result: json.RawMessage(`{"error":"busy"}`), Err: "the API answered 503 Service Unavailable" + mark, ErrorCode: tool.CodeUpstream}},
		{fault.Result{Status: 429}, agent.CallResult{Status: agent.StatusError, Err: "the API answered 429 Too Many Requests" + mark, ErrorCode: tool.CodeRateLimited}},
		{fault.Result{Status: 201, Body: json.RawMessage(`{"id":1}`)}, agent.CallResult{Status: agent.StatusOK, Result: json.RawMessage(`{"id":1}`)}},
		{fault.Result{Error: fault.ErrorTimeout}, agent.CallResult{Status: agent.StatusError, Err: "the call timed out" + mark, ErrorCode: tool.CodeTimeout}},
		{fault.Result{Error: fault.ErrorTransport}, agent.CallResult{Status: agent.StatusError, Err: "the API could not be reached" + mark, ErrorCode: tool.CodeTransport}},
	} {
		p, errs := fault.Compile("faults", "wf", []fault.Fault{{Tool: "t", Result: tc.result}})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		in := p.Inject(context.Background(), 1, "t", "op", nil)
		if diff := cmp.Diff(tc.want, in.CallResult()); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.result, diff)
		}
		if in.Status != tc.result.Status || in.Error != tc.result.Error {
			t.Errorf("injected %+v for %+v", in.Injected, tc.result)
		}
	}
}
