package graphql

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentplane/agentplane/internal/problem"
)

// IntrospectionQuery is the standard introspection query (graphql-js's,
// without the fields older servers reject). Its result is what Import reads
// as introspection JSON.
const IntrospectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name }
    mutationType { name }
    subscriptionType { name }
    types { ...FullType }
    directives {
      name
      description
      locations
      args { ...InputValue }
    }
  }
}

fragment FullType on __Type {
  kind
  name
  description
  fields(includeDeprecated: true) {
    name
    description
    args { ...InputValue }
    type { ...TypeRef }
    isDeprecated
    deprecationReason
  }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) {
    name
    description
    isDeprecated
    deprecationReason
  }
  possibleTypes { ...TypeRef }
}

fragment InputValue on __InputValue {
  name
  description
  type { ...TypeRef }
  defaultValue
}

fragment TypeRef on __Type {
  kind
  name
  ofType {
    kind
    name
    ofType {
      kind
      name
      ofType {
        kind
        name
        ofType {
          kind
          name
          ofType {
            kind
            name
            ofType {
              kind
              name
              ofType {
                kind
                name
              }
            }
          }
        }
      }
    }
  }
}
`

// introspection is the result of the introspection query, bare or wrapped
// in a GraphQL response.
type introspection struct {
	Data *struct {
		Schema *schemaJSON `json:"__schema"`
	} `json:"data"`
	Schema *schemaJSON `json:"__schema"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

func (in *introspection) schema() *schemaJSON {
	if in.Data != nil && in.Data.Schema != nil {
		return in.Data.Schema
	}
	return in.Schema
}

type schemaJSON struct {
	QueryType        *typeRef   `json:"queryType"`
	MutationType     *typeRef   `json:"mutationType"`
	SubscriptionType *typeRef   `json:"subscriptionType"`
	Types            []fullType `json:"types"`
}

type fullType struct {
	Kind          string       `json:"kind"`
	Name          string       `json:"name"`
	Description   string       `json:"description"`
	Fields        []fieldJSON  `json:"fields"`
	InputFields   []inputValue `json:"inputFields"`
	Interfaces    []typeRef    `json:"interfaces"`
	EnumValues    []enumValue  `json:"enumValues"`
	PossibleTypes []typeRef    `json:"possibleTypes"`
}

type fieldJSON struct {
	Name              string       `json:"name"`
	Description       string       `json:"description"`
	Args              []inputValue `json:"args"`
	Type              *typeRef     `json:"type"`
	IsDeprecated      bool         `json:"isDeprecated"`
	DeprecationReason string       `json:"deprecationReason"`
}

type inputValue struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Type         *typeRef `json:"type"`
	DefaultValue *string  `json:"defaultValue"`
}

type enumValue struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	IsDeprecated bool   `json:"isDeprecated"`
}

type typeRef struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	OfType *typeRef `json:"ofType"`
}

// IsIntrospection reports whether data is the JSON result of an
// introspection query: {"data":{"__schema":…}} or {"__schema":…}.
func IsIntrospection(data []byte) bool {
	var probe struct {
		Data *struct {
			Schema json.RawMessage `json:"__schema"`
		} `json:"data"`
		Schema json.RawMessage `json:"__schema"`
	}
	if json.Unmarshal(data, &probe) != nil {
		return false
	}
	isObject := func(m json.RawMessage) bool { return len(m) > 0 && m[0] == '{' }
	return isObject(probe.Schema) || (probe.Data != nil && isObject(probe.Data.Schema))
}

// maxTypeRefDepth bounds the nesting of list and non-null wrappers.
const maxTypeRefDepth = 16

// fromIntrospection builds a schema from introspection JSON.
func fromIntrospection(data []byte) (*ast.Schema, []string, error) {
	var in introspection
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, nil, problem.New(problem.SpecInvalid, "not GraphQL SDL nor introspection JSON: %v", err)
	}
	sj := in.schema()
	if sj == nil {
		if len(in.Errors) > 0 {
			return nil, nil, problem.New(problem.SpecInvalid, "the introspection result holds errors: %s", truncate(in.Errors[0].Message, 200))
		}
		return nil, nil, problem.New(problem.SpecInvalid, "JSON document without __schema: not an introspection result")
	}
	doc := &ast.SchemaDocument{}
	var ops ast.OperationTypeDefinitionList
	for op, ref := range map[ast.Operation]*typeRef{ast.Query: sj.QueryType, ast.Mutation: sj.MutationType, ast.Subscription: sj.SubscriptionType} {
		if ref != nil && ref.Name != "" {
			ops = append(ops, &ast.OperationTypeDefinition{Operation: op, Type: ref.Name})
		}
	}
	doc.Schema = ast.SchemaDefinitionList{{OperationTypes: ops}}
	for i := range sj.Types {
		def, err := definition(&sj.Types[i])
		if err != nil {
			return nil, nil, problem.New(problem.SpecInvalid, "introspection result: %v", err)
		}
		doc.Definitions = append(doc.Definitions, def)
	}
	var warnings []string
	s := buildSchema(doc, func(w string) { warnings = append(warnings, w) })
	return s, warnings, nil
}

// definition converts one introspected type.
func definition(t *fullType) (*ast.Definition, error) {
	kinds := map[string]ast.DefinitionKind{
		"SCALAR": ast.Scalar, "OBJECT": ast.Object, "INTERFACE": ast.Interface,
		"UNION": ast.Union, "ENUM": ast.Enum, "INPUT_OBJECT": ast.InputObject,
	}
	kind, ok := kinds[t.Kind]
	if !ok || t.Name == "" {
		return nil, fmt.Errorf("type %q has unknown kind %q", t.Name, t.Kind)
	}
	if err := checkNames(t); err != nil {
		return nil, err
	}
	def := &ast.Definition{Kind: kind, Name: t.Name, Description: t.Description}
	for _, f := range t.Fields {
		typ, err := astType(f.Type, 0)
		if err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", t.Name, f.Name, err)
		}
		fd := &ast.FieldDefinition{Name: f.Name, Description: f.Description, Type: typ}
		if f.IsDeprecated {
			fd.Directives = deprecated(f.DeprecationReason)
		}
		for _, a := range f.Args {
			at, err := astType(a.Type, 0)
			if err != nil {
				return nil, fmt.Errorf("argument %s.%s(%s): %w", t.Name, f.Name, a.Name, err)
			}
			fd.Arguments = append(fd.Arguments, &ast.ArgumentDefinition{
				Name: a.Name, Description: a.Description, Type: at, DefaultValue: defaultValue(a.DefaultValue),
			})
		}
		def.Fields = append(def.Fields, fd)
	}
	for _, a := range t.InputFields {
		at, err := astType(a.Type, 0)
		if err != nil {
			return nil, fmt.Errorf("input field %s.%s: %w", t.Name, a.Name, err)
		}
		def.Fields = append(def.Fields, &ast.FieldDefinition{
			Name: a.Name, Description: a.Description, Type: at, DefaultValue: defaultValue(a.DefaultValue),
		})
	}
	for _, v := range t.EnumValues {
		ev := &ast.EnumValueDefinition{Name: v.Name, Description: v.Description}
		if v.IsDeprecated {
			ev.Directives = deprecated("")
		}
		def.EnumValues = append(def.EnumValues, ev)
	}
	for _, p := range t.PossibleTypes {
		if kind == ast.Union {
			def.Types = append(def.Types, p.Name)
		}
	}
	for _, i := range t.Interfaces {
		def.Interfaces = append(def.Interfaces, i.Name)
	}
	return def, nil
}

// astType converts an introspected type reference.
// nameRE is the GraphQL Name rule; an introspection document is untrusted,
// and an operation id or a generated query built from a bad name would be
// empty or wrong.
var nameRE = regexp.MustCompile(`^[_A-Za-z][_0-9A-Za-z]*$`)

// checkNames refuses a type whose own name, fields, arguments, input fields
// or enum values are not GraphQL names.
func checkNames(t *fullType) error {
	bad := func(what, name string) error {
		return fmt.Errorf("%s %q of type %q is not a GraphQL name", what, truncate(name, 64), truncate(t.Name, 64))
	}
	if !nameRE.MatchString(t.Name) {
		return fmt.Errorf("type name %q is not a GraphQL name", truncate(t.Name, 64))
	}
	for _, f := range t.Fields {
		if !nameRE.MatchString(f.Name) {
			return bad("field", f.Name)
		}
		for _, a := range f.Args {
			if !nameRE.MatchString(a.Name) {
				return bad("argument", a.Name)
			}
		}
	}
	for _, a := range t.InputFields {
		if !nameRE.MatchString(a.Name) {
			return bad("input field", a.Name)
		}
	}
	for _, v := range t.EnumValues {
		if !nameRE.MatchString(v.Name) {
			return bad("enum value", v.Name)
		}
	}
	return nil
}

func astType(r *typeRef, depth int) (*ast.Type, error) {
	if r == nil {
		return nil, errors.New("type reference is missing")
	}
	if depth > maxTypeRefDepth {
		return nil, errors.New("type reference nests too deeply")
	}
	switch r.Kind {
	case "NON_NULL":
		t, err := astType(r.OfType, depth+1)
		if err != nil {
			return nil, err
		}
		if t.NonNull {
			return nil, errors.New("type reference is non-null twice")
		}
		t.NonNull = true
		return t, nil
	case "LIST":
		t, err := astType(r.OfType, depth+1)
		if err != nil {
			return nil, err
		}
		return &ast.Type{Elem: t}, nil
	}
	if r.Name == "" {
		return nil, fmt.Errorf("type reference of kind %q has no name", r.Kind)
	}
	return &ast.Type{NamedType: r.Name}, nil
}

func defaultValue(v *string) *ast.Value {
	if v == nil {
		return nil
	}
	return &ast.Value{Raw: *v, Kind: ast.StringValue}
}

func deprecated(reason string) ast.DirectiveList {
	d := &ast.Directive{Name: "deprecated"}
	if reason != "" {
		d.Arguments = ast.ArgumentList{{Name: "reason", Value: &ast.Value{Raw: reason, Kind: ast.StringValue}}}
	}
	return ast.DirectiveList{d}
}

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
