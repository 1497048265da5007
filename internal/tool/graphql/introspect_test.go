package graphql

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
)

// introspect renders a schema as a server answers the introspection query,
// wrapped in {"data": …} when wrapped is true.
func introspect(t testing.TB, s *ast.Schema, wrapped bool) []byte {
	t.Helper()
	var ref func(*ast.Type) map[string]any
	ref = func(typ *ast.Type) map[string]any {
		var r map[string]any
		if typ.Elem != nil {
			r = map[string]any{"kind": "LIST", "name": nil, "ofType": ref(typ.Elem)}
		} else {
			r = map[string]any{"kind": string(s.Types[typ.NamedType].Kind), "name": typ.NamedType, "ofType": nil}
		}
		if typ.NonNull {
			r = map[string]any{"kind": "NON_NULL", "name": nil, "ofType": r}
		}
		return r
	}
	named := func(name string) map[string]any {
		return map[string]any{"kind": string(s.Types[name].Kind), "name": name, "ofType": nil}
	}
	input := func(name, desc string, typ *ast.Type, def *ast.Value) map[string]any {
		v := map[string]any{"name": name, "description": desc, "type": ref(typ), "defaultValue": nil}
		if def != nil {
			v["defaultValue"] = def.String()
		}
		return v
	}
	names := make([]string, 0, len(s.Types))
	for name := range s.Types {
		names = append(names, name)
	}
	slices.Sort(names)
	var types []map[string]any
	for _, name := range names {
		d := s.Types[name]
		typ := map[string]any{"kind": string(d.Kind), "name": d.Name, "description": d.Description}
		if d.Kind == ast.Object || d.Kind == ast.Interface {
			fields := []map[string]any{}
			for _, f := range d.Fields {
				args := []map[string]any{}
				for _, a := range f.Arguments {
					args = append(args, input(a.Name, a.Description, a.Type, a.DefaultValue))
				}
				dep := f.Directives.ForName("deprecated")
				fields = append(fields, map[string]any{
					"name": f.Name, "description": f.Description, "args": args, "type": ref(f.Type),
					"isDeprecated": dep != nil, "deprecationReason": nil,
				})
			}
			typ["fields"] = fields
			interfaces := []map[string]any{}
			for _, i := range d.Interfaces {
				interfaces = append(interfaces, named(i))
			}
			typ["interfaces"] = interfaces
		}
		if d.Kind == ast.InputObject {
			fields := []map[string]any{}
			for _, f := range d.Fields {
				fields = append(fields, input(f.Name, f.Description, f.Type, f.DefaultValue))
			}
			typ["inputFields"] = fields
		}
		if d.Kind == ast.Enum {
			values := []map[string]any{}
			for _, v := range d.EnumValues {
				values = append(values, map[string]any{"name": v.Name, "description": v.Description, "isDeprecated": false})
			}
			typ["enumValues"] = values
		}
		if d.IsAbstractType() {
			possible := []map[string]any{}
			for _, p := range s.PossibleTypes[d.Name] {
				possible = append(possible, named(p.Name))
			}
			typ["possibleTypes"] = possible
		}
		types = append(types, typ)
	}
	root := func(d *ast.Definition) any {
		if d == nil {
			return nil
		}
		return map[string]any{"name": d.Name}
	}
	schema := map[string]any{
		"queryType": root(s.Query), "mutationType": root(s.Mutation), "subscriptionType": root(s.Subscription),
		"types": types, "directives": []any{},
	}
	var doc any = map[string]any{"__schema": schema}
	if wrapped {
		doc = map[string]any{"data": doc}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
