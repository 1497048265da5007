package tool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

// TestBudgetSchemas: schemas are the bytes json.Marshal writes until one
// does not fit; from then on every operation's schemas are stubs.
func TestBudgetSchemas(t *testing.T) {
	schema := map[string]any{
		"type": "object", "required": []string{"a<b>", "ü\u2028", "\x01\"\\"}, "additionalProperties": false,
		"properties": map[string]any{"n": map[string]any{"enum": []any{"x", 1, nil, true}}, "bad\xff": map[string]any{}},
		"raw":        json.RawMessage(`{"k":[1,2]}`), "none": []string(nil), "empty": map[string]any{},
	}
	want, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	b := &Budget{total: 2*len(want) + 2*stubs, left: 2*len(want) + 2*stubs}
	for range 2 {
		if err := b.Operation(0, "parts"); err != nil {
			t.Fatal(err)
		}
	}
	in, out := b.Schemas(schema, schema)
	if diff := cmp.Diff(string(want), string(in)); diff != "" || string(out) != string(want) {
		t.Errorf("schemas differ from json.Marshal (-want +got):\n%s", diff)
	}
	if w := b.Warning(); w != "" {
		t.Errorf("warning %q before any stub", w)
	}
	// The second operation's two schemas no longer fit, nor any later.
	in, out = b.Schemas(schema, schema)
	if string(in) != stubInput || string(out) != stubOutput {
		t.Errorf("schemas %s and %s, want stubs", in, out)
	}
	in, out = b.Schemas(map[string]any{}, nil)
	if string(in) != stubInput || out != nil {
		t.Errorf("schemas %s and %s, want a stub input and no output", in, out)
	}
	if w := b.Warning(); !strings.Contains(w, "the last 2 operations") {
		t.Errorf("warning %q, want one counting 2 operations", w)
	}
	if b.left < 0 {
		t.Errorf("%d bytes over the budget", -b.left)
	}
	err = b.Operation(b.left+1, "parts")
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.SpecTooLarge {
		t.Errorf("error %v, want %s", err, problem.SpecTooLarge)
	}
}

func TestCapWarnings(t *testing.T) {
	w := make([]string, 52)
	got := CapWarnings(w, 50)
	if len(got) != 51 || got[50] != "and 2 more warnings" {
		t.Errorf("got %d warnings, the last %q", len(got), got[len(got)-1])
	}
	if got := CapWarnings(w[:50], 50); len(got) != 50 {
		t.Errorf("got %d of 50 warnings", len(got))
	}
}
