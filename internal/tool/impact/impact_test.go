package impact

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/tool"
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
