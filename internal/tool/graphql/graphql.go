// Package graphql imports GraphQL schemas as tools: SDL text or the JSON
// result of the standard introspection query. Every field of the query root
// and of the mutation root becomes an operation (subscriptions are not
// invocable), with a bounded selection set and JSON Schemas of its arguments
// and result.
package graphql

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// Importer reads GraphQL SDL or introspection JSON. The zero value is ready
// to use.
type Importer struct{}

var _ tool.Importer = Importer{}

// Import reads src as introspection JSON when it is a JSON object, else as
// SDL. A schema that does not pass gqlparser's validation is still indexed
// from its syntax tree, with a warning; one that does not parse, or that has
// neither a query nor a mutation root, is a problem.SpecInvalid error.
func (Importer) Import(ctx context.Context, src tool.Source) (*tool.Spec, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("import graphql: %w", err)
	}
	data := bytes.TrimPrefix(src.Data, []byte("\xef\xbb\xbf"))
	var (
		s        *ast.Schema
		warnings []string
		err      error
	)
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		s, warnings, err = fromIntrospection(trimmed)
	} else {
		s, warnings, err = fromSDL(string(data))
	}
	if err != nil {
		return nil, err
	}
	if s.Query == nil && s.Mutation == nil {
		return nil, problem.New(problem.SpecInvalid, "the schema has neither a query nor a mutation root type")
	}
	budget := tool.NewBudget(len(src.Data))
	ops, err := newBuilder(s.Types, budget).operations(ctx, s.Query, s.Mutation)
	if err != nil {
		return nil, err
	}
	if w := budget.Warning(); w != "" {
		warnings = append(warnings, w)
	}
	return &tool.Spec{Operations: ops, Warnings: tool.CapWarnings(warnings, maxWarnings)}, nil
}

// maxWarnings bounds the warnings of one import.
const maxWarnings = 50

// fromSDL parses SDL text: strictly when the schema validates, else leniently
// from the syntax tree.
func fromSDL(sdl string) (*ast.Schema, []string, error) {
	doc, err := parser.ParseSchema(&ast.Source{Name: "schema", Input: sdl})
	if err != nil {
		return nil, nil, problem.New(problem.SpecInvalid, "not a GraphQL schema: %s", describe(err))
	}
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "schema", Input: sdl})
	if err == nil {
		return s, nil, nil
	}
	var warnings []string
	warnings = append(warnings, "the schema does not validate, indexed as written: "+describe(err))
	s = buildSchema(doc, func(w string) { warnings = append(warnings, w) })
	return s, warnings, nil
}

// describe renders a gqlparser error as "line L, column C: message".
func describe(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		if len(ge.Locations) > 0 {
			loc := ge.Locations[0]
			return fmt.Sprintf("line %d, column %d: %s", loc.Line, loc.Column, ge.Message)
		}
		return ge.Message
	}
	return err.Error()
}

// builtinScalars are the scalars every schema has, even one built from a
// syntax tree without the prelude.
var builtinScalars = map[string]bool{"Int": true, "Float": true, "String": true, "Boolean": true, "ID": true}

// buildSchema assembles a schema from a syntax tree without validating it:
// definitions and extensions are merged, duplicated fields are kept once, and
// the roots are those the schema block names (default Query and Mutation).
func buildSchema(doc *ast.SchemaDocument, warn func(string)) *ast.Schema {
	s := &ast.Schema{Types: map[string]*ast.Definition{}}
	// members holds the field and enum value names of each type so far.
	members := map[string]map[string]bool{}
	merge := func(def *ast.Definition, extension bool) {
		have, ok := s.Types[def.Name]
		if !ok {
			c := *def
			c.Fields, c.EnumValues, c.Types = nil, nil, append([]string(nil), def.Types...)
			have = &c
			s.Types[def.Name] = have
			members[def.Name] = map[string]bool{}
		} else if !extension {
			warn(fmt.Sprintf("type %s is defined more than once", def.Name))
		}
		seen := members[def.Name]
		for _, f := range def.Fields {
			if seen[f.Name] {
				warn(fmt.Sprintf("field %s.%s is defined more than once", def.Name, f.Name))
				continue
			}
			seen[f.Name] = true
			have.Fields = append(have.Fields, f)
		}
		for _, v := range def.EnumValues {
			if !seen[v.Name] {
				seen[v.Name] = true
				have.EnumValues = append(have.EnumValues, v)
			}
		}
		if extension && ok {
			have.Types = append(have.Types, def.Types...)
		}
	}
	for _, def := range doc.Definitions {
		merge(def, false)
	}
	for _, def := range doc.Extensions {
		merge(def, true)
	}
	roots := map[ast.Operation]string{}
	if len(doc.Schema) == 0 {
		roots[ast.Query], roots[ast.Mutation] = "Query", "Mutation"
	}
	for _, list := range []ast.SchemaDefinitionList{doc.Schema, doc.SchemaExtension} {
		for _, sd := range list {
			for _, ot := range sd.OperationTypes {
				roots[ot.Operation] = ot.Type
			}
		}
	}
	root := func(op ast.Operation) *ast.Definition {
		d := s.Types[roots[op]]
		if d == nil || d.Kind != ast.Object {
			return nil
		}
		return d
	}
	s.Query, s.Mutation = root(ast.Query), root(ast.Mutation)
	return s
}
