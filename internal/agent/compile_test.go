package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

func TestCompileSpecExample(t *testing.T) {
	p, errs := Compile(loadDef(t, "fraud_triage.json"), testCatalog())
	if errs != nil {
		t.Fatalf("the SPEC example does not compile: %v", errs)
	}
	if diff := cmp.Diff([]string{"payments", "cases"}, p.Tools()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

// validBase compiles; each error case breaks it in one way.
const validBase = `{
  "tools": ["payments", "cases"],
  "policies": {"financial": {"allow": "true"}},
  "steps": [
    {"action": "fetch", "call": "payments.getTransaction", "args": {"id": "context.transaction_id"}, "save_as": "txn"},
    {"action": "rate", "score": "txn.amount > 1000.0 ? 0.9 : 0.1"},
    {"action": "route", "route": [{"when": "score >= 0.8", "queue": "review"}, {"queue": "standard"}]}
  ]
}`

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(d *Definition)
		// want maps each expected field to a fragment of its message.
		want map[string]string
	}{
		{
			name: "unknown tool",
			edit: func(d *Definition) { d.Tools = append(d.Tools, "ghost") },
			want: map[string]string{"tools[2]": `no tool named "ghost" is registered`},
		},
		{
			name: "tool not in the agent's tools",
			edit: func(d *Definition) { d.Tools = []string{"payments"}; d.Steps[0].Call = "cases.createCase" },
			want: map[string]string{"steps[0].call": `tool "cases" is not in the agent's tools`},
		},
		{
			name: "unknown operation",
			edit: func(d *Definition) { d.Steps[0].Call = "payments.nope" },
			want: map[string]string{"steps[0].call": `tool "payments" has no operation "nope"`},
		},
		{
			name: "an argument the operation does not take",
			edit: func(d *Definition) {
				d.Steps[0].Args = map[string]any{"ID": "context.transaction_id", "expand": "true"}
			},
			want: map[string]string{
				"steps[0].args.ID":     `step 1 (fetch): "ID" is not an argument of payments.getTransaction (did you mean "id"?); it takes id`,
				"steps[0].args.expand": `"expand" is not an argument of payments.getTransaction; it takes id`,
			},
		},
		{
			name: "malformed call",
			edit: func(d *Definition) { d.Steps[0].Call = "payments" },
			want: map[string]string{"steps[0].call": "is not <tool>.<operation id>"},
		},
		{
			name: "CEL syntax error",
			edit: func(d *Definition) { d.Steps[1].Score = "txn.amount >" },
			want: map[string]string{"steps[1].score": "syntax error"},
		},
		{
			name: "CEL type error: wrong result type",
			edit: func(d *Definition) { d.Steps[1].Score = "'high'" },
			want: map[string]string{"steps[1].score": "type error: expression gives string, want number"},
		},
		{
			name: "CEL type error: undeclared name in args",
			edit: func(d *Definition) { d.Steps[0].Args = map[string]any{"id": "nosuch.id"} },
			want: map[string]string{"steps[0].args.id": "type error: undeclared reference to 'nosuch'"},
		},
		{
			name: "CEL error in a nested arg",
			edit: func(d *Definition) {
				d.Steps[0].Args = map[string]any{"id": map[string]any{"ids": []any{"'a'", "1 +"}}}
			},
			want: map[string]string{"steps[0].args.id.ids[1]": "syntax error"},
		},
		{
			name: "a literal number past the range of a double",
			edit: func(d *Definition) { d.Steps[0].Args = map[string]any{"id": json.Number("1e400")} },
			want: map[string]string{"steps[0].args.id": "is a number past the range of a double"},
		},
		{
			name: "policy rule of the wrong type",
			edit: func(d *Definition) { d.Policies["financial"] = Policy{Allow: "'yes'"} },
			want: map[string]string{"policies.financial.allow": "want bool"},
		},
		{
			name: "policy variables are not visible to steps",
			edit: func(d *Definition) { d.Steps[1].Score = "size(args) * 1.0" },
			want: map[string]string{"steps[1].score": "undeclared reference to 'args'"},
		},
		{
			name: "bad inputs schema",
			edit: func(d *Definition) { d.Inputs = json.RawMessage(`{"type": 5}`) },
			want: map[string]string{"inputs": "not a valid JSON Schema"},
		},
		{
			name: "inputs with an external reference",
			edit: func(d *Definition) { d.Inputs = json.RawMessage(`{"$ref": "https://example.com/s.json"}`) },
			want: map[string]string{"inputs": "not a valid JSON Schema"},
		},
		{
			name: "goto to no step",
			edit: func(d *Definition) { d.Steps = append(d.Steps, Step{Action: "loop", Goto: "nowhere"}) },
			want: map[string]string{"steps[3].goto": `no step has action "nowhere"`},
		},
		{
			name: "goto to an ambiguous action",
			edit: func(d *Definition) {
				d.Steps = append(d.Steps, Step{Action: "rate", Score: "1.0"}, Step{Action: "loop", Goto: "rate"})
			},
			want: map[string]string{"steps[4].goto": `2 steps have action "rate"`},
		},
		{
			name: "two kinds in one step",
			edit: func(d *Definition) { d.Steps[1].Goto = "fetch" },
			want: map[string]string{"steps[1]": "exactly one of"},
		},
		{
			name: "missing and bad actions",
			edit: func(d *Definition) { d.Steps[0].Action = ""; d.Steps[1].Action = "Rate It" },
			want: map[string]string{"steps[0].action": "required", "steps[1].action": "not a slug"},
		},
		{
			name: "route default not last",
			edit: func(d *Definition) { d.Steps[2].Route = []RouteCase{{Queue: "a"}, {When: "true", Queue: "b"}} },
			want: map[string]string{"steps[2].route[0].when": "only the last case may omit when"},
		},
		{
			name: "finish literal that is not a slug",
			edit: func(d *Definition) {
				d.Steps = append(d.Steps, Step{Action: "end", Finish: &Finish{Outcome: "'x'", Literal: true}})
			},
			want: map[string]string{"steps[3].finish": "is not a slug"},
		},
		{
			name: "bad save_as name",
			edit: func(d *Definition) { d.Steps[0].SaveAs = "context" },
			want: map[string]string{"steps[0].save_as": "built-in variable", "steps[1].score": "undeclared reference to 'txn'"},
		},
		{
			name: "outcome and output errors",
			edit: func(d *Definition) { d.Outcome = "1 + 1"; d.Output = "queue ==" },
			want: map[string]string{"outcome": "want string", "output": "syntax error"},
		},
		{
			name: "on_denied on a score step and a bad value",
			edit: func(d *Definition) { d.Steps[1].OnDenied = "continue"; d.Steps[0].OnError = "ignore" },
			want: map[string]string{"steps[1].on_denied": "only call and plan steps", "steps[0].on_error": `must be "continue" or "end"`},
		},
		{
			name: "max_steps out of range",
			edit: func(d *Definition) { d.MaxSteps = MaxMaxSteps + 1 },
			want: map[string]string{"max_steps": "between 1 and"},
		},
		{
			name: "plan with an unknown operation",
			edit: func(d *Definition) {
				d.Steps = append(d.Steps, Step{Action: "think", Plan: &Plan{Prompt: "'go'", Operations: []string{"payments.nope", "ghost"}}})
			},
			want: map[string]string{
				"steps[3].plan.operations[0]": `has no operation "nope"`,
				"steps[3].plan.operations[1]": `tool "ghost" is not in the agent's tools`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := parseDef(t, validBase)
			tc.edit(&def)
			p, errs := Compile(def, testCatalog())
			if p != nil {
				t.Errorf("Compile returned a program along with errors")
			}
			got := map[string]string{}
			for _, e := range errs {
				got[e.Field] = e.Message
			}
			if diff := cmp.Diff(keys(tc.want), keys(got)); diff != "" {
				t.Fatalf("fields (-want +got):\n%s\nerrors: %v", diff, errs)
			}
			for f, frag := range tc.want {
				if !strings.Contains(got[f], frag) {
					t.Errorf("%s: message %q does not contain %q", f, got[f], frag)
				}
			}
		})
	}
}

func keys(m map[string]string) []string { return sortedKeys(m) }

func TestDecodeDefinition(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want *Finish
		// wantField and wantErr are the one error's field (relative to
		// the definition) and a part of its message.
		wantField, wantErr string
	}{
		{name: "finish as a slug", src: `{"steps": [{"action": "a", "finish": "cleared"}]}`,
			want: &Finish{Outcome: "cleared", Literal: true}},
		{name: "finish as an expression", src: `{"steps": [{"action": "a", "finish": {"outcome": "'x'"}}]}`,
			want: &Finish{Outcome: "'x'"}},
		{name: "unknown member", src: `{"steps": [], "stepz": []}`, wantField: "stepz", wantErr: `unknown field "stepz"`},
		{name: "wrong type", src: `{"tools": "payments"}`, wantField: "tools", wantErr: "expected []string"},
		{name: "unknown member of a step", src: `{"steps": [{"action": "a"}, {"action": "fetch", "call": "p.get", "savee_as": "x"}]}`,
			wantField: "steps[1].savee_as", wantErr: `step 2 (fetch): unknown field "savee_as"`},
		{name: "wrong type in a step", src: `{"steps": [{"action": "a", "save_as": 5}]}`,
			wantField: "steps[0].save_as", wantErr: "step 1 (a): expected string, got JSON number"},
		{name: "finish with an unknown member", src: `{"steps": [{"action": "a", "finish": {"result": "x"}}]}`,
			wantField: "steps[0]", wantErr: "step 1 (a): finish must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def, errs := DecodeDefinition([]byte(tc.src))
			if tc.wantErr != "" {
				if len(errs) != 1 || errs[0].Field != tc.wantField || !strings.Contains(errs[0].Message, tc.wantErr) {
					t.Fatalf("errors = %v, want one on %q containing %q", errs, tc.wantField, tc.wantErr)
				}
				return
			}
			if errs != nil {
				t.Fatal(errs)
			}
			if diff := cmp.Diff(tc.want, def.Steps[0].Finish); diff != "" {
				t.Errorf("finish (-want +got):\n%s", diff)
			}
			again, err := json.Marshal(def.Steps[0].Finish)
			if err != nil {
				t.Fatal(err)
			}
			var back Finish
			if err := json.Unmarshal(again, &back); err != nil || back != *tc.want {
				t.Errorf("finish does not round-trip: %s -> %+v (%v)", again, back, err)
			}
		})
	}
}

func TestValidateContext(t *testing.T) {
	p := mustCompile(t, loadDef(t, "fraud_triage.json"))
	tests := []struct {
		name string
		ctx  map[string]any
		want []problem.FieldError
	}{
		{name: "valid", ctx: map[string]any{"transaction_id": "tx_1"}},
		{name: "missing required", ctx: map[string]any{},
			want: []problem.FieldError{{Field: "context.transaction_id", Message: "is required"}}},
		{name: "nil is an empty object", ctx: nil,
			want: []problem.FieldError{{Field: "context.transaction_id", Message: "is required"}}},
		{name: "wrong type", ctx: map[string]any{"transaction_id": 7},
			want: []problem.FieldError{{Field: "context.transaction_id", Message: "got number, want string"}}},
		{name: "numbers past a double's range, first", ctx: map[string]any{"limits": map[string]any{"caps": []any{json.Number("1"), json.Number("-1e400")}},
			"max": json.Number("1e309"), "min": json.Number("1e-400"), "id": json.Number("12345678901234567890123")},
			want: []problem.FieldError{
				{Field: "context.limits.caps[1]", Message: "is -1e400, a number beyond the range of a double (about ±1.8e308): send it as a string"},
				{Field: "context.max", Message: "is 1e309, a number beyond the range of a double (about ±1.8e308): send it as a string"},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, p.ValidateContext(tc.ctx)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	// An agent without inputs refuses them too.
	open := mustCompile(t, Definition{Steps: []Step{{Action: "done", Finish: &Finish{Outcome: "'ok'"}}}})
	if got := open.ValidateContext(map[string]any{"x": json.Number("1e400"), "y": json.Number("1.5")}); len(got) != 1 || got[0].Field != "context.x" {
		t.Errorf("an agent without inputs: %+v, want context.x refused", got)
	}
}

func TestFunctionName(t *testing.T) {
	tests := []struct{ tool, op, want string }{
		{"payments", "getTransaction", "payments__getTransaction"},
		{"gh", "repos/get.contents", "gh__repos_get_contents"},
		{"t", strings.Repeat("x", 80), "t__" + strings.Repeat("x", 61)},
	}
	for _, tc := range tests {
		if got := FunctionName(tc.tool, tc.op); got != tc.want {
			t.Errorf("FunctionName(%q, %q) = %q, want %q", tc.tool, tc.op, got, tc.want)
		}
	}
}

// TestGatewayNamesAreUnique: operations whose gateway names are the same
// once cleaned or cut to 64 characters get names of their own, so a call
// by name reaches the operation that name was listed for.
func TestGatewayNamesAreUnique(t *testing.T) {
	long := strings.Repeat("x", 70)
	c := testCatalog()
	c.Add(&tool.Tool{Name: "gh"}, []tool.Operation{
		{ID: "repos.get", Kind: tool.Read}, {ID: "repos_get", Kind: tool.Write},
		{ID: long + "A", Kind: tool.Read}, {ID: long + "B", Kind: tool.Write},
	})
	g, errs := CompileExternal(External{URL: "https://agents.example.com/a", Tools: []string{"gh"}, Models: []string{DefaultModel}}, c)
	if errs != nil {
		t.Fatal(errs)
	}
	want := map[string]string{"gh__repos_get": "repos.get", "gh__repos_get_2": "repos_get",
		"gh__" + long[:60]: long + "A", "gh__" + long[:58] + "_2": long + "B"}
	got := map[string]string{}
	for _, op := range g.Operations() {
		got[op.Name] = op.ID
		if found, ok := g.Operation(op.Name); !ok || found.ID != op.ID {
			t.Errorf("Operation(%q) = %q, want %q", op.Name, found.ID, op.ID)
		}
		if len(op.Name) > 64 {
			t.Errorf("%q is longer than 64 characters", op.Name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gateway names (-want +got):\n%s", diff)
	}
}

// TestExternalOperationsNarrowTheGateway: an external version's operations
// are all the gateway offers, a tool standing for all of its operations.
func TestExternalOperationsNarrowTheGateway(t *testing.T) {
	g, errs := CompileExternal(External{URL: "https://agents.example.com/a", Tools: []string{"payments", "cases"},
		Operations: []string{"payments.getTransaction", "cases", "payments.getTransaction"}, Models: []string{DefaultModel}}, testCatalog())
	if errs != nil {
		t.Fatal(errs)
	}
	var names []string
	for _, op := range g.Operations() {
		names = append(names, op.Name)
	}
	if diff := cmp.Diff([]string{"payments__getTransaction", "cases__createCase"}, names); diff != "" {
		t.Errorf("offered (-want +got):\n%s", diff)
	}
	if _, ok := g.Operation("payments__refund"); ok {
		t.Error("payments__refund is offered, though operations leave it out")
	}
}
