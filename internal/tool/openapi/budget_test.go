package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/tool"
)

// objectOf is a schema with n properties p0…, each the schema prop(i).
func objectOf(n int, prop func(i int) any) map[string]any {
	props := make(map[string]any, n)
	for i := range n {
		props[fmt.Sprintf("p%d", i)] = prop(i)
	}
	return map[string]any{"type": "object", "properties": props}
}

func refTo(name string) func(int) any {
	return func(int) any { return map[string]any{"$ref": "#/components/schemas/" + name} }
}

func getReturning(schema any) map[string]any {
	return map[string]any{"get": map[string]any{"responses": map[string]any{"200": map[string]any{
		"description": "ok", "content": map[string]any{"application/json": map[string]any{"schema": schema}},
	}}}}
}

// TestRenderBudget: small documents whose operations share large schemas
// render no more than the budget of their size, with a warning.
func TestRenderBudget(t *testing.T) {
	leaf := map[string]any{"type": "string", "description": strings.Repeat("d", 40)}
	sharedRef := func() map[string]any {
		// Big renders to ~120 KB, under MaxSchemaBytes; 2,000 operations return it.
		paths := make(map[string]any)
		for i := range 2000 {
			paths[fmt.Sprintf("/r%d", i)] = getReturning(map[string]any{"$ref": "#/components/schemas/Big"})
		}
		return map[string]any{"openapi": "3.1.0", "paths": paths, "components": map[string]any{"schemas": map[string]any{
			"Leaf": leaf, "Mid": objectOf(40, refTo("Leaf")), "Big": objectOf(40, refTo("Mid")),
		}}}
	}
	sharedPathItem := func() map[string]any {
		// 2,000 paths are one path item whose inline schema is ~150 KB.
		paths := make(map[string]any)
		for i := range 2000 {
			paths[fmt.Sprintf("/r%d", i)] = map[string]any{"$ref": "#/components/pathItems/P"}
		}
		inline := objectOf(2000, func(int) any { return leaf })
		return map[string]any{"openapi": "3.1.0", "paths": paths, "components": map[string]any{"pathItems": map[string]any{
			"P": getReturning(inline),
		}}}
	}
	tests := []struct {
		name string
		doc  map[string]any
		warn string
	}{
		{"shared reference", sharedRef(), "schemas are inlined 1 references deep instead of 8"},
		{"shared path item", sharedPathItem(), "schemas are too large to inline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			// These documents are small enough to validate, but kin-openapi's
			// validator, which walks every use of a reference, would take
			// minutes over them: it is skipped.
			spec, err := New().Import(context.Background(), tool.Source{Data: data})
			if err != nil {
				t.Fatal(err)
			}
			if len(spec.Operations) != 2000 {
				t.Fatalf("%d operations, want 2000", len(spec.Operations))
			}
			rendered := 0
			for _, op := range spec.Operations {
				rendered += len(op.Output)
				if !json.Valid(op.Output) {
					t.Fatalf("%s: invalid output schema %q", op.ID, op.Output)
				}
			}
			// Outputs are all these documents render. The rendering that
			// spends the budget is finished, and then each schema is a stub
			// of under 100 bytes.
			if most := tool.BudgetFor(len(data)) + DefaultMaxSchemaBytes + 100*len(spec.Operations); rendered > most {
				t.Errorf("output schemas of %d bytes, want at most %d", rendered, most)
			}
			for _, want := range []string{tc.warn, "validation skipped"} {
				if !strings.Contains(strings.Join(spec.Warnings, "\n"), want) {
					t.Errorf("warnings %q, want one containing %q", spec.Warnings, want)
				}
			}
		})
	}
}

// TestRenderWork: a schema with 300 properties that each refer to one ~200 KB
// schema is abandoned as soon as it grows past MaxSchemaBytes, not written
// out in full (60 MB) at every depth before it is found too large.
func TestRenderWork(t *testing.T) {
	leaf := map[string]any{"type": "string", "description": strings.Repeat("d", 100)}
	root := map[string]any{"components": map[string]any{"schemas": map[string]any{
		"L": leaf,
		"N": objectOf(50, refTo("L")),
		"M": objectOf(30, refTo("N")),
		"W": objectOf(300, refTo("M")),
	}}}
	const budget = 1 << 40
	r := newRenderer(root, false, DefaultMaxRefDepth, DefaultMaxSchemaBytes, budget, func(string, ...any) {})
	out := r.render(map[string]any{"$ref": "#/components/schemas/W"})
	if !json.Valid(out) || len(out) > DefaultMaxSchemaBytes {
		t.Errorf("output: %d bytes, valid %v", len(out), json.Valid(out))
	}
	// Each depth tried writes at most about twice MaxSchemaBytes.
	if work, most := budget-r.budget, 2*(DefaultMaxRefDepth+1)*DefaultMaxSchemaBytes; work > most {
		t.Errorf("rendering wrote %d bytes, want at most %d", work, most)
	}
}

// TestBisectionFindsTheDeepestDepthThatFits: with a budget that only some
// depths fit, operations settles on the deepest of them, whose rendering
// the bisection's discarding passes must not have changed: it equals a
// rendering at that depth with no budget to speak of.
func TestBisectionFindsTheDeepestDepthThatFits(t *testing.T) {
	// A chain L0 → L1 → … → L9, each level adding a description: every
	// reference inlined more makes each operation's output longer.
	schemas := map[string]any{}
	for i := range 10 {
		s := map[string]any{"type": "object", "description": strings.Repeat("x", 200)}
		if i < 9 {
			s["properties"] = map[string]any{"next": map[string]any{"$ref": fmt.Sprintf("#/components/schemas/L%d", i+1)}}
		}
		schemas[fmt.Sprintf("L%d", i)] = s
	}
	paths := map[string]any{}
	for i := range 50 {
		paths[fmt.Sprintf("/r%d", i)] = getReturning(map[string]any{"$ref": "#/components/schemas/L0"})
	}
	doc := func() map[string]any {
		b, _ := json.Marshal(map[string]any{"openapi": "3.1.0", "paths": paths, "components": map[string]any{"schemas": schemas}})
		root, _, err := parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return root
	}
	// What each depth costs with no budget to speak of.
	render := func(depth int) ([]tool.Operation, int) {
		root := doc()
		r := newRenderer(root, false, depth, DefaultMaxSchemaBytes, 1<<40, func(string, ...any) {})
		ops, err := (&builder{root: root, warn: func(string, ...any) {}, render: r}).operations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ops, 1<<40 - r.budget
	}
	_, cost3 := render(3)
	_, cost4 := render(4)
	budget := (cost3 + cost4) / 2 // depth 3 fits, depth 4 does not
	w := &warnings{}
	ops, whole, err := New().operations(t.Context(), doc(), false, 8, DefaultMaxSchemaBytes, budget, func() {}, w)
	if err != nil {
		t.Fatal(err)
	}
	if whole {
		t.Error("reported whole at a budget depth 8 does not fit")
	}
	if !slices.Contains(w.items, "schemas are inlined 3 references deep instead of 8 to bound their size") {
		t.Errorf("warnings %q, want depth 3", w.items)
	}
	want, _ := render(3)
	for i := range want {
		if string(ops[i].Output) != string(want[i].Output) {
			t.Fatalf("%s: output\n%s\nwant the depth-3 rendering\n%s", want[i].ID, ops[i].Output, want[i].Output)
		}
	}
}
