package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// fanOutSDL is a schema of 400 query fields returning T, whose 25 fields
// return U, whose 25 fields (each named name(i)) return the enum E: every
// operation selects and describes 625 fields.
func fanOutSDL(name func(i int) string, enumValues int) string {
	var sb strings.Builder
	sb.WriteString("type Query {\n")
	for i := range 400 {
		fmt.Fprintf(&sb, "  q%d: T\n", i)
	}
	sb.WriteString("}\ntype T {\n")
	for i := range 25 {
		fmt.Fprintf(&sb, "  t%d: U\n", i)
	}
	sb.WriteString("}\ntype U {\n")
	for i := range 25 {
		fmt.Fprintf(&sb, "  %s: E\n", name(i))
	}
	sb.WriteString("}\nenum E {")
	for i := range enumValues {
		fmt.Fprintf(&sb, " VALUE_%d", i)
	}
	sb.WriteString(" }\n")
	return sb.String()
}

// TestImportBudget: what operations sharing their types store is bounded
// by the document's size.
func TestImportBudget(t *testing.T) {
	t.Run("schemas", func(t *testing.T) {
		// Each operation's result schema has 625 copies of E, ~400 KB.
		sdl := fanOutSDL(func(i int) string { return fmt.Sprintf("u%d", i) }, 60)
		spec, err := Importer{}.Import(context.Background(), tool.Source{Data: []byte(sdl)})
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Operations) != 400 {
			t.Fatalf("%d operations, want 400", len(spec.Operations))
		}
		stored := 0
		for _, op := range spec.Operations {
			stored += len(op.Input) + len(op.Output) + len(op.GraphQL.Selection)
			if !json.Valid(op.Input) || !json.Valid(op.Output) {
				t.Fatalf("%s: invalid schema JSON", op.ID)
			}
		}
		if most := tool.BudgetFor(len(sdl)); stored > most {
			t.Errorf("operations store %d bytes, want at most %d", stored, most)
		}
		last := spec.Operations[len(spec.Operations)-1]
		if !strings.Contains(string(last.Output), "not described") || !strings.HasPrefix(last.GraphQL.Selection, "{ t0 { u0 ") {
			t.Errorf("last operation: output of %d bytes, selection of %d; want a stub output and the selection", len(last.Output), len(last.GraphQL.Selection))
		}
		if w := strings.Join(spec.Warnings, "\n"); !strings.Contains(w, "are not described") {
			t.Errorf("warnings %q, want one saying schemas are not described", spec.Warnings)
		}
	})
	t.Run("selection sets", func(t *testing.T) {
		// Each operation's selection set names 625 fields of 1,000 characters.
		sdl := fanOutSDL(func(i int) string { return fmt.Sprintf("u%d_%s", i, strings.Repeat("x", 1000)) }, 1)
		_, err := Importer{}.Import(context.Background(), tool.Source{Data: []byte(sdl)})
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Code != problem.SpecTooLarge {
			t.Fatalf("error %v, want %s", err, problem.SpecTooLarge)
		}
	})
}

// TestBuilderSharesTypes: a type's selection set, result schema and
// argument schema are built once per depth, however many operations use
// it, and each operation gets what it would get built alone.
func TestBuilderSharesTypes(t *testing.T) {
	fields := make([]string, 300)
	for i := range fields {
		fields[i] = fmt.Sprintf("f%d: Int", i)
	}
	// q's arguments spell out more input fields than maxInputFields allows.
	sdl := fanOutSDL(func(i int) string { return fmt.Sprintf("u%d", i) }, 3) + `
input Big { ` + strings.Join(fields, " ") + ` nested: Small }
input Small { s: String }
type Mutation { q(a: Big, b: Big, c: Small): T  r(a: Big): T  s(c: Small): T }`
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "schema", Input: sdl})
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(s.Types, tool.NewBudget(1<<30))
	ops, err := b.operations(context.Background(), s.Query, s.Mutation)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 403 {
		t.Fatalf("%d operations, want 403", len(ops))
	}
	// T at depth 1, U at depth 2; Big and Small at depth 0, Small at 1.
	if len(b.selections) != 2 || len(b.inputs) != 3 {
		t.Errorf("%d selection sets and %d input objects built, want 2 and 3", len(b.selections), len(b.inputs))
	}
	for _, op := range ops[400:] {
		alone := newBuilder(s.Types, tool.NewBudget(1<<30))
		want, err := alone.operations(context.Background(), nil, &ast.Definition{Fields: ast.FieldList{s.Mutation.Fields.ForName(op.GraphQL.Field)}})
		if err != nil {
			t.Fatal(err)
		}
		if string(op.Input) != string(want[0].Input) || string(op.Output) != string(want[0].Output) {
			t.Errorf("%s: schemas differ from those built alone", op.ID)
		}
	}
}
