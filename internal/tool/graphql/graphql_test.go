package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

func importFile(t *testing.T, name string) *tool.Spec {
	t.Helper()
	spec, err := Importer{}.Import(context.Background(), tool.Source{Data: readFile(t, name)})
	if err != nil {
		t.Fatalf("import %s: %v", name, err)
	}
	return spec
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadSchema(t testing.TB, name string) *ast.Schema {
	t.Helper()
	s, err := gqlparser.LoadSchema(&ast.Source{Name: name, Input: string(readFile(t, name))})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return s
}

type opSummary struct {
	ID, Kind, Root, Field string
}

func summarize(spec *tool.Spec) []opSummary {
	var out []opSummary
	for _, op := range spec.Operations {
		out = append(out, opSummary{op.ID, op.Kind, op.GraphQL.Root, op.GraphQL.Field})
	}
	return out
}

func TestImportOperations(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		want     []opSummary
		warnings int
	}{
		{
			name: "renamed roots, extension, shared field, no subscription",
			file: "schema.graphql",
			want: []opSummary{
				{"user", tool.Read, "query", "user"},
				{"users", tool.Read, "query", "users"},
				{"node", tool.Read, "query", "node"},
				{"search", tool.Read, "query", "search"},
				{"count", tool.Read, "query", "count"},
				{"query_ping", tool.Read, "query", "ping"},
				{"roleOf", tool.Read, "query", "roleOf"},
				{"createPost", tool.Write, "mutation", "createPost"},
				{"mutation_ping", tool.Write, "mutation", "ping"},
				{"deleteUser", tool.Write, "mutation", "deleteUser"},
			},
		},
		{
			name: "default root names with extend type Query",
			file: "defaults.graphql",
			want: []opSummary{
				{"hello", tool.Read, "query", "hello"},
				{"time", tool.Read, "query", "time"},
			},
		},
		{
			name: "invalid schema indexed as written",
			file: "duplicate.graphql",
			want: []opSummary{
				{"thing", tool.Read, "query", "thing"},
				{"rename", tool.Write, "mutation", "rename"},
			},
			warnings: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := importFile(t, tc.file)
			if diff := cmp.Diff(tc.want, summarize(spec)); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}
			if len(spec.Warnings) != tc.warnings {
				t.Errorf("warnings = %q, want %d", spec.Warnings, tc.warnings)
			}
		})
	}
}

func TestImportOperationDetail(t *testing.T) {
	spec := importFile(t, "schema.graphql")
	ops := map[string]tool.Operation{}
	for _, op := range spec.Operations {
		ops[op.ID] = op
	}
	tests := []struct {
		id          string
		summary     string
		binding     *tool.GraphQLBinding
		input       string
		outputProps []string
	}{
		{
			id:      "user",
			summary: "Look up a user by id.",
			binding: &tool.GraphQLBinding{
				Root: "query", Field: "user",
				Args:      []tool.Arg{{Name: "id", Type: "ID!", Required: true}},
				Selection: "{ id login name age score admin role friends { id login name age score admin role } best { id title } address { city street } }",
			},
			input:       `{"additionalProperties":false,"properties":{"id":{"type":"string"}},"required":["id"],"type":"object"}`,
			outputProps: []string{"address", "admin", "age", "best", "friends", "id", "login", "name", "role", "score"},
		},
		{
			id: "users",
			binding: &tool.GraphQLBinding{
				Root: "query", Field: "users",
				Args:      []tool.Arg{{Name: "filter", Type: "UserFilter"}, {Name: "ids", Type: "[ID!]"}},
				Selection: "{ id login name age score admin role friends { id login name age score admin role } best { id title } address { city street } }",
			},
			input: `{"additionalProperties":false,"properties":{` +
				`"filter":{"properties":{"nameContains":{"type":"string"},"page":{"properties":{"after":{"type":"string"},"first":{"type":"integer"}},"type":"object"},"role":{"enum":["ADMIN","MEMBER"],"type":"string"}},"type":"object"},` +
				`"ids":{"items":{"type":"string"},"type":"array"}},"type":"object"}`,
		},
		{
			id:      "node",
			binding: &tool.GraphQLBinding{Root: "query", Field: "node", Args: []tool.Arg{{Name: "id", Type: "ID!", Required: true}}, Selection: "{ __typename id }"},
			input:   `{"additionalProperties":false,"properties":{"id":{"type":"string"}},"required":["id"],"type":"object"}`,
		},
		{
			id:      "search",
			binding: &tool.GraphQLBinding{Root: "query", Field: "search", Args: []tool.Arg{{Name: "q", Type: "String!", Required: true}}, Selection: "{ __typename }"},
			input:   `{"additionalProperties":false,"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"}`,
		},
		{
			id:      "count",
			binding: &tool.GraphQLBinding{Root: "query", Field: "count"},
			input:   `{"additionalProperties":false,"properties":{},"type":"object"}`,
		},
		{
			id: "createPost",
			binding: &tool.GraphQLBinding{
				Root: "mutation", Field: "createPost",
				Args:      []tool.Arg{{Name: "input", Type: "NewPost!", Required: true}},
				Selection: "{ id title author { id login name age score admin role } }",
			},
			input: `{"additionalProperties":false,"properties":{"input":{"properties":{"authorId":{"type":"string"},"tags":{"items":{"type":"string"},"type":"array"},"title":{"type":"string"}},"required":["title","authorId"],"type":"object"}},"required":["input"],"type":"object"}`,
		},
		{
			id: "deleteUser",
			binding: &tool.GraphQLBinding{
				Root: "mutation", Field: "deleteUser",
				Args: []tool.Arg{{Name: "id", Type: "ID!", Required: true}, {Name: "hard", Type: "Boolean"}},
			},
			input: `{"additionalProperties":false,"properties":{"hard":{"type":"boolean"},"id":{"type":"string"}},"required":["id"],"type":"object"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			op, ok := ops[tc.id]
			if !ok {
				t.Fatalf("no operation %s", tc.id)
			}
			if op.Summary != tc.summary {
				t.Errorf("summary = %q, want %q", op.Summary, tc.summary)
			}
			if diff := cmp.Diff(tc.binding, op.GraphQL); diff != "" {
				t.Errorf("binding (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.input, string(op.Input)); diff != "" {
				t.Errorf("input schema (-want +got):\n%s", diff)
			}
			if tc.outputProps != nil {
				var out struct {
					Properties map[string]json.RawMessage `json:"properties"`
				}
				if err := json.Unmarshal(op.Output, &out); err != nil {
					t.Fatal(err)
				}
				var got []string
				for k := range out.Properties {
					got = append(got, k)
				}
				if diff := cmp.Diff(tc.outputProps, got, cmpSorted); diff != "" {
					t.Errorf("output properties (-want +got):\n%s", diff)
				}
			}
		})
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

// TestSelectionsValidate builds the query document a caller would send for
// every operation and validates it against the schema.
func TestSelectionsValidate(t *testing.T) {
	for _, file := range []string{"schema.graphql", "defaults.graphql"} {
		schema := loadSchema(t, file)
		for _, op := range importFile(t, file).Operations {
			t.Run(file+"/"+op.ID, func(t *testing.T) {
				doc := document(op.GraphQL)
				if _, errs := gqlparser.LoadQueryWithRules(schema, doc, nil); len(errs) > 0 {
					t.Errorf("document %q does not validate: %v", doc, errs)
				}
			})
		}
	}
}

// document is the operation document for a binding, every argument a variable.
func document(b *tool.GraphQLBinding) string {
	var vars, args []string
	for _, a := range b.Args {
		vars = append(vars, "$"+a.Name+": "+a.Type)
		args = append(args, a.Name+": $"+a.Name)
	}
	doc := b.Root
	if len(vars) > 0 {
		doc += "(" + strings.Join(vars, ", ") + ")"
	}
	doc += " { " + b.Field
	if len(args) > 0 {
		doc += "(" + strings.Join(args, ", ") + ")"
	}
	return doc + " " + b.Selection + " }"
}

func TestImportIntrospection(t *testing.T) {
	for _, file := range []string{"schema.graphql", "defaults.graphql"} {
		t.Run(file, func(t *testing.T) {
			want := importFile(t, file)
			data := introspect(t, loadSchema(t, file), true)
			if !IsIntrospection(data) {
				t.Fatal("IsIntrospection = false for an introspection result")
			}
			got, err := Importer{}.Import(context.Background(), tool.Source{Data: data})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Operations, got.Operations); diff != "" {
				t.Errorf("operations from introspection differ from SDL (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("bare __schema", func(t *testing.T) {
		got, err := Importer{}.Import(context.Background(), tool.Source{Data: introspect(t, loadSchema(t, "schema.graphql"), false)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Operations) != 10 {
			t.Errorf("got %d operations, want 10", len(got.Operations))
		}
	})
}

func TestIsIntrospection(t *testing.T) {
	tests := []struct {
		name string
		data string
		want bool
	}{
		{"wrapped", `{"data":{"__schema":{"types":[]}}}`, true},
		{"bare", `{"__schema":{"types":[]}}`, true},
		{"null schema", `{"data":{"__schema":null}}`, false},
		{"errors only", `{"errors":[{"message":"no"}]}`, false},
		{"SDL", `type Query { a: Int }`, false},
		{"other JSON", `{"openapi":"3.1.0"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsIntrospection([]byte(tc.data)); got != tc.want {
				t.Errorf("IsIntrospection(%s) = %v, want %v", tc.data, got, tc.want)
			}
		})
	}
}

func TestImportInvalid(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		detail string
	}{
		{"malformed SDL", string(readFile(t, "malformed.graphql")), "line 3, column 5"},
		{"HTML", "<html><body>Not found</body></html>", "line 1, column 1"},
		{"no roots", "type Thing { a: Int }", "neither a query nor a mutation"},
		{"only a subscription", "type Subscription { a: Int }", "neither a query nor a mutation"},
		{"empty", "", "neither a query nor a mutation"},
		{"bad JSON", `{"data": `, "not GraphQL SDL nor introspection JSON"},
		{"introspection errors", `{"errors":[{"message":"introspection is disabled"}]}`, "introspection is disabled"},
		{"JSON without schema", `{"openapi":"3.1.0"}`, "without __schema"},
		{"bad type kind", `{"__schema":{"queryType":{"name":"Q"},"types":[{"kind":"WIDGET","name":"Q"}]}}`, `unknown kind "WIDGET"`},
		{"missing type ref", `{"__schema":{"queryType":{"name":"Q"},"types":[{"kind":"OBJECT","name":"Q","fields":[{"name":"a"}]}]}}`, "type reference is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Importer{}.Import(context.Background(), tool.Source{Data: []byte(tc.data)})
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.SpecInvalid {
				t.Fatalf("err = %v, want a %s problem", err, problem.SpecInvalid)
			}
			if !strings.Contains(pe.Detail, tc.detail) {
				t.Errorf("detail %q does not contain %q", pe.Detail, tc.detail)
			}
		})
	}
}
