package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
)

// toolJSON is a tool as the API answers it.
type toolJSON struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	Type          string `json:"type"`
	Operations    int    `json:"operations"`
	IndexedAt     string `json:"indexed_at"`
	ScopeRequired string `json:"scope_required"`
	SpecURL       string `json:"spec_url"`
	EndpointURL   string `json:"endpoint_url"`
	BaseURL       string `json:"base_url"`
	Auth          struct {
		Type       string `json:"type"`
		SecretsRef string `json:"secrets_ref"`
	} `json:"auth"`
	PolicyClass        string   `json:"policy_class"`
	SideEffects        []string `json:"side_effects"`
	IdempotencySupport bool     `json:"idempotency_support"`
	SpecSHA256         string   `json:"spec_sha256"`
	Revision           int      `json:"revision"`
	CreatedAt          string   `json:"created_at"`
	UpdatedAt          string   `json:"updated_at"`
	OperationList      []opJSON `json:"operation_list"`
}

type opJSON struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Summary string `json:"summary,omitempty"`
}

// opsPage is the answer of GET /v1/tools/{id}/operations.
type opsPage struct {
	ToolID     string `json:"tool_id"`
	Operations []struct {
		ID          string          `json:"id"`
		Kind        string          `json:"kind"`
		Summary     string          `json:"summary"`
		Description string          `json:"description"`
		Input       json.RawMessage `json:"input_schema"`
		Score       *float64        `json:"score"`
	} `json:"operations"`
	NextCursor *string `json:"next_cursor"`
}

func (p opsPage) ids() []string {
	ids := []string{}
	for _, op := range p.Operations {
		ids = append(ids, op.ID)
	}
	return ids
}

var toolIDRE = regexp.MustCompile(`^tool_[0-9A-HJKMNP-TV-Z]{26}$`)

// testdata reads a document of testdata/.
func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// specServer serves specification documents on loopback by path; a document
// can be replaced while it runs, and its GETs are counted.
type specServer struct {
	*httptest.Server
	mu   sync.Mutex
	docs map[string][]byte
	gets atomic.Int64
}

// newSpecServer serves each named testdata file at /<name>.
func newSpecServer(t testing.TB, files ...string) *specServer {
	t.Helper()
	s := &specServer{docs: map[string][]byte{}}
	for _, f := range files {
		s.docs["/"+f] = testdata(t, f)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.gets.Add(1)
		s.mu.Lock()
		doc, ok := s.docs[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *specServer) set(path string, doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[path] = doc
}

// introspectionServer is a GraphQL endpoint: GET answers getStatus with
// getBody (a 405, an HTML page), POST of the introspection query answers
// the introspection JSON of testdata/accounts.introspection.json.
func introspectionServer(t testing.TB, getStatus int, getBody string) *httptest.Server {
	t.Helper()
	result := testdata(t, "accounts.introspection.json")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(getStatus)
			io.WriteString(w, getBody)
			return
		}
		var req struct {
			Query string `json:"query"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.Contains(req.Query, "__schema") {
			http.Error(w, `{"errors":[{"message":"not an introspection query"}]}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(result)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// register POSTs a registration and decodes a 201 answer.
func (h *harness) register(token string, body any, headers ...string) (toolJSON, response) {
	h.t.Helper()
	r := h.do("POST", "/v1/tools", token, body, headers...)
	var tl toolJSON
	if r.Status == http.StatusCreated {
		r.json(h.t, &tl)
	}
	return tl, r
}

// mustRegister registers a tool and fails the test unless it is created.
func (h *harness) mustRegister(token string, body any) toolJSON {
	h.t.Helper()
	tl, r := h.register(token, body)
	if r.Status != http.StatusCreated {
		h.t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	return tl
}

// inlineTool is the registration of name with an inline OpenAPI document.
func inlineTool(t testing.TB, name string) map[string]any {
	return map[string]any{"name": name, "type": "openapi", "spec": string(testdata(t, "petstore31.yaml"))}
}

func TestToolRegisterEachKind(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	files := newSpecServer(t, "petstore31.yaml", "shop30.json", "users-swagger20.yaml", "library.graphql", "quotes.wsdl")
	gqlPage := introspectionServer(t, http.StatusOK, "<!DOCTYPE html><html><body>GraphiQL</body></html>")
	gql405 := introspectionServer(t, http.StatusMethodNotAllowed, "<html>405 Method Not Allowed</html>")
	petstore := testdata(t, "petstore31.yaml")
	introspection := testdata(t, "accounts.introspection.json")

	for _, tc := range []struct {
		name string
		body map[string]any
		// want holds the fields a registration must answer, id and times aside.
		want toolJSON
		ops  []opJSON
	}{{
		name: "openapi 3.1 yaml, webhooks and callbacks not counted",
		body: map[string]any{"name": "pets", "type": "openapi", "spec_url": files.URL + "/petstore31.yaml"},
		want: toolJSON{Name: "pets", Type: "openapi", Operations: 4, SpecURL: files.URL + "/petstore31.yaml",
			BaseURL: "https://pets.example.com/v1", SpecSHA256: sha256Hex(petstore)},
		ops: []opJSON{{"createPet", "write", "Create a pet"}, {"delete_pets__petId_", "write", "Remove a pet"},
			{"listPets", "read", "List all pets"}, {"showPetById", "read", "Info for a specific pet"}},
	}, {
		name: "openapi 3.0 json with refs",
		body: map[string]any{"name": "shop", "type": "openapi", "spec_url": files.URL + "/shop30.json",
			"side_effects": []string{"create", "external"}, "policy_class": "payments"},
		want: toolJSON{Name: "shop", Type: "openapi", Operations: 4, SpecURL: files.URL + "/shop30.json",
			BaseURL: "https://shop.example.com/api", SpecSHA256: sha256Hex(testdata(t, "shop30.json")),
			PolicyClass: "payments", SideEffects: []string{"create", "external"}},
		ops: []opJSON{{"createCustomer", "write", "Create a customer"}, {"getCustomer", "read", "Get one customer"},
			{"get_customers", "read", "List customers"}, {"listOrders", "read", "List orders"}},
	}, {
		name: "swagger 2.0",
		body: map[string]any{"name": "users", "type": "openapi", "spec_url": files.URL + "/users-swagger20.yaml",
			"idempotency_support": true, "side_effects": []string{"create", "update", "delete"},
			"auth": map[string]any{"type": "bearer", "secrets_ref": "env://TOOL_USERS_TOKEN"}},
		want: toolJSON{Name: "users", Type: "openapi", Operations: 5, SpecURL: files.URL + "/users-swagger20.yaml",
			BaseURL: "https://users.example.com/v2", SpecSHA256: sha256Hex(testdata(t, "users-swagger20.yaml")),
			IdempotencySupport: true, SideEffects: []string{"create", "update", "delete"}},
		ops: []opJSON{{"createUser", "write", "Create a user"}, {"deleteUser", "write", ""}, {"getUser", "read", ""},
			{"listUsers", "read", "List users"}, {"updateUser", "write", ""}},
	}, {
		name: "graphql sdl, subscription not counted, shared field prefixed",
		body: map[string]any{"name": "library", "type": "graphql", "spec_url": files.URL + "/library.graphql",
			"endpoint_url": "https://library.example.com/graphql"},
		want: toolJSON{Name: "library", Type: "graphql", Operations: 5, SpecURL: files.URL + "/library.graphql",
			EndpointURL: "https://library.example.com/graphql", BaseURL: "https://library.example.com/graphql",
			SpecSHA256: sha256Hex(testdata(t, "library.graphql"))},
		ops: []opJSON{{"addBook", "write", ""}, {"author", "read", ""}, {"books", "read", ""},
			{"mutation_book", "write", "Rename a book."}, {"query_book", "read", "Look a book up by id."}},
	}, {
		name: "graphql endpoint answering GET with 405",
		body: map[string]any{"name": "accounts", "type": "graphql", "spec_url": gql405.URL + "/graphql"},
		want: toolJSON{Name: "accounts", Type: "graphql", Operations: 3, SpecURL: gql405.URL + "/graphql",
			BaseURL: gql405.URL + "/graphql", SpecSHA256: sha256Hex(introspection)},
		ops: []opJSON{{"ping", "read", "Liveness check."}, {"renameUser", "write", "Give a user a new name."},
			{"user", "read", "Look a user up."}},
	}, {
		name: "graphql endpoint answering GET with an html page",
		body: map[string]any{"name": "accounts-html", "type": "graphql", "spec_url": gqlPage.URL},
		want: toolJSON{Name: "accounts-html", Type: "graphql", Operations: 3, SpecURL: gqlPage.URL,
			BaseURL: gqlPage.URL, SpecSHA256: sha256Hex(introspection)},
		ops: []opJSON{{"ping", "read", "Liveness check."}, {"renameUser", "write", "Give a user a new name."},
			{"user", "read", "Look a user up."}},
	}, {
		name: "wsdl with soap 1.1 and 1.2 bindings",
		body: map[string]any{"name": "quotes", "type": "soap", "spec_url": files.URL + "/quotes.wsdl"},
		want: toolJSON{Name: "quotes", Type: "soap", Operations: 2, SpecURL: files.URL + "/quotes.wsdl",
			BaseURL: files.URL + "/quotes/soap11", SpecSHA256: sha256Hex(testdata(t, "quotes.wsdl"))},
		ops: []opJSON{{"GetQuote", "read", "Returns the latest price of a symbol."},
			{"SetAlert", "write", "Alerts when a price goes above a level."}},
	}, {
		name: "inline spec",
		body: map[string]any{"name": "pets_inline", "type": "openapi", "spec": string(petstore)},
		want: toolJSON{Name: "pets_inline", Type: "openapi", Operations: 4,
			BaseURL: "https://pets.example.com/v1", SpecSHA256: sha256Hex(petstore)},
		ops: []opJSON{{"createPet", "write", "Create a pet"}, {"delete_pets__petId_", "write", "Remove a pet"},
			{"listPets", "read", "List all pets"}, {"showPetById", "read", "Info for a specific pet"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().UTC().Add(-time.Second)
			got, r := h.register(tok, tc.body)
			if r.Status != http.StatusCreated {
				t.Fatalf("status %d, want 201: %s", r.Status, r.Body)
			}
			if loc := r.Header.Get("Location"); loc != "/v1/tools/"+got.ID {
				t.Errorf("Location %q, want /v1/tools/%s", loc, got.ID)
			}
			if !toolIDRE.MatchString(got.ID) {
				t.Errorf("id %q does not match %s", got.ID, toolIDRE)
			}
			at, err := time.Parse(time.RFC3339Nano, got.IndexedAt)
			if err != nil || !strings.HasSuffix(got.IndexedAt, "Z") || at.Before(before) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("indexed_at %q: not a current ISO 8601 UTC time ending in Z (%v)", got.IndexedAt, err)
			}
			want := tc.want
			want.ID, want.IndexedAt, want.CreatedAt, want.UpdatedAt = got.ID, got.IndexedAt, got.CreatedAt, got.UpdatedAt
			want.ScopeRequired, want.Revision = "tool:"+want.Name, 1
			want.Auth.Type = "none"
			if a, ok := tc.body["auth"].(map[string]any); ok {
				want.Auth.Type, want.Auth.SecretsRef = a["type"].(string), a["secrets_ref"].(string)
			}
			if want.PolicyClass == "" {
				want.PolicyClass = "standard"
			}
			if want.SideEffects == nil {
				want.SideEffects = []string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("registration (-want +got):\n%s", diff)
			}

			var read toolJSON
			h.do("GET", "/v1/tools/"+got.ID, tok, nil).json(t, &read)
			if diff := cmp.Diff(tc.ops, read.OperationList); diff != "" {
				t.Errorf("operation_list (-want +got):\n%s", diff)
			}
			if len(read.OperationList) != got.Operations {
				t.Errorf("operations %d, but operation_list has %d", got.Operations, len(read.OperationList))
			}
		})
	}
}

// TestToolRegisterResolvesRefs checks that $refs of an OpenAPI 3.0 document
// are inlined into the operations' input schemas.
func TestToolRegisterResolvesRefs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	files := newSpecServer(t, "shop30.json")
	tl := h.mustRegister(tok, map[string]any{"name": "shop", "type": "openapi", "spec_url": files.URL + "/shop30.json"})
	var page opsPage
	h.do("GET", "/v1/tools/"+tl.ID+"/operations?q=createCustomer&view=full&limit=1", tok, nil).json(t, &page)
	if len(page.Operations) != 1 || page.Operations[0].ID != "createCustomer" {
		t.Fatalf("best operation for createCustomer: %v", page.ids())
	}
	var input struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(page.Operations[0].Input, &input); err != nil {
		t.Fatal(err)
	}
	if _, ok := input.Properties["email"]; !ok || bytes.Contains(page.Operations[0].Input, []byte("$ref")) {
		t.Errorf("input schema of createCustomer does not inline Customer: %s", page.Operations[0].Input)
	}
}

func TestToolRegisterRefusesBadDocuments(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write")
	docs := newSpecServer(t)
	for _, tc := range []struct {
		name, typ, doc string
		code           problem.Code
		// detail is a part of the problem's detail.
		detail string
	}{
		{"yaml that does not parse", "openapi", "openapi: 3.1.0\npaths: [\n", problem.SpecInvalid, "invalid YAML: line 2"},
		{"json that is no openapi", "openapi", `{"hello": "world"}`, problem.SpecInvalid, `no "openapi" or "swagger" field`},
		{"openapi without operations", "openapi", "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {}\n", problem.ValidationFailed, "no callable operation"},
		{"sdl that does not parse", "graphql", "type Query {\n  book(id: ID!): \n", problem.SpecInvalid, "not a GraphQL schema: line 3"},
		{"wsdl that is not xml", "soap", "<definitions><portType>", problem.SpecInvalid, "not XML: line 1"},
		{"wsdl 2.0", "soap", `<description xmlns="http://www.w3.org/ns/wsdl"/>`, problem.SpecInvalid, "WSDL 2.0"},
		{"wsdl without a soap binding", "soap", `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" targetNamespace="urn:x"><portType name="P"><operation name="Op"/></portType></definitions>`, problem.SpecInvalid, "no SOAP 1.1 or SOAP 1.2 binding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/" + strings.ReplaceAll(tc.name, " ", "-")
			docs.set(path, []byte(tc.doc))
			_, r := h.register(tok, map[string]any{"name": "bad", "type": tc.typ, "spec_url": docs.URL + path})
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			d := r.problem(t)
			if d.Code != tc.code || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("problem %s %q, want %s with %q in the detail", d.Code, d.Detail, tc.code, tc.detail)
			}
		})
	}
}

func TestToolRegisterRefusesUnreachableAndRefusedSpecs(t *testing.T) {
	t.Parallel()
	refused := newSpecServer(t, "petstore31.yaml")
	refusedPort := strings.TrimPrefix(refused.URL, "http://127.0.0.1:")
	// The allowed server serves a document and redirects to the refused one,
	// by address and by a name that resolves to it.
	doc := testdata(t, "petstore31.yaml")
	allowedSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/petstore31.yaml":
			w.Write(doc)
		case "/moved":
			http.Redirect(w, r, refused.URL+"/petstore31.yaml", http.StatusFound)
		case "/moved-by-name":
			http.Redirect(w, r, "http://localhost:"+refusedPort+"/petstore31.yaml", http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(allowedSrv.Close)
	allowed := netip.MustParseAddrPort(strings.TrimPrefix(allowedSrv.URL, "http://"))
	onlyAllowed := func(_ *httpapi.Config, d *httpapi.Deps) {
		d.Tools.Fetcher = outbound.New(outbound.Options{Allow: func(ap netip.AddrPort) error {
			if ap.Port() == allowed.Port() {
				return nil
			}
			return problem.New(problem.URLNotAllowed, "%s is not the allowed spec server", ap)
		}})
	}
	public := func(_ *httpapi.Config, d *httpapi.Deps) { d.Tools.Fetcher = outbound.New(outbound.Options{}) }
	small := func(_ *httpapi.Config, d *httpapi.Deps) {
		d.Tools.Fetcher = outbound.New(outbound.Options{AllowPrivate: true, MaxBytes: 1024})
		d.Tools.MaxSpecBytes = 1024
	}

	for _, tc := range []struct {
		name string
		opt  option
		body map[string]any
		code problem.Code
		// detail is a part of the problem's detail.
		detail string
	}{
		{"404", nil, map[string]any{"spec_url": allowedSrv.URL + "/nothing.yaml"}, problem.SpecUnreachable, "404"},
		{"nothing listening", nil, map[string]any{"spec_url": "http://127.0.0.1:1/spec.yaml"}, problem.SpecUnreachable, "refused"},
		{"loopback without --allow-private-networks", public, map[string]any{"spec_url": refused.URL + "/petstore31.yaml"}, problem.URLNotAllowed, "loopback"},
		{"metadata service name", public, map[string]any{"spec_url": "http://metadata.google.internal/spec"}, problem.URLNotAllowed, "metadata"},
		{"redirect to a refused address", onlyAllowed, map[string]any{"spec_url": allowedSrv.URL + "/moved"}, problem.URLNotAllowed, "not the allowed spec server"},
		{"redirect to a name of a refused address", onlyAllowed, map[string]any{"spec_url": allowedSrv.URL + "/moved-by-name"}, problem.URLNotAllowed, "resolves to a private address"},
		{"fetched spec over the size limit", small, map[string]any{"spec_url": allowedSrv.URL + "/petstore31.yaml"}, problem.SpecTooLarge, "1 KiB"},
		{"inline spec over the size limit", small, map[string]any{"spec": string(doc)}, problem.SpecTooLarge, "1024 byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []option
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			h := newHarness(t, opts...)
			body := map[string]any{"name": "pets", "type": "openapi"}
			for k, v := range tc.body {
				body[k] = v
			}
			_, r := h.register(h.token("acme", "tools:write"), body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			if d := r.problem(t); d.Code != tc.code || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("problem %s %q, want %s with %q in the detail", d.Code, d.Detail, tc.code, tc.detail)
			}
		})
	}

	// The allow hook itself lets the allowed server's documents through.
	h := newHarness(t, onlyAllowed)
	if _, r := h.register(h.token("acme", "tools:write"), map[string]any{
		"name": "pets", "type": "openapi", "spec_url": allowedSrv.URL + "/petstore31.yaml",
	}); r.Status != http.StatusCreated {
		t.Fatalf("allowed server: %d %s", r.Status, r.Body)
	}
	if n := refused.gets.Load(); n != 0 {
		t.Errorf("the refused server was asked %d times", n)
	}
}

func TestToolRegisterValidatesFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write")
	spec := string(testdata(t, "petstore31.yaml"))
	for _, tc := range []struct {
		name   string
		body   map[string]any
		fields []string
	}{
		{"missing name", map[string]any{"type": "openapi", "spec": spec}, []string{"name"}},
		{"bad name", map[string]any{"name": "pet store", "type": "openapi", "spec": spec}, []string{"name"}},
		{"name too long", map[string]any{"name": strings.Repeat("a", 65), "type": "openapi", "spec": spec}, []string{"name"}},
		{"missing type", map[string]any{"name": "pets", "spec": spec}, []string{"type"}},
		{"unknown type", map[string]any{"name": "pets", "type": "wsdl", "spec": spec}, []string{"type"}},
		{"neither spec nor spec_url", map[string]any{"name": "pets", "type": "openapi"}, []string{"spec_url"}},
		{"both spec and spec_url", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "spec_url": "https://example.com/o.yaml"}, []string{"spec"}},
		{"endpoint_url relative", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "endpoint_url": "/api"}, []string{"endpoint_url"}},
		{"bad side_effects item", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "side_effects": []string{"create", "explode"}}, []string{"side_effects[1]"}},
		{"bad policy_class", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "policy_class": "Top Secret"}, []string{"policy_class"}},
		{"oauth2 without secrets_ref", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "auth": map[string]any{"type": "oauth2", "client_id": "c"}}, []string{"auth.secrets_ref"}},
		{"unknown auth type", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "auth": map[string]any{"type": "magic", "secrets_ref": "env://TOOL_X"}}, []string{"auth.type"}},
		{"secrets_ref with auth none", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "auth": map[string]any{"type": "none", "secrets_ref": "env://TOOL_X"}}, []string{"auth.secrets_ref"}},
		{"malformed secrets_ref", map[string]any{"name": "pets", "type": "openapi", "spec": spec, "auth": map[string]any{"type": "bearer", "secrets_ref": "env://TOOL-X"}}, []string{"auth.secrets_ref"}},
		{"several at once", map[string]any{"name": "", "type": "rest"}, []string{"name", "type", "spec_url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := h.register(tok, tc.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			d := r.problem(t)
			if d.Code != problem.ValidationFailed {
				t.Fatalf("code %s, want validation-failed", d.Code)
			}
			var fields []string
			for _, e := range d.Errors {
				fields = append(fields, e.Field)
				if e.Message == "" {
					t.Errorf("field %s without a message", e.Field)
				}
			}
			if diff := cmp.Diff(tc.fields, fields); diff != "" {
				t.Errorf("errors[].field (-want +got):\n%s", diff)
			}
		})
	}
	var page struct{ Tools []toolJSON }
	h.do("GET", "/v1/tools", h.token("acme", "tools:read"), nil).json(t, &page)
	if len(page.Tools) != 0 {
		t.Errorf("invalid registrations left tools: %+v", page.Tools)
	}
}

func TestToolRegisterChecksSecretRefsAndNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write")
	withAuth := func(name, typ, ref string) map[string]any {
		b := inlineTool(t, name)
		b["auth"] = map[string]any{"type": typ, "secrets_ref": ref}
		return b
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		code   problem.Code
	}{
		{"env outside the allow-list", withAuth("a", "bearer", "env://OTHER"), 422, problem.SecretRefNotAllowed},
		{"vault outside the allow-list", withAuth("b", "api_key", "vault://kv/tenants/acme/pets#key"), 422, problem.SecretRefNotAllowed},
		{"file without --allow-file-secrets", withAuth("c", "basic", "file:///run/secrets/pets"), 422, problem.SecretRefNotAllowed},
		// Registration does not resolve the reference: TOOL_PETS need not exist.
		{"allowed and not resolved", withAuth("pets", "oauth2", "env://TOOL_PETS"), 201, ""},
		{"duplicate name", inlineTool(t, "pets"), 409, problem.Conflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, r := h.register(tok, tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.code != "" {
				if d := r.problem(t); d.Code != tc.code || d.Detail == "" {
					t.Errorf("problem %s %q, want %s", d.Code, d.Detail, tc.code)
				}
				return
			}
			if got.Auth.Type != "oauth2" || got.Auth.SecretsRef != "env://TOOL_PETS" {
				t.Errorf("auth %+v", got.Auth)
			}
		})
	}
}

// TestToolRegisterShowsWarnings checks that what the importer found wrong
// without refusing the document reaches the caller who registered it.
func TestToolRegisterShowsWarnings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	doc := `{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "/api"}],
		"paths": {"/things": {"get": {"operationId": "listThings", "responses": {"200": {"description": "ok"}}}}}}`
	r := h.do("POST", "/v1/tools", tok, map[string]any{"name": "things", "type": "openapi", "spec": doc,
		"endpoint_url": "http://127.0.0.1:1/api"})
	var got struct {
		ID       string   `json:"id"`
		Warnings []string `json:"warnings"`
	}
	r.json(t, &got)
	if r.Status != http.StatusCreated || len(got.Warnings) == 0 || !strings.Contains(strings.Join(got.Warnings, "\n"), "relative") {
		t.Fatalf("register: %d, warnings %q; want 201 with the relative server URL warned of", r.Status, got.Warnings)
	}
	r = h.do("GET", "/v1/tools/"+got.ID, tok, nil)
	if strings.Contains(string(r.Body), `"warnings"`) {
		t.Errorf("GET shows warnings, which are not stored: %s", r.Body)
	}
}

// TestToolRegisterSloppyWSDL: a WSDL whose references resolve only by local
// name registers, and the response says what each was taken to mean.
func TestToolRegisterSloppyWSDL(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write")
	doc, err := os.ReadFile("../tool/soap/testdata/lenient-default-ns.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	r := h.do("POST", "/v1/tools", tok, map[string]any{"name": "query", "type": "soap", "spec": string(doc)})
	var got struct {
		Operations int      `json:"operations"`
		Warnings   []string `json:"warnings"`
	}
	r.json(t, &got)
	if r.Status != http.StatusCreated || got.Operations != 2 {
		t.Fatalf("register: %d, %d operations: %s", r.Status, got.Operations, r.Body)
	}
	if !slices.ContainsFunc(got.Warnings, func(w string) bool {
		return strings.Contains(w, `binding SoapQuery_Binding: type "SoapQuery_PortType"`) && strings.Contains(w, "taken to mean portType {urn:query}SoapQuery_PortType")
	}) {
		t.Errorf("warnings %q do not say what the binding's type was taken to mean", got.Warnings)
	}
}

// TestToolRegisterOperationKinds overrides the read/write kinds that the
// verb rule misreads in operation names that are not English, refuses
// unknown ids and kinds, and keeps the rule for operations not named.
func TestToolRegisterOperationKinds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:read tools:write")
	doc, err := os.ReadFile("../tool/soap/testdata/spanish-verbs.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	reg := map[string]any{"name": "facturas", "type": "soap", "spec": string(doc)}

	reg["operation_kinds"] = map[string]string{"FEParamGetTiposCbte": "read", "FECompConsulta": "read", "FECAESolicitar": "sometimes"}
	r := h.do("POST", "/v1/tools", tok, reg)
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), `"operation_kinds.FECAESolicitar"`) {
		t.Fatalf("a kind other than read or write: %d %s", r.Status, r.Body)
	}
	reg["operation_kinds"] = map[string]string{"FEParamGetTiposCbte": "read", "FECompConsulta": "read"}
	r = h.do("POST", "/v1/tools", tok, reg)
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), `"operation_kinds.FECompConsulta"`) ||
		!strings.Contains(string(r.Body), "names no operation of the document") {
		t.Fatalf("an id the document lacks: %d %s", r.Status, r.Body)
	}

	reg["operation_kinds"] = map[string]string{"FEParamGetTiposCbte": "read", "FECompConsultar": "read"}
	r = h.do("POST", "/v1/tools", tok, reg)
	var created struct {
		ID string `json:"id"`
	}
	r.json(t, &created)
	if r.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	kinds := func() map[string]string {
		var got struct {
			OperationList []struct{ ID, Kind string } `json:"operation_list"`
		}
		h.do("GET", "/v1/tools/"+created.ID, tok, nil).json(t, &got)
		m := map[string]string{}
		for _, op := range got.OperationList {
			m[op.ID] = op.Kind
		}
		return m
	}
	want := map[string]string{"FEParamGetTiposCbte": "read", "FECompConsultar": "read", "FECAESolicitar": "write"}
	if got := kinds(); !maps.Equal(got, want) {
		t.Errorf("kinds %v, want %v", got, want)
	}

	// PUT replaces the registration: without the overrides, the rule decides again.
	delete(reg, "operation_kinds")
	if r := h.do("PUT", "/v1/tools/"+created.ID, tok, reg); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	if got := kinds(); got["FECompConsultar"] != "write" {
		t.Errorf("after PUT without operation_kinds: %v", got)
	}
}
