package call

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// prepareGraphQL builds the POST of a GraphQL root field: every argument
// becomes a variable of the same name.
func prepareGraphQL(t *tool.Tool, op *tool.Operation, args map[string]any) (*prepared, error) {
	b := op.GraphQL
	u, err := baseURL(t, t.BaseURL)
	if err != nil {
		return nil, err
	}
	if !isGraphQLName(b.Field) {
		return nil, fmt.Errorf("operation %s of tool %s: GraphQL field %q is not a GraphQL name", op.ID, t.ID, b.Field)
	}
	for _, a := range b.Args {
		if !isGraphQLName(a.Name) || !isGraphQLType(a.Type) {
			return nil, fmt.Errorf("operation %s of tool %s: GraphQL argument %q of type %q is not a GraphQL name and type", op.ID, t.ID, a.Name, a.Type)
		}
	}
	var errs argErrors
	used := map[string]bool{}
	vars := map[string]any{}
	var decls, passes []string
	var places []redact.Place
	for _, a := range b.Args {
		used[a.Name] = true
		v, ok := present(args, a.Name)
		if !ok {
			if a.Required {
				errs.missing(a.Name, "argument of type "+a.Type)
			}
			continue
		}
		vars[a.Name] = v
		places = append(places, redact.Place{Arg: arg(a.Name), In: redact.InBody, Name: "/variables" + arg(a.Name)})
		decls = append(decls, "$"+a.Name+": "+a.Type)
		passes = append(passes, a.Name+": $"+a.Name)
	}
	errs.unknown(args, used, op.ID)
	if err := errs.err(); err != nil {
		return nil, err
	}

	var q strings.Builder
	root := b.Root
	if root == "" {
		root = "query"
	}
	q.WriteString(root)
	if len(decls) > 0 {
		q.WriteString(" (" + strings.Join(decls, ", ") + ")")
	}
	q.WriteString(" { " + b.Field)
	if len(passes) > 0 {
		q.WriteString("(" + strings.Join(passes, ", ") + ")")
	}
	if sel := strings.TrimSpace(b.Selection); sel != "" {
		q.WriteString(" " + sel)
	}
	q.WriteString(" }")

	body, err := json.Marshal(struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}{q.String(), vars})
	if err != nil {
		return nil, problem.Field("args", "cannot be encoded as JSON")
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/graphql-response+json, application/json")
	return &prepared{
		method:     http.MethodPost,
		url:        u,
		header:     header,
		body:       body,
		recordBody: body,
		read:       readGraphQL(b.Field),
		places:     places,
	}, nil
}

// isGraphQLName reports whether s is a GraphQL Name, /[_A-Za-z][_0-9A-Za-z]*/,
// so it can be written into a query as is.
func isGraphQLName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// isGraphQLType reports whether s is a GraphQL type reference: a Name,
// wrapped in any number of lists, each part optionally non-null ("[ID!]!").
func isGraphQLType(s string) bool {
	s = strings.TrimSuffix(s, "!")
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return isGraphQLType(s[1 : len(s)-1])
	}
	return isGraphQLName(s)
}

// maxGraphQLErrors bounds how many GraphQL error messages a call reports.
const maxGraphQLErrors = 3

// readGraphQL reads a GraphQL answer: the value of data.<field>, and the
// errors' messages when the field has no data.
func readGraphQL(field string) func(string, []byte) (json.RawMessage, string) {
	return func(_ string, body []byte) (json.RawMessage, string) {
		var r struct {
			Data   map[string]json.RawMessage `json:"data"`
			Errors []struct {
				Message string `json:"message"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(body, &r); err != nil || (r.Data == nil && r.Errors == nil) {
			return jsonBody(body), "the answer is not a GraphQL response"
		}
		v, ok := r.Data[field]
		if ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return jsonBody(v), ""
		}
		if len(r.Errors) == 0 {
			if !ok {
				return json.RawMessage("null"), "the GraphQL response has no data for " + field
			}
			return json.RawMessage("null"), ""
		}
		var msgs []string
		for i, e := range r.Errors {
			if i == maxGraphQLErrors {
				msgs = append(msgs, "…")
				break
			}
			msgs = append(msgs, e.Message)
		}
		return jsonBody(body), "graphql: " + strings.Join(msgs, "; ")
	}
}
