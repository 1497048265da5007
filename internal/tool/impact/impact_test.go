package impact

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

func TestLiteral(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want any
		ok   bool
	}{
		{"'all'", "all", true}, {`"all"`, "all", true}, {"12", int64(12), true}, {"1.5", 1.5, true},
		{"true", true, true}, {"null", nil, true}, {float64(2), float64(2), true},
		{"context.id", nil, false}, {"'a' + 'b'", nil, false}, {map[string]any{}, nil, false}, {[]any{}, nil, false},
	} {
		got, ok := literal(tc.in)
		if ok != tc.ok || ok && !cmp.Equal(got, tc.want) {
			t.Errorf("literal(%#v) = %#v, %v; want %#v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestVersionProblems: a step's args judged against a revision's
// breaking changes, nested ones included; a required member of an object
// the args leave out, or give by an expression, is not judged.
func TestVersionProblems(t *testing.T) {
	oldOp := tool.Operation{ID: "create", Input: json.RawMessage(`{"type":"object","properties":{
		"customer":{"type":"object","properties":{"name":{"type":"string"}}},
		"size":{"type":"string","enum":["s","m","l"]},"note":{"type":"string"}}}`)}
	newOp := tool.Operation{ID: "create", Input: json.RawMessage(`{"type":"object","required":["org"],"properties":{
		"customer":{"type":"object","required":["email"],"properties":{"name":{"type":"string"},"email":{"type":"string"}}},
		"size":{"type":"string","enum":["s","m"]},"org":{"type":"string"}}}`)}
	d := tool.DiffOperations([]tool.Operation{oldOp, {ID: "gone"}}, []tool.Operation{newOp})
	c := newChecker("shop", d, []tool.Operation{newOp})
	def := func(steps ...agent.Step) json.RawMessage {
		b, _ := json.Marshal(agent.Definition{Tools: []string{"shop"}, Steps: steps})
		return b
	}
	problems := func(v *agent.Version) []string {
		var out []string
		for _, p := range c.version(v).Problems {
			out = append(out, p.Step+" "+p.Kind+" "+p.Path)
		}
		return out
	}
	v := &agent.Version{Name: "a", Version: "1", Definition: def(
		agent.Step{Action: "one", Call: "shop.create", Args: map[string]any{"customer": map[string]any{"name": "'x'"}, "size": "'l'", "note": "'n'"}},
		agent.Step{Action: "two", Call: "shop.create", Args: map[string]any{"customer": "context.customer", "size": "context.size", "org": "'o'"}},
		agent.Step{Action: "three", Call: "shop.create", Args: map[string]any{"org": "'o'"}},
		agent.Step{Action: "four", Call: "shop.gone"},
		agent.Step{Action: "five", Plan: &agent.Plan{Prompt: "'p'", Operations: []string{"shop.gone", "shop.create"}}},
	)}
	got := problems(v)
	wantSet := map[string]bool{}
	for _, w := range []string{"five operation_removed ", "one required_missing customer.email", "one literal_invalid size",
		"one argument_removed note", "one required_missing org", "four operation_removed "} {
		wantSet[w] = true
	}
	gotSet := map[string]bool{}
	for _, g := range got {
		gotSet[g] = true
	}
	if diff := cmp.Diff(wantSet, gotSet); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	// An external version naming the tool, when the revision breaks.
	ext := &agent.Version{Name: "x", Version: "1", External: &agent.External{Tools: []string{"shop"}}}
	if got := problems(ext); len(got) != 1 || got[0] != " allow_list " {
		t.Errorf("external version: %q", got)
	}
	// One whose operations offer a removed operation no longer compiles.
	ext.External.Operations = []string{"shop.create", "shop.gone"}
	if got := problems(ext); !slices.Equal(got, []string{" allow_list ", " operation_removed "}) {
		t.Errorf("external version with operations: %q", got)
	}
}

func TestParseSince(t *testing.T) {
	for in, want := range map[string]time.Duration{"": DefaultSince, "7d": 7 * 24 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseSince(in); err != nil || got != want {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "0", "-1h", "91d", "d", "1.5d"} {
		if _, err := ParseSince(in); err == nil {
			t.Errorf("ParseSince(%q) took it", in)
		}
	}
}

// TestCallIssuesQuoteNoRecordedValue: a recorded call's args and response
// that a revision's pattern, format or bound refuses are listed by field
// and by the revision's rule, never with the recorded value, which the
// impact's reader (tools:read) may not read (workflows:read).
func TestCallIssuesQuoteNoRecordedValue(t *testing.T) {
	oldOp := tool.Operation{ID: "get",
		Input:  json.RawMessage(`{"type":"object","properties":{"email":{"type":"string"},"n":{"type":"number"}}}`),
		Output: json.RawMessage(`{"type":"object","properties":{"token":{"type":"string"},"balance":{"type":"number"}}}`)}
	newOp := tool.Operation{ID: "get",
		Input:  json.RawMessage(`{"type":"object","properties":{"email":{"type":"string","pattern":"^x"},"n":{"type":"number","maximum":10}}}`),
		Output: json.RawMessage(`{"type":"object","properties":{"token":{"type":"string","pattern":"^tok_"},"balance":{"type":"number","minimum":1000000}}}`)}
	d := tool.DiffOperations([]tool.Operation{oldOp}, []tool.Operation{newOp})
	if len(d.Changed) == 0 {
		d.Changed = []tool.ChangedOperation{{Operation: "get"}}
	}
	c := newChecker("bank", d, []tool.Operation{newOp})
	for _, s := range []workflow.Step{
		{WorkflowID: "wf_1", Step: 1, Operation: "get", Status: agent.StatusOK, Args: json.RawMessage(`{"email":"alice@secret.example","n":4242.5}`)},
		{WorkflowID: "wf_2", Step: 1, Operation: "get", Status: agent.StatusOK, Args: json.RawMessage(`{}`),
			Result: json.RawMessage(`{"token":"sk-live-SECRET123","balance":31337.25}`)},
	} {
		issue, ok := c.call(&s)
		if !ok || len(issue.Errors) == 0 {
			t.Errorf("%s: no issue, want the revision's rules broken", s.WorkflowID)
			continue
		}
		got := strings.Join(issue.Errors, "; ")
		for _, leak := range []string{"alice@secret.example", "4242.5", "4,242.5", "sk-live-SECRET123", "31337.25", "31,337.25"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: the issue quotes the recorded %q: %s", s.WorkflowID, leak, got)
			}
		}
		if !strings.Contains(got, "pattern") {
			t.Errorf("%s: the issue names no pattern: %s", s.WorkflowID, got)
		}
	}
}
