package graphql

import (
	"context"
	"fmt"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentplane/agentplane/internal/tool"
)

// Bounds of what an operation's selection set and schemas describe.
const (
	// maxSelectionDepth is how many levels of objects a selection set opens:
	// the result's own fields, and the fields of the objects they return.
	maxSelectionDepth = 2
	// maxFieldsPerLevel caps the fields selected from one type, and
	// maxFieldsExamined the fields considered for it.
	maxFieldsPerLevel = 25
	maxFieldsExamined = 1000
	// maxInputDepth bounds the nesting of input objects in argument schemas.
	maxInputDepth = 4
	// maxInputFields bounds the input-object fields one operation's argument
	// schema spells out; past it, input objects are described loosely.
	maxInputFields = 500
)

// builder turns root fields into operations. Root fields share their types,
// so the selection sets, result schemas and argument schemas of a type are
// built once per depth and shared by the operations that use them; what each
// operation stores is charged to budget.
type builder struct {
	types  map[string]*ast.Definition
	budget *tool.Budget

	selections map[typeDepth]selection
	leaves     map[string]map[string]any
	inputs     map[typeDepth]inputObject
	// cuts counts the input objects described loosely for want of fields
	// left in an operation's maxInputFields.
	cuts int
}

type typeDepth struct {
	name  string
	depth int
}

// selection is a selection set and the JSON Schema of what it returns.
type selection struct {
	set    string
	schema map[string]any
}

// inputObject is the schema of an input object and the input-object fields
// it spells out.
type inputObject struct {
	schema map[string]any
	fields int
}

func newBuilder(types map[string]*ast.Definition, budget *tool.Budget) *builder {
	return &builder{
		types: types, budget: budget,
		selections: map[typeDepth]selection{}, leaves: map[string]map[string]any{}, inputs: map[typeDepth]inputObject{},
	}
}

// operations lists the fields of the query root, then those of the mutation
// root. A field name both roots have becomes query_<f> and mutation_<f>.
func (b *builder) operations(ctx context.Context, query, mutation *ast.Definition) ([]tool.Operation, error) {
	names := func(d *ast.Definition) map[string]bool {
		m := map[string]bool{}
		for _, f := range fields(d) {
			m[f.Name] = true
		}
		return m
	}
	inQuery, inMutation := names(query), names(mutation)
	roots := []struct {
		def        *ast.Definition
		root, kind string
		other      map[string]bool
	}{
		{query, "query", tool.Read, inMutation},
		{mutation, "mutation", tool.Write, inQuery},
	}
	var drafts []draft
	for _, r := range roots {
		for _, f := range fields(r.def) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("import graphql: %w", err)
			}
			id := f.Name
			if r.other[f.Name] {
				id = r.root + "_" + f.Name
			}
			d := b.operation(id, r.root, r.kind, f)
			if err := b.budget.Operation(len(d.op.GraphQL.Selection), "selection sets"); err != nil {
				return nil, err
			}
			drafts = append(drafts, d)
		}
	}
	ops := make([]tool.Operation, len(drafts))
	for i, d := range drafts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("import graphql: %w", err)
		}
		d.op.Input, d.op.Output = b.budget.Schemas(d.in, d.out)
		ops[i] = d.op
	}
	return uniqueIDs(ops), nil
}

// draft is an operation and its schemas, not yet encoded.
type draft struct {
	op      tool.Operation
	in, out map[string]any
}

// uniqueIDs suffixes _2, _3, … to an id already taken, which only a schema
// naming fields query_<f> beside a shared <f> can cause.
func uniqueIDs(ops []tool.Operation) []tool.Operation {
	taken := make(map[string]bool, len(ops))
	for _, op := range ops {
		taken[op.ID] = true
	}
	seen := make(map[string]bool, len(ops))
	for i := range ops {
		id := ops[i].ID
		for n := 2; seen[id]; n++ {
			if candidate := fmt.Sprintf("%s_%d", ops[i].ID, n); !taken[candidate] {
				id = candidate
			}
		}
		seen[id], taken[id] = true, true
		ops[i].ID = id
	}
	return ops
}

// fields returns a root type's invocable fields: all but the introspection
// fields the validator adds.
func fields(d *ast.Definition) []*ast.FieldDefinition {
	if d == nil {
		return nil
	}
	var out []*ast.FieldDefinition
	for _, f := range d.Fields {
		if !strings.HasPrefix(f.Name, "__") {
			out = append(out, f)
		}
	}
	return out
}

func (b *builder) operation(id, root, kind string, f *ast.FieldDefinition) draft {
	bind := &tool.GraphQLBinding{Root: root, Field: f.Name}
	props := map[string]any{}
	var required []string
	budget := maxInputFields
	for _, a := range f.Arguments {
		req := a.Type.NonNull && a.DefaultValue == nil
		bind.Args = append(bind.Args, tool.Arg{Name: a.Name, Type: a.Type.String(), Required: req})
		props[a.Name] = withDescription(b.inputSchema(a.Type, 0, &budget), a.Description)
		if req {
			required = append(required, a.Name)
		}
	}
	in := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		in["required"] = required
	}
	sel, out := b.result(f.Type)
	bind.Selection = sel
	op := tool.Operation{
		ID:          id,
		Kind:        kind,
		Summary:     tool.FirstLine(f.Description),
		Description: strings.TrimSpace(f.Description),
		GraphQL:     bind,
	}
	return draft{op: op, in: in, out: out}
}

// result returns the selection set of a root field's type and the JSON
// Schema of what that selection returns. A result type that is not a leaf
// always gets a non-empty selection: { __typename } at least.
func (b *builder) result(t *ast.Type) (string, map[string]any) {
	d := b.lookup(t.Name())
	if d == nil || d.IsLeafType() {
		return "", wrapLists(t, b.leafSchema(t.Name(), d))
	}
	sel, out := b.selectionSet(d, 1)
	if sel == "" {
		sel, out = "{ __typename }", object(map[string]any{"__typename": map[string]any{"type": "string"}})
	}
	return sel, wrapLists(t, out)
}

// selectionSet selects from a composite type at the given depth (1 for the
// root field's type): objects get their leaf fields and, above the depth
// limit, their object fields; interfaces __typename and their leaf fields;
// unions __typename. It returns "" when nothing could be selected.
func (b *builder) selectionSet(d *ast.Definition, depth int) (string, map[string]any) {
	key := typeDepth{d.Name, depth}
	if s, ok := b.selections[key]; ok {
		return s.set, s.schema
	}
	set, schema := b.newSelectionSet(d, depth)
	b.selections[key] = selection{set, schema}
	return set, schema
}

func (b *builder) newSelectionSet(d *ast.Definition, depth int) (string, map[string]any) {
	var items []string
	props := map[string]any{}
	if d.IsAbstractType() {
		items = append(items, "__typename")
		props["__typename"] = map[string]any{"type": "string"}
	}
	if d.Kind == ast.Union {
		return "{ __typename }", object(props)
	}
	for i, f := range d.Fields {
		if len(items) >= maxFieldsPerLevel || i >= maxFieldsExamined {
			break
		}
		if strings.HasPrefix(f.Name, "__") || hasRequiredArgs(f) || f.Directives.ForName("deprecated") != nil || props[f.Name] != nil {
			continue
		}
		fd := b.lookup(f.Type.Name())
		switch {
		case fd == nil:
			continue // an undefined type: selecting it could not be valid
		case fd.IsLeafType():
			items = append(items, f.Name)
			props[f.Name] = wrapLists(f.Type, b.leafSchema(fd.Name, fd))
		case d.Kind == ast.Object && depth < maxSelectionDepth:
			sub, out := b.selectionSet(fd, depth+1)
			if sub == "" {
				continue
			}
			items = append(items, f.Name+" "+sub)
			props[f.Name] = wrapLists(f.Type, out)
		}
	}
	if len(items) == 0 {
		return "", nil
	}
	return "{ " + strings.Join(items, " ") + " }", object(props)
}

func hasRequiredArgs(f *ast.FieldDefinition) bool {
	for _, a := range f.Arguments {
		if a.Type.NonNull && a.DefaultValue == nil {
			return true
		}
	}
	return false
}

// lookup finds a type, counting the built-in scalars as defined.
func (b *builder) lookup(name string) *ast.Definition {
	if d := b.types[name]; d != nil {
		return d
	}
	if builtinScalars[name] {
		return &ast.Definition{Kind: ast.Scalar, Name: name}
	}
	return nil
}

// leafSchema is the JSON Schema of a scalar or enum; d may be nil for an
// undefined type.
func (b *builder) leafSchema(name string, d *ast.Definition) map[string]any {
	if s, ok := b.leaves[name]; ok {
		return s
	}
	s := newLeafSchema(name, d)
	b.leaves[name] = s
	return s
}

func newLeafSchema(name string, d *ast.Definition) map[string]any {
	switch name {
	case "Int":
		return map[string]any{"type": "integer"}
	case "Float":
		return map[string]any{"type": "number"}
	case "String", "ID":
		return map[string]any{"type": "string"}
	case "Boolean":
		return map[string]any{"type": "boolean"}
	}
	if d != nil && d.Kind == ast.Enum {
		values := make([]string, 0, len(d.EnumValues))
		for _, v := range d.EnumValues {
			values = append(values, v.Name)
		}
		return map[string]any{"type": "string", "enum": values}
	}
	return map[string]any{"description": "GraphQL type " + name}
}

// inputSchema is the JSON Schema of an argument or input field type; budget
// counts down the input-object fields still to spell out. An input object
// spelled out in full is reused at the same depth while budget has the
// fields it spells out, which gives what building it again would.
func (b *builder) inputSchema(t *ast.Type, depth int, budget *int) map[string]any {
	if t.Elem != nil {
		return map[string]any{"type": "array", "items": b.inputSchema(t.Elem, depth, budget)}
	}
	d := b.lookup(t.NamedType)
	if d == nil || d.Kind != ast.InputObject {
		return b.leafSchema(t.NamedType, d)
	}
	if depth >= maxInputDepth {
		return looseInput(d)
	}
	key := typeDepth{d.Name, depth}
	if in, ok := b.inputs[key]; ok && *budget >= in.fields {
		*budget -= in.fields
		return in.schema
	}
	if *budget < len(d.Fields) {
		b.cuts++
		return looseInput(d)
	}
	start, cuts := *budget, b.cuts
	*budget -= len(d.Fields)
	props := map[string]any{}
	var required []string
	for _, f := range d.Fields {
		props[f.Name] = withDescription(b.inputSchema(f.Type, depth+1, budget), f.Description)
		if f.Type.NonNull && f.DefaultValue == nil {
			required = append(required, f.Name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	if b.cuts == cuts {
		b.inputs[key] = inputObject{s, start - *budget}
	}
	return s
}

func looseInput(d *ast.Definition) map[string]any {
	return map[string]any{"type": "object", "description": "GraphQL input " + d.Name}
}

// wrapLists wraps a named type's schema in the arrays t's list types make.
func wrapLists(t *ast.Type, s map[string]any) map[string]any {
	if t.Elem != nil {
		return map[string]any{"type": "array", "items": wrapLists(t.Elem, s)}
	}
	return s
}

func object(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props}
}

func withDescription(s map[string]any, desc string) map[string]any {
	if desc = strings.TrimSpace(desc); desc != "" {
		c := make(map[string]any, len(s)+1)
		for k, v := range s {
			c[k] = v
		}
		c["description"] = desc
		return c
	}
	return s
}
