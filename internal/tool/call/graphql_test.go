package call

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

const githubSDL = `
type Query {
  repository(owner: String!, name: String!, followRenames: Boolean): Repository
  viewer: User!
}
type Mutation { addStar(starrableId: ID!): Repository }
type Repository { id: ID! name: String! stargazerCount: Int! owner: User! }
type User { login: String! }
`

// graphqlServer validates each query and its variables against githubSDL
// with gqlparser, then answers like a small GitHub.
func graphqlServer(t *testing.T) *recorder {
	t.Helper()
	schema := gqlparser.MustLoadSchema(&ast.Source{Name: "schema.graphql", Input: githubSDL})
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		w.Header().Set("Content-Type", "application/graphql-response+json")
		var req struct {
			Query     string         `json:"query"`
			Variables map[string]any `json:"variables"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		doc, errs := gqlparser.LoadQueryWithRules(schema, req.Query, nil)
		if len(errs) > 0 {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": errs})
			return
		}
		op := doc.Operations[0]
		vars, gerr := validator.VariableValues(schema, op, req.Variables)
		if gerr != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{gerr}})
			return
		}
		field := op.SelectionSet[0].(*ast.Field).Name
		switch {
		case field == "viewer":
			_, _ = w.Write([]byte(`{"data":{"viewer":{"login":"octocat"}}}`))
		case field == "repository" && vars["name"] == "missing":
			_, _ = w.Write([]byte(`{"data":{"repository":null},"errors":[{"message":"Could not resolve to a Repository with the name 'missing'.","path":["repository"]}]}`))
		case field == "repository":
			_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"repository": map[string]any{
				"id": "R_1", "name": vars["name"], "stargazerCount": 42, "owner": map[string]any{"login": vars["owner"]},
			}}})
		case field == "addStar":
			_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"addStar": map[string]any{"id": vars["starrableId"]}}})
		}
	})
}

func TestCallGraphQL(t *testing.T) {
	api := graphqlServer(t)
	gh := &tool.Tool{ID: "tool_gh", Name: "github", Type: tool.GraphQL, BaseURL: api.URL + "/graphql"}
	repository := &tool.Operation{ID: "repository", Kind: tool.Read, GraphQL: &tool.GraphQLBinding{
		Root: "query", Field: "repository",
		Args: []tool.Arg{
			{Name: "owner", Type: "String!", Required: true},
			{Name: "name", Type: "String!", Required: true},
			{Name: "followRenames", Type: "Boolean"},
		},
		Selection: "{ id name stargazerCount owner { login } }",
	}}
	viewer := &tool.Operation{ID: "viewer", Kind: tool.Read, GraphQL: &tool.GraphQLBinding{Root: "query", Field: "viewer", Selection: "{ login }"}}
	addStar := &tool.Operation{ID: "addStar", Kind: tool.Write, GraphQL: &tool.GraphQLBinding{
		Root: "mutation", Field: "addStar", Args: []tool.Arg{{Name: "starrableId", Type: "ID!", Required: true}}, Selection: "{ id }",
	}}
	tests := []struct {
		name      string
		op        *tool.Operation
		args      map[string]any
		wantQuery string
		want      outcome
		wantBody  string
	}{
		{
			name: "query with arguments", op: repository, args: map[string]any{"owner": "octocat", "name": "hello-world"},
			wantQuery: "query ($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id name stargazerCount owner { login } } }",
			wantBody:  `{"id":"R_1","name":"hello-world","owner":{"login":"octocat"},"stargazerCount":42}`,
		},
		{
			name: "query without arguments", op: viewer, args: nil,
			wantQuery: "query { viewer { login } }",
			wantBody:  `{"login":"octocat"}`,
		},
		{
			name: "mutation", op: addStar, args: map[string]any{"starrableId": "R_1"},
			wantQuery: "mutation ($starrableId: ID!) { addStar(starrableId: $starrableId) { id } }",
			wantBody:  `{"id":"R_1"}`,
		},
		{
			name: "errors without data", op: repository, args: map[string]any{"owner": "octocat", "name": "missing", "followRenames": true},
			wantQuery: "query ($owner: String!, $name: String!, $followRenames: Boolean) { repository(owner: $owner, name: $name, followRenames: $followRenames) { id name stargazerCount owner { login } } }",
			want:      outcome{Status: 200, Msg: "graphql: Could not resolve to a Repository with the name 'missing'."},
			wantBody:  `{"data":{"repository":null},"errors":[{"message":"Could not resolve to a Repository with the name 'missing'.","path":["repository"]}]}`,
		},
	}
	ex := newExecutor(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(api.requests())
			res, err := ex.Call(context.Background(), tool.CallRequest{Tool: gh, Operation: tc.op, Args: tc.args})
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			reqs := api.requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("server got %d requests", len(reqs))
			}
			var sent struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal([]byte(reqs[0].Body), &sent); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantQuery, sent.Query); diff != "" {
				t.Errorf("query (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(jsonValue(t, []byte(tc.wantBody)), jsonValue(t, res.Body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if res.Request.Method != http.MethodPost || res.Request.URL != gh.BaseURL {
				t.Errorf("recorded %s %s", res.Request.Method, res.Request.URL)
			}
		})
	}

	t.Run("argument errors", func(t *testing.T) {
		_, err := ex.Call(context.Background(), tool.CallRequest{Tool: gh, Operation: repository, Args: map[string]any{"owner": "o", "first": 3.0}})
		want := outcome{Code: problem.ValidationFailed, Msg: "2 fields are invalid", Fields: []problem.FieldError{
			{Field: "name", Message: "is required (argument of type String!)"},
			{Field: "first", Message: "is not an argument of operation repository"},
		}}
		if diff := cmp.Diff(want, outcomeOf(err)); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
}

// TestCallGraphQLBindingNames checks that a binding whose names would not
// read back as the same GraphQL tokens fails before a request is sent.
func TestCallGraphQLBindingNames(t *testing.T) {
	api := graphqlServer(t)
	gh := &tool.Tool{ID: "tool_gh", Name: "github", Type: tool.GraphQL, BaseURL: api.URL + "/graphql"}
	ex := newExecutor(t, Options{})
	tests := []struct {
		name string
		bind *tool.GraphQLBinding
	}{
		{"field", &tool.GraphQLBinding{Field: "viewer { login } } mutation { addStar(starrableId: \"R_1\")", Selection: "{ id }"}},
		{"argument", &tool.GraphQLBinding{Field: "repository", Args: []tool.Arg{{Name: "owner: $owner) { id } x(", Type: "String!"}}}},
		{"type", &tool.GraphQLBinding{Field: "repository", Args: []tool.Arg{{Name: "owner", Type: "String!) { id } #"}}}},
		{"empty list type", &tool.GraphQLBinding{Field: "repository", Args: []tool.Arg{{Name: "owner", Type: "[]"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := &tool.Operation{ID: "op", Kind: tool.Read, GraphQL: tc.bind}
			args := map[string]any{}
			for _, a := range tc.bind.Args {
				args[a.Name] = "x"
			}
			_, err := ex.Call(context.Background(), tool.CallRequest{Tool: gh, Operation: op, Args: args})
			if err == nil || !strings.Contains(err.Error(), "is not a GraphQL name") {
				t.Errorf("error %v, want one about the name", err)
			}
			if n := len(api.requests()); n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		})
	}
	if !isGraphQLType("[[ID!]]!") || !isGraphQLName("_a1") || isGraphQLName("1a") {
		t.Error("valid names and types are refused")
	}
}
