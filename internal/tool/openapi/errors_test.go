package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

func TestImportInvalid(t *testing.T) {
	tests := []struct {
		name       string
		doc        string
		wantDetail string
	}{
		{"empty", "  \n", "the document is empty"},
		{"bad yaml", "openapi: 3.0.0\ninfo:\n  title: x\n   version: 1\n", "invalid YAML: line 4: mapping values are not allowed in this context"},
		{"bad json", "{\n  \"openapi\": \"3.0.0\",\n  \"paths\": {]\n}", "invalid JSON: line 3, column 13: invalid character ']' looking for beginning of object key string"},
		{"truncated json", `{"openapi": "3.0.0", "paths": {`, "invalid JSON: line 1, column 32: unexpected end of the document"},
		{"trailing json", `{"openapi": "3.0.0"} {}`, "invalid JSON: line 1, column 22: unexpected data after the top-level value"},
		{"top level array", `["openapi"]`, "not an OpenAPI document: the top level is an array, not an object"},
		{"yaml scalar", "just text", "not an OpenAPI document: the top level is a string, not an object"},
		{"missing openapi", `{"info": {"title": "x"}, "paths": {}}`, `not an OpenAPI document: no "openapi" or "swagger" field at the top level`},
		{"openapi 4.0", "openapi: \"4.0\"\npaths: {}\n", `openapi: unsupported version "4.0" (supported: 2.0, 3.0.x, 3.1.x)`},
		{"openapi as a number", "openapi: 3.1\npaths: {}\n", `openapi: must be a string such as "3.1.0", got a number`},
		{"swagger 1.2", `{"swagger": "1.2"}`, `swagger: unsupported version "1.2" (supported: "2.0")`},
		{"paths an array", "openapi: 3.0.3\npaths:\n  - /pets\n", "paths: must be an object, got an array"},
		{"swagger paths a string", `{"swagger": "2.0", "paths": "/pets"}`, "paths: must be an object, got a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := New().Import(context.Background(), tool.Source{Data: []byte(tc.doc)})
			if err == nil {
				t.Fatalf("Import() = %d operations, want an error", len(spec.Operations))
			}
			var pe *problem.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *problem.Error", err)
			}
			if diff := cmp.Diff(problem.SpecInvalid, pe.Code); diff != "" {
				t.Errorf("code (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDetail, pe.Detail); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want bool
	}{
		{"json openapi last", `{"info": {"openapi": "no"}, "openapi": "3.1.0"}`, true},
		{"json swagger", `  {"swagger": "2.0"}`, true},
		{"json nested only", `{"info": {"openapi": "3.1.0"}}`, false},
		{"yaml", "# spec\nopenapi: 3.0.0\n", true},
		{"yaml quoted key", "\"swagger\": \"2.0\"\n", true},
		{"yaml nested only", "info:\n  openapi: 3.0.0\n", false},
		{"graphql sdl", "type Query { openapi: String }", false},
		{"wsdl", `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/"/>`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect([]byte(tc.doc)); got != tc.want {
				t.Errorf("Detect() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestImportNeverFetches: remote, file and unresolvable references become
// stubs with warnings, and the server they name is never called.
func TestImportNeverFetches(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"type": "string"}`)
	}))
	defer srv.Close()
	doc := fmt.Sprintf(`{
		"openapi": "3.0.3",
		"paths": {"/x": {"post": {
			"parameters": [{"$ref": "%[1]s/param.json"}],
			"requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {
				"remote": {"$ref": "%[1]s/schema.json"},
				"file": {"$ref": "/etc/passwd"},
				"missing": {"$ref": "#/components/schemas/Missing"}}}}}},
			"responses": {"200": {"$ref": "%[1]s/response.json"}}
		}}}}`, srv.URL)
	spec, err := New().Import(context.Background(), tool.Source{Data: []byte(doc), URL: srv.URL + "/spec.json"})
	if err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the importer made %d requests, want none", n)
	}
	op := findOp(t, spec, "post_x")
	wantInput := `{"type":"object","properties":{
		"body":{"type":"object","description":"The whole request body. Its properties may instead be given as top-level arguments.","properties":{
			"remote":{"description":"schema.json: remote reference, not followed"},
			"file":{"description":"passwd: remote reference, not followed"},
			"missing":{"description":"Missing: unresolved reference"}}},
		"file":{"description":"passwd: remote reference, not followed"},
		"missing":{"description":"Missing: unresolved reference"},
		"remote":{"description":"schema.json: remote reference, not followed"}}}`
	if diff := cmp.Diff(decode(t, wantInput), decode(t, string(op.Input))); diff != "" {
		t.Errorf("input (-want +got):\n%s", diff)
	}
	want := []string{
		"paths./x.post.parameters[0]: no name or an unresolvable $ref; ignored",
		`unresolved reference "#/components/schemas/Missing"`,
	}
	var got []string
	for _, w := range spec.Warnings {
		if !strings.HasPrefix(w, "validation:") {
			got = append(got, w)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestValidation: kin-openapi's findings are warnings, and validation is
// skipped above ValidateMaxBytes.
func TestValidation(t *testing.T) {
	// "in: path" parameter missing from the path template is a defect.
	doc := []byte(`openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /items:
    get:
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "200": {description: ok}
`)
	tests := []struct {
		name     string
		maxBytes int
		want     bool
	}{
		{"validated", DefaultValidateMaxBytes, true},
		{"over the limit", len(doc) - 1, false},
		{"disabled", -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			im := New()
			im.ValidateMaxBytes = tc.maxBytes
			spec, err := im.Import(context.Background(), tool.Source{Data: doc})
			if err != nil {
				t.Fatal(err)
			}
			got := false
			for _, w := range spec.Warnings {
				got = got || strings.HasPrefix(w, "validation:")
			}
			if got != tc.want {
				t.Errorf("validation warnings present = %v, want %v (warnings %q)", got, tc.want, spec.Warnings)
			}
			if len(spec.Operations) != 1 {
				t.Errorf("got %d operations, want 1", len(spec.Operations))
			}
		})
	}
}

// TestSchemaBounds: reference depth and size are bounded, cycles cut.
func TestSchemaBounds(t *testing.T) {
	// A chain S0 → S1 → … → S11, each with a "next" property.
	var schemas []string
	for i := range 12 {
		schemas = append(schemas, fmt.Sprintf(`"S%d": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/S%d"}}}`, i, i+1))
	}
	schemas = append(schemas, `"S12": {"type": "string"}`)
	// Wide: W0 has 40 properties all W1, W1 40 properties all W2, … .
	for i := range 6 {
		props := make([]string, 40)
		for j := range props {
			props[j] = fmt.Sprintf(`"p%02d": {"$ref": "#/components/schemas/W%d"}`, j, i+1)
		}
		schemas = append(schemas, fmt.Sprintf(`"W%d": {"type": "object", "properties": {%s}}`, i, strings.Join(props, ",")))
	}
	schemas = append(schemas, `"W6": {"type": "integer"}`)
	doc := `{"openapi": "3.0.3", "paths": {
		"/chain": {"get": {"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}}}}},
		"/wide": {"get": {"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/W0"}}}}}}}
	}, "components": {"schemas": {` + strings.Join(schemas, ",") + `}}}`

	im := New()
	im.MaxRefDepth = 3
	im.MaxSchemaBytes = 64 << 10
	spec, err := im.Import(context.Background(), tool.Source{Data: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	chain := findOp(t, spec, "get_chain")
	wantChain := `{"type":"object","properties":{"next":{"type":"object","properties":{"next":{"type":"object","properties":{
		"next":{"type":"object","description":"S3: not expanded (depth limit)"}}}}}}}`
	if diff := cmp.Diff(decode(t, wantChain), decode(t, string(chain.Output))); diff != "" {
		t.Errorf("chain output (-want +got):\n%s", diff)
	}
	// 40³ leaves at depth 3 would be ~1 MB: it must be rendered shallower.
	wide := findOp(t, spec, "get_wide")
	if n := len(wide.Output); n > im.MaxSchemaBytes || n < 1000 {
		t.Errorf("wide output is %d bytes, want 1000 to %d", n, im.MaxSchemaBytes)
	}
}

// TestDenseCycles: in a graph where every schema refers to every other,
// each (reference, depth) is rendered once, not once per path to it.
func TestDenseCycles(t *testing.T) {
	const k = 12
	schemas := make(map[string]any)
	for i := range k {
		props := make(map[string]any)
		for j := range k {
			props[fmt.Sprintf("p%d", j)] = map[string]any{"$ref": fmt.Sprintf("#/components/schemas/S%d", j)}
		}
		schemas[fmt.Sprintf("S%d", i)] = map[string]any{"type": "object", "properties": props}
	}
	root := map[string]any{"components": map[string]any{"schemas": schemas}}
	var warned []string
	r := newRenderer(root, false, DefaultMaxRefDepth, DefaultMaxSchemaBytes, 1<<30, func(f string, a ...any) {
		warned = append(warned, fmt.Sprintf(f, a...))
	})
	out := r.render(map[string]any{"$ref": "#/components/schemas/S0"})
	if !json.Valid(out) || len(out) > DefaultMaxSchemaBytes {
		t.Errorf("output: %d bytes, valid %v", len(out), json.Valid(out))
	}
	if n, most := len(r.memo), k*DefaultMaxRefDepth; n > most {
		t.Errorf("%d expansions memoized, want at most %d", n, most)
	}
	if len(warned) > 0 {
		t.Errorf("warnings %q", warned)
	}
}
