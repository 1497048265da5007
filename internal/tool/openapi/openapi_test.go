package openapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/tool"
)

// opSummary is what the tables assert of each operation.
type opSummary struct {
	ID, Kind, Method, Path string
	Params                 []string // name:in, with "!" when required
	Body                   string   // content type
	Security               []string
}

func summarize(ops []tool.Operation) []opSummary {
	var out []opSummary
	for _, o := range ops {
		s := opSummary{ID: o.ID, Kind: o.Kind, Method: o.HTTP.Method, Path: o.HTTP.Path, Security: o.HTTP.Security}
		for _, p := range o.HTTP.Params {
			name := p.Name + ":" + p.In
			if p.Required {
				name += "!"
			}
			s.Params = append(s.Params, name)
		}
		if o.HTTP.Body != nil {
			s.Body = o.HTTP.Body.ContentType
		}
		out = append(out, s)
	}
	return out
}

func importFile(t *testing.T, name, url string) *tool.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := New().Import(context.Background(), tool.Source{Data: data, URL: url})
	if err != nil {
		t.Fatalf("Import(%s): %v", name, err)
	}
	return spec
}

func TestImport(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		url       string
		wantOps   []opSummary
		wantBase  string
		wantToken string
	}{
		{
			name: "3.1 yaml: webhooks and callbacks not counted, duplicate id suffixed",
			file: "petstore31.yaml",
			wantOps: []opSummary{
				{ID: "listPets", Kind: "read", Method: "GET", Path: "/pets", Params: []string{"limit:query"}, Security: []string{"oauth"}},
				{ID: "createPet", Kind: "write", Method: "POST", Path: "/pets", Body: "application/json"},
				{ID: "get_pets__petId_", Kind: "read", Method: "GET", Path: "/pets/{petId}", Params: []string{"petId:path!"}, Security: []string{"oauth"}},
				{ID: "deletePet", Kind: "write", Method: "DELETE", Path: "/pets/{petId}", Params: []string{"petId:path!"}, Security: []string{"oauth"}},
				{ID: "head_pets__petId_", Kind: "read", Method: "HEAD", Path: "/pets/{petId}", Params: []string{"petId:path!"}, Security: []string{"oauth"}},
				{ID: "listPets_2", Kind: "write", Method: "PUT", Path: "/pets/{petId}/photo", Params: []string{"petId:path!"}, Body: "image/png", Security: []string{"oauth"}},
			},
			wantBase:  "https://eu.pets.example.com/v2",
			wantToken: "https://auth.pets.example.com/token",
		},
		{
			name: "3.0 json with component refs, relative server",
			file: "shop30.json",
			url:  "https://docs.example.com/specs/shop.json",
			wantOps: []opSummary{
				{ID: "get_customers", Kind: "read", Method: "GET", Path: "/customers", Params: []string{"limit:query"}},
				{ID: "createCustomer", Kind: "write", Method: "POST", Path: "/customers", Body: "application/json"},
				{ID: "get_customers__id_", Kind: "read", Method: "GET", Path: "/customers/{id}", Params: []string{"id:path!", "X-Trace:header"}},
				{ID: "renameCustomer", Kind: "write", Method: "PATCH", Path: "/customers/{id}", Params: []string{"id:path!"}, Body: "application/merge-patch+json"},
			},
			wantBase: "https://docs.example.com/api/v1",
		},
		{
			name: "swagger 2.0 with host, basePath and an application flow",
			file: "swagger20.yaml",
			wantOps: []opSummary{
				{ID: "listOrders", Kind: "read", Method: "GET", Path: "/orders", Params: []string{"status:query"}, Security: []string{"app"}},
				{ID: "createOrder", Kind: "write", Method: "POST", Path: "/orders", Body: "application/json", Security: []string{"key"}},
				{ID: "delete_orders__orderId_", Kind: "write", Method: "DELETE", Path: "/orders/{orderId}", Params: []string{"orderId:path!"}, Security: []string{"app"}},
			},
			wantBase:  "https://legacy.example.com/v1",
			wantToken: "https://legacy.example.com/oauth/token",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := importFile(t, tc.file, tc.url)
			if diff := cmp.Diff(tc.wantOps, summarize(spec.Operations)); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBase, spec.BaseURL); diff != "" {
				t.Errorf("base URL (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantToken, spec.TokenURL); diff != "" {
				t.Errorf("token URL (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImportSchemas checks the input and output schemas of chosen operations.
func TestImportSchemas(t *testing.T) {
	customer := `{"allOf":[
		{"type":"object","required":["email"],"properties":{"email":{"type":"string","format":"email"},"name":{"type":["string","null"]}}},
		{"type":"object","properties":{"id":{"type":"string","pattern":"^cus_"},"referrer":{"description":"Customer: recursive reference, not expanded"}}}]}`
	tests := []struct {
		name, file, op string
		wantInput      string
		wantOutput     string
	}{
		{
			name: "3.1 query param with null type; cookie param skipped; array of a recursive schema",
			file: "petstore31.yaml", op: "listPets",
			wantInput: `{"type":"object","additionalProperties":false,"properties":{
				"limit":{"type":["integer","null"],"maximum":100,"description":"How many pets to return."}}}`,
			wantOutput: `{"type":"array","items":{"allOf":[
				{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"tag":{"type":["string","null"]}}},
				{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"parent":{"description":"Pet: recursive reference, not expanded"}}}]}}`,
		},
		{
			name: "object body: properties at the top level and body for the whole",
			file: "petstore31.yaml", op: "createPet",
			wantInput: `{"type":"object","properties":{
				"body":{"allOf":[{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"tag":{"type":["string","null"]}}}],
					"description":"The whole request body. Its properties may instead be given as top-level arguments."},
				"name":{"type":"string"},
				"tag":{"type":["string","null"]}}}`,
			wantOutput: `{"allOf":[
				{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"tag":{"type":["string","null"]}}},
				{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"parent":{"description":"Pet: recursive reference, not expanded"}}}]}`,
		},
		{
			name: "3.0 referenced parameter: boolean exclusiveMaximum becomes numeric",
			file: "shop30.json", op: "get_customers",
			wantInput: `{"type":"object","additionalProperties":false,"properties":{
				"limit":{"type":"integer","minimum":1,"exclusiveMaximum":100}}}`,
			wantOutput: `{"type":"array","items":` + customer + `}`,
		},
		{
			name: "path-level referenced parameter with description; 200 chosen over default",
			file: "shop30.json", op: "get_customers__id_",
			wantInput: `{"type":"object","additionalProperties":false,"required":["id"],"properties":{
				"id":{"allOf":[{"type":"string","pattern":"^cus_"}],"description":"The customer's id."},
				"X-Trace":{"type":"string"}}}`,
			wantOutput: customer,
		},
		{
			name: "required non-object body is required as body; no output for 204",
			file: "shop30.json", op: "renameCustomer",
			wantInput: `{"type":"object","required":["id","body"],"properties":{
				"id":{"allOf":[{"type":"string","pattern":"^cus_"}],"description":"The customer's id."},
				"body":{"type":"string","minLength":1,"description":"The whole request body."}}}`,
		},
		{
			name: "swagger body parameter becomes the request body",
			file: "swagger20.yaml", op: "createOrder",
			wantInput: `{"type":"object","properties":{
				"body":{"allOf":[{"type":"object","required":["item"],"properties":{"item":{"type":"string"},"quantity":{"type":"integer","minimum":1}}}],
					"description":"The whole request body. Its properties may instead be given as top-level arguments."},
				"item":{"type":"string"},
				"quantity":{"type":"integer","minimum":1}}}`,
			wantOutput: `{"type":"object","required":["item"],"properties":{"item":{"type":"string"},"quantity":{"type":"integer","minimum":1}}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := importFile(t, tc.file, "")
			op := findOp(t, spec, tc.op)
			if diff := cmp.Diff(decode(t, tc.wantInput), decode(t, string(op.Input))); diff != "" {
				t.Errorf("input (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(decode(t, tc.wantOutput), decode(t, string(op.Output))); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func findOp(t *testing.T, spec *tool.Spec, id string) tool.Operation {
	t.Helper()
	for _, o := range spec.Operations {
		if o.ID == id {
			return o
		}
	}
	t.Fatalf("no operation %q", id)
	return tool.Operation{}
}

// decode parses JSON for comparison; "" is nil.
func decode(t *testing.T, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", s, err)
	}
	return v
}
