package call

import (
	"context"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// keys is one tenant's redaction key.
type keys struct{}

func (keys) RedactionKey(context.Context, string, []byte) ([]byte, error) {
	return []byte("0123456789abcdef0123456789abcdef"), nil
}

// TestEveryBindingSaysWhereItsArgumentsWent builds a request of each
// binding with a three-character value a field pointer names, and masks
// the record by the places it carries: the value is gone from the record,
// what the pointer does not name stays, and the request sent still holds
// the value.
func TestEveryBindingSaysWhereItsArgumentsWent(t *testing.T) {
	ex := newExecutor(t, Options{})
	fields := []string{"/arguments/cvv", "/arguments/card/cvv"}
	for _, tc := range []struct {
		name string
		op   *tool.Operation
		args map[string]any
	}{
		{"openapi path", &tool.Operation{ID: "o", HTTP: &tool.HTTPBinding{Method: "GET", Path: "/cards/{cvv}.json",
			Params: []tool.Param{{Name: "cvv", In: "path"}, {Name: "keep", In: "query"}}}}, map[string]any{"cvv": "a/9", "keep": "k-1"}},
		{"openapi form", &tool.Operation{ID: "o", HTTP: &tool.HTTPBinding{Method: "POST", Path: "/pay",
			Body: &tool.Body{ContentType: "application/x-www-form-urlencoded"}}}, map[string]any{"cvv": "a/9", "keep": "k-1"}},
		{"openapi text body", &tool.Operation{ID: "o", HTTP: &tool.HTTPBinding{Method: "POST", Path: "/pay",
			Body: &tool.Body{ContentType: "text/plain"}}}, map[string]any{"body": "a/9"}},
		{"graphql", &tool.Operation{ID: "o", GraphQL: &tool.GraphQLBinding{Field: "pay",
			Args: []tool.Arg{{Name: "cvv", Type: "String"}, {Name: "keep", Type: "String"}}}}, map[string]any{"cvv": "a/9", "keep": "k-1"}},
		{"soap", &tool.Operation{ID: "o", SOAP: &tool.SOAPBinding{Element: "Pay",
			Parts: []tool.Part{{Name: "card"}, {Name: "keep"}}}}, map[string]any{"card": map[string]any{"cvv": "a<9", "holder": "ann"}, "keep": "k-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value := "a/9"
			if tc.op.SOAP != nil {
				value = "a&lt;9"
			}
			tl := &tool.Tool{ID: "tool_1", Name: "pay", BaseURL: "https://api.test/v1", Redact: &redact.Config{Fields: fields}}
			if tc.op.HTTP != nil && tc.op.HTTP.Body != nil && tc.op.HTTP.Body.ContentType == "text/plain" {
				tl.Redact.Fields = []string{"/arguments/body"}
			}
			p, err := ex.prepare(tool.CallRequest{Tool: tl, Operation: tc.op, Args: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			sent := p.url.String() + string(p.body)
			if !strings.Contains(sent, value) && !strings.Contains(sent, "a%2F9") {
				t.Fatalf("the request sent %s, without the value", sent)
			}
			m, err := (&redact.Service{Keys: keys{}}).Masker(t.Context(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			rec := p.record(tl.Auth)
			req := redact.Request{URL: rec.URL, Header: rec.Header, Body: rec.Body}
			m.Placed(&req, rec.Places, tl.Redact.Fields, tc.args)
			stored := req.URL + string(req.Body)
			for _, v := range []string{value, "a%2F9", "a/9"} {
				if strings.Contains(stored, v) {
					t.Errorf("the record holds %q: %s", v, stored)
				}
			}
			if !strings.Contains(stored, "redacted") || tc.args["keep"] != nil && !strings.Contains(stored, "k-1") {
				t.Errorf("the record %s: want the value masked, k-1 kept", stored)
			}
		})
	}
}
