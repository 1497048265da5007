package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/workflow"
)

// openAPIURL is where the document is registered with the schema compiler,
// so that its "#/components/schemas/X" references resolve inside it.
const openAPIURL = "https://agentplane.test/openapi.json"

// apiDoc is openapi.json with a JSON Schema 2020-12 compiler over it.
type apiDoc struct {
	raw map[string]any

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
}

var loadAPIDoc = sync.OnceValues(func() (*apiDoc, error) {
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		return nil, err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parse openapi.json: %w", err)
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi.json is not an object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, raw); err != nil {
		return nil, fmt.Errorf("add openapi.json: %w", err)
	}
	return &apiDoc{raw: raw, compiler: c, schemas: map[string]*jsonschema.Schema{}}, nil
})

func openAPI(t *testing.T) *apiDoc {
	t.Helper()
	d, err := loadAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// schema compiles the schema at a JSON pointer into the document.
func (d *apiDoc) schema(ptr string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[ptr]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(openAPIURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", ptr, err)
	}
	d.schemas[ptr] = s
	return s, nil
}

// at returns the value at a JSON pointer, following a $ref found there
// (once), and the pointer it ends at.
func (d *apiDoc) at(ptr string) (map[string]any, string) {
	var v any = d.raw
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, ptr
		}
		v = m[unescapePointer(tok)]
	}
	m, _ := v.(map[string]any)
	if r, ok := m["$ref"].(string); ok {
		target := strings.TrimPrefix(r, "#")
		return d.at(target)
	}
	return m, ptr
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// conform checks a real response against the document: the operation of
// pattern ("METHOD /path/{param}", or "" for a request that matched no
// route) documents resp's status, its Content-Type is a documented media
// type, its body validates against that media type's schema, and the
// headers the response documents as required are present. path is the
// request's path, which problem documents must name as their instance.
func conform(t *testing.T, method, path, pattern string, resp response) {
	t.Helper()
	d := openAPI(t)
	where := fmt.Sprintf("%s %s → %d", method, path, resp.Status)

	var rptr string
	if pattern == "" {
		rptr = d.unmatchedResponse(t, where, method, path, resp)
	} else {
		pm, ppath, _ := strings.Cut(pattern, " ")
		if pm != method {
			t.Fatalf("%s: pattern %q is for another method", where, pattern)
		}
		opPtr := "/paths/" + escapePointer(ppath) + "/" + strings.ToLower(method)
		op, _ := d.at(opPtr)
		if op == nil {
			t.Errorf("%s: openapi.json has no operation %s", where, pattern)
			return
		}
		rs, _ := op["responses"].(map[string]any)
		code := strconv.Itoa(resp.Status)
		if _, ok := rs[code]; !ok {
			code = "default"
		}
		if _, ok := rs[code]; !ok {
			t.Errorf("%s: %s documents no %d response (body %s)", where, pattern, resp.Status, resp.Body)
			return
		}
		rptr = opPtr + "/responses/" + code
	}
	r, rptr := d.at(rptr)

	d.checkHeaders(t, where, r, rptr, resp)

	content, _ := r["content"].(map[string]any)
	ct := resp.Header.Get("Content-Type")
	if len(content) == 0 {
		if len(resp.Body) > 0 {
			t.Errorf("%s: documented without content, answered %q: %s", where, ct, resp.Body)
		}
		return
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Errorf("%s: Content-Type %q: %v", where, ct, err)
		return
	}
	if _, ok := content[mt]; !ok {
		t.Errorf("%s: Content-Type %q is not documented (documented: %v)", where, mt, keys(content))
		return
	}
	sptr := rptr + "/content/" + escapePointer(mt) + "/schema"
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		body, err := jsonschema.UnmarshalJSON(bytes.NewReader(resp.Body))
		if err != nil {
			t.Errorf("%s: body is not JSON: %v: %s", where, err, resp.Body)
			return
		}
		d.validate(t, where, sptr, body)
		if mt == "application/problem+json" {
			checkProblem(t, where, path, resp)
		}
	case mt == "text/event-stream":
		d.checkStream(t, where, resp.Body)
	default:
		d.validate(t, where, sptr, string(resp.Body))
	}
}

// unmatchedResponse is the documented answer to a request no route
// matched: 405 on a documented path (with an Allow header naming its
// operations' methods), else 404.
func (d *apiDoc) unmatchedResponse(t *testing.T, where, method, path string, resp response) string {
	t.Helper()
	item, _ := d.at("/paths/" + escapePointer(path))
	switch resp.Status {
	case 405:
		if item == nil {
			t.Errorf("%s: 405 for a path openapi.json does not have", where)
		} else if _, ok := item[strings.ToLower(method)]; ok {
			t.Errorf("%s: 405 for a documented operation", where)
		} else {
			var want, got []string
			for m := range item {
				want = append(want, strings.ToUpper(m))
			}
			for _, m := range strings.Split(resp.Header.Get("Allow"), ",") {
				if m = strings.TrimSpace(m); m != "HEAD" {
					got = append(got, m)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				t.Errorf("%s: Allow %q, want the documented methods %v (and HEAD)", where, resp.Header.Get("Allow"), want)
			}
		}
		return "/components/responses/MethodNotAllowed"
	case 404:
		if item != nil {
			t.Errorf("%s: 404 for an unmatched request to a documented path", where)
		}
		return "/components/responses/NotFound"
	}
	t.Fatalf("%s: a request that matched no route answers 404 or 405", where)
	return ""
}

// checkHeaders checks that headers documented as required are present and
// that every documented header that is present validates.
func (d *apiDoc) checkHeaders(t *testing.T, where string, r map[string]any, rptr string, resp response) {
	t.Helper()
	hs, _ := r["headers"].(map[string]any)
	for name := range hs {
		h, hptr := d.at(rptr + "/headers/" + escapePointer(name))
		v := resp.Header.Get(name)
		if v == "" {
			if req, _ := h["required"].(bool); req {
				t.Errorf("%s: required header %s is missing", where, name)
			}
			continue
		}
		var value any = v
		if sch, _ := h["schema"].(map[string]any); sch["type"] == "integer" {
			value = json.Number(v)
		}
		d.validate(t, where+" header "+name, hptr+"/schema", value)
	}
}

func (d *apiDoc) validate(t *testing.T, where, ptr string, v any) {
	t.Helper()
	s, err := d.schema(ptr)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := s.Validate(v); err != nil {
		b, _ := json.Marshal(v)
		t.Errorf("%s: does not conform to %s: %v\nvalue: %s", where, ptr, err, b)
	}
}

// checkProblem checks what the schema cannot: the problem names the
// request's path and id.
func checkProblem(t *testing.T, where, path string, resp response) {
	t.Helper()
	var p struct {
		Status    int    `json:"status"`
		Instance  string `json:"instance"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(resp.Body, &p); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if p.Status != resp.Status || p.Instance != path || p.RequestID != resp.Header.Get("Request-Id") {
		t.Errorf("%s: problem status %d instance %q request_id %q; want %d %q %q",
			where, p.Status, p.Instance, p.RequestID, resp.Status, path, resp.Header.Get("Request-Id"))
	}
}

// checkStream checks a text/event-stream body as the document describes
// it: events of `id: <n>` and `data: <one-line JSON>`, each data a
// StreamEvent, ids increasing, ending with exactly one complete event.
func (d *apiDoc) checkStream(t *testing.T, where string, body []byte) {
	t.Helper()
	events := parseSSE(t, where, body)
	if len(events) == 0 {
		t.Errorf("%s: empty stream", where)
		return
	}
	last := 0
	for i, ev := range events {
		if ev.id <= last {
			t.Errorf("%s: event id %d after %d", where, ev.id, last)
		}
		last = ev.id
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(ev.data))
		if err != nil {
			t.Errorf("%s: event %d data is not JSON: %v", where, ev.id, err)
			continue
		}
		d.validate(t, fmt.Sprintf("%s event %d", where, ev.id), "/components/schemas/StreamEvent", v)
		complete := strings.Contains(ev.data, `"event":"complete"`)
		if complete != (i == len(events)-1) {
			t.Errorf("%s: event %d: the complete event must be the last, and only it", where, ev.id)
		}
	}
}

type sseEvent struct {
	id   int
	data string
}

func parseSSE(t *testing.T, where string, body []byte) []sseEvent {
	t.Helper()
	var (
		events []sseEvent
		cur    sseEvent
		fields int
	)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if fields > 0 {
				events = append(events, cur)
			}
			cur, fields = sseEvent{}, 0
		case strings.HasPrefix(line, ":"): // keep-alive
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.Atoi(strings.TrimPrefix(line, "id: "))
			if err != nil {
				t.Errorf("%s: event id %q", where, line)
			}
			cur.id, fields = n, fields+1
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				t.Errorf("%s: event %d has more than one data line", where, cur.id)
			}
			cur.data, fields = strings.TrimPrefix(line, "data: "), fields+1
		default:
			t.Errorf("%s: undocumented stream line %q", where, line)
		}
	}
	if fields > 0 {
		t.Errorf("%s: the stream ends inside an event", where)
	}
	return events
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// call is one request of a conformance test and the route it targets.
type call struct {
	name    string
	method  string
	path    string
	pattern string // "" when no route matches
	token   string
	body    any
	headers []string
	// status is the status wanted; 0 accepts any the document lists.
	status int
}

// check sends each exchange, checks its status and conforms its response.
func (h *harness) check(t *testing.T, exs ...call) map[string]response {
	t.Helper()
	got := map[string]response{}
	for _, ex := range exs {
		r := h.do(ex.method, ex.path, ex.token, ex.body, ex.headers...)
		if ex.status != 0 && r.Status != ex.status {
			t.Errorf("%s: %s %s = %d, want %d: %s", ex.name, ex.method, ex.path, r.Status, ex.status, r.Body)
		}
		p, _, _ := strings.Cut(ex.path, "?")
		conform(t, ex.method, p, ex.pattern, r)
		got[ex.name] = r
	}
	return got
}

func TestConformSystemAndOAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rec := &audit.Record{Time: time.Now(), Tenant: "acme", Action: "client.create", Outcome: audit.Success}
	id, secret, err := auth.CreateClient(context.Background(), h.DB, "acme", "ci", []string{"audit:read"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	form := func(v url.Values) string { return v.Encode() }
	formCT := []string{"Content-Type", "application/x-www-form-urlencoded"}
	got := h.check(t,
		call{name: "health", method: "GET", path: "/healthz", pattern: "GET /healthz", status: 200},
		call{name: "ready", method: "GET", path: "/readyz", pattern: "GET /readyz", status: 200},
		call{name: "metrics", method: "GET", path: "/metrics", pattern: "GET /metrics", status: 200},
		call{name: "problem page", method: "GET", path: "/problems/not-found", pattern: "GET /problems/{code}", status: 200},
		call{name: "no problem page", method: "GET", path: "/problems/nope", pattern: "GET /problems/{code}", status: 404},
		call{name: "openapi", method: "GET", path: "/v1/openapi.json", pattern: "GET /v1/openapi.json", status: 200},
		call{name: "discovery", method: "GET", path: "/.well-known/openid-configuration", pattern: "GET /.well-known/openid-configuration", status: 200},
		call{name: "jwks", method: "GET", path: "/.well-known/jwks.json", pattern: "GET /.well-known/jwks.json", status: 200},
		call{name: "token", method: "POST", path: "/oauth/token", pattern: "POST /oauth/token", status: 200, headers: formCT,
			body: form(url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}})},
		call{name: "bad secret", method: "POST", path: "/oauth/token", pattern: "POST /oauth/token", status: 401, headers: formCT,
			body: form(url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {"wrong"}})},
		call{name: "bad grant", method: "POST", path: "/oauth/token", pattern: "POST /oauth/token", status: 400, headers: formCT,
			body: form(url.Values{"grant_type": {"password"}})},
	)
	want, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got["openapi"].Body, want) {
		t.Error("GET /v1/openapi.json does not serve openapi.json")
	}
}

func TestConformProblems(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read audit:read")
	h.check(t,
		call{name: "no token", method: "GET", path: "/v1/tools", pattern: "GET /v1/tools", status: 401},
		call{name: "bad token", method: "GET", path: "/v1/tools", pattern: "GET /v1/tools", token: "not-a-jwt", status: 401},
		call{name: "no scope", method: "POST", path: "/v1/agents", pattern: "POST /v1/agents", token: tok, body: map[string]any{}, status: 403},
		call{name: "no tool", method: "GET", path: "/v1/tools/tool_01J00000000000000000000000", pattern: "GET /v1/tools/{id}", token: tok, status: 404},
		call{name: "no route", method: "GET", path: "/v1/nothing", token: tok, status: 404},
		call{name: "no method", method: "PATCH", path: "/v1/tools", token: tok, body: "{}", status: 405},
		call{name: "too large", method: "POST", path: "/v1/audit/query", pattern: "POST /v1/audit/query", token: tok,
			body: `{"action": "` + strings.Repeat("a", 1<<20) + `"}`, status: 413},
		call{name: "not json", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: "name=x",
			headers: []string{"Content-Type", "text/plain"}, status: 415},
		call{name: "malformed", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: "{", status: 400},
		call{name: "unknown field", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: `{"nom": "x"}`, status: 400},
		call{name: "invalid", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok,
			body: map[string]any{"name": "bad name!", "type": "wsdl"}, status: 422},
		call{name: "bad spec", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok,
			body: map[string]any{"name": "broken", "type": "openapi", "spec": "not: [a spec"}, status: 422},
		call{name: "bad limit", method: "GET", path: "/v1/tools?limit=0", pattern: "GET /v1/tools", token: tok, status: 422},
	)

	limited := newHarness(t, func(c *httpapi.Config, _ *httpapi.Deps) {
		c.RateLimits.Default = ratelimit.Limit{Rate: 1, Burst: 1, Period: time.Minute}
	})
	tok = limited.token("acme", "audit:read")
	limited.check(t,
		call{name: "within", method: "GET", path: "/v1/audit/verify", pattern: "GET /v1/audit/verify", token: tok, status: 200},
		call{name: "over", method: "GET", path: "/v1/audit/verify", pattern: "GET /v1/audit/verify", token: tok, status: 429},
	)
}

func TestConformTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	reg := inlineTool(t, "pets")
	key := []string{"Idempotency-Key", "register-pets"}
	got := h.check(t,
		call{name: "register", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: reg, headers: key, status: 201},
		call{name: "replayed", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: reg, headers: key, status: 201},
		call{name: "key reused", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: inlineTool(t, "other"), headers: key, status: 422},
		call{name: "name taken", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: reg, status: 409},
	)
	if got["replayed"].Header.Get("Idempotent-Replayed") != "true" {
		t.Error("a repeated registration is not marked Idempotent-Replayed")
	}
	var tl struct {
		ID string `json:"id"`
	}
	got["register"].json(t, &tl)
	put := inlineTool(t, "pets")
	put["policy_class"], put["side_effects"] = "financial", []string{"create", "external"}
	put["auth"] = map[string]any{"type": "api_key", "secrets_ref": "env://TOOL_PETS", "header": "X-Key"}
	h.check(t,
		call{name: "list", method: "GET", path: "/v1/tools?limit=1", pattern: "GET /v1/tools", token: tok, status: 200},
		call{name: "get", method: "GET", path: "/v1/tools/" + tl.ID, pattern: "GET /v1/tools/{id}", token: tok, status: 200},
		call{name: "operations", method: "GET", path: "/v1/tools/" + tl.ID + "/operations", pattern: "GET /v1/tools/{id}/operations", token: tok, status: 200},
		call{name: "search", method: "GET", path: "/v1/tools/" + tl.ID + "/operations?q=pet", pattern: "GET /v1/tools/{id}/operations", token: tok, status: 200},
		call{name: "search full", method: "GET", path: "/v1/tools/" + tl.ID + "/operations?q=list+pets&view=full&limit=1&kind=read", pattern: "GET /v1/tools/{id}/operations", token: tok, status: 200},
		call{name: "search bad view", method: "GET", path: "/v1/tools/" + tl.ID + "/operations?view=wide", pattern: "GET /v1/tools/{id}/operations", token: tok, status: 422},
		call{name: "search all tools", method: "GET", path: "/v1/operations?q=pets", pattern: "GET /v1/operations", token: tok, status: 200},
		call{name: "search one tool by name", method: "GET", path: "/v1/operations?tool=pets&view=full", pattern: "GET /v1/operations", token: tok, status: 200},
		call{name: "search unknown tool", method: "GET", path: "/v1/operations?tool=nope", pattern: "GET /v1/operations", token: tok, status: 404},
		call{name: "search bad limit", method: "GET", path: "/v1/operations?limit=101", pattern: "GET /v1/operations", token: tok, status: 422},
		call{name: "put", method: "PUT", path: "/v1/tools/" + tl.ID, pattern: "PUT /v1/tools/{id}", token: tok, body: put, status: 200},
		call{name: "rename", method: "PUT", path: "/v1/tools/" + tl.ID, pattern: "PUT /v1/tools/{id}", token: tok, body: inlineTool(t, "cats"), status: 422},
		call{name: "delete", method: "DELETE", path: "/v1/tools/" + tl.ID, pattern: "DELETE /v1/tools/{id}", token: tok, status: 200},
		call{name: "deleted", method: "DELETE", path: "/v1/tools/" + tl.ID, pattern: "DELETE /v1/tools/{id}", token: tok, status: 404},
		call{name: "gone", method: "GET", path: "/v1/tools/" + tl.ID + "/operations", pattern: "GET /v1/tools/{id}/operations", token: tok, status: 404},
	)
}

func TestConformAudit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read tools:read")
	h.do("GET", "/v1/tools", tok, nil) // something to find
	h.check(t,
		call{name: "query", method: "GET", path: "/v1/audit/query?action=tool.list&limit=1", pattern: "GET /v1/audit/query", token: tok, status: 200},
		call{name: "query all", method: "GET", path: "/v1/audit/query", pattern: "GET /v1/audit/query", token: tok, status: 200},
		call{name: "unknown filter", method: "GET", path: "/v1/audit/query?colour=red", pattern: "GET /v1/audit/query", token: tok, status: 422},
		call{name: "post query", method: "POST", path: "/v1/audit/query", pattern: "POST /v1/audit/query", token: tok,
			body: map[string]any{"outcome": "success", "since": "2020-01-01T00:00:00Z", "limit": 5}, headers: []string{"Idempotency-Key", "q1"}, status: 200},
		call{name: "bad post query", method: "POST", path: "/v1/audit/query", pattern: "POST /v1/audit/query", token: tok,
			body: map[string]any{"outcome": "maybe", "limit": 5000}, status: 422},
		call{name: "verify", method: "GET", path: "/v1/audit/verify", pattern: "GET /v1/audit/verify", token: tok, status: 200},
		call{name: "export", method: "GET", path: "/v1/audit/export?format=ocsf&limit=2", pattern: "GET /v1/audit/export", token: tok, status: 200},
		call{name: "export other format", method: "GET", path: "/v1/audit/export?format=cef", pattern: "GET /v1/audit/export", token: tok, status: 422},
	)
}

// TestConformAgentsAndWorkflows covers the agent and workflow routes once
// newHarness wires Deps.Agents, Deps.Runner and Deps.Workflows.
func TestConformAgentsAndWorkflows(t *testing.T) {
	t.Parallel()
	conformAgentsAndWorkflows(t, newHarness(t))
}

// conformAgentsAndWorkflows deploys an agent, invokes it (sync and
// streamed) and reads its workflows, conforming every response.
func conformAgentsAndWorkflows(t *testing.T, h *harness) {
	t.Helper()
	tok := h.token("acme", "tools:write agents:write agents:read agents:invoke workflows:read")
	h.check(t, call{name: "tool", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: inlineTool(t, "pets"), status: 201})
	def := map[string]any{
		"tools":  []string{"pets"},
		"inputs": map[string]any{"type": "object", "properties": map[string]any{"amount": map[string]any{"type": "number"}}},
		"steps": []map[string]any{
			// The caller lacks tool:pets: the call is denied, and the run goes on.
			{"action": "list_pets", "call": "pets.listPets", "args": map[string]any{}, "on_denied": "continue"},
			{"action": "fraud_score", "score": "has(context.amount) && context.amount > 1000.0 ? 0.91 : 0.12"},
			{"action": "route_queue", "route": []map[string]any{{"when": "score >= 0.8", "queue": "fraud-review"}, {"queue": "standard"}}},
		},
		"outcome": "queue == 'fraud-review' ? 'escalated' : 'cleared'",
		"output":  "{'queue': queue, 'score': score}",
	}
	deploy := func(version string, promote bool) map[string]any {
		return map[string]any{"name": "triage", "version": version, "description": "Fraud triage", "definition": def, "promote": promote}
	}
	bad := map[string]any{"name": "triage", "definition": map[string]any{"tools": []string{"nope"}, "steps": []any{}}}
	invoke := map[string]any{"goal": "triage the transaction", "context": map[string]any{"amount": 1500.0}}
	got := h.check(t,
		call{name: "deploy", method: "POST", path: "/v1/agents", pattern: "POST /v1/agents", token: tok, body: deploy("1", false),
			headers: []string{"Idempotency-Key", "deploy-1"}, status: 201},
		call{name: "deploy again", method: "POST", path: "/v1/agents", pattern: "POST /v1/agents", token: tok, body: deploy("1", false), status: 409},
		call{name: "deploy invalid", method: "POST", path: "/v1/agents", pattern: "POST /v1/agents", token: tok, body: bad, status: 422},
		call{name: "deploy 2", method: "POST", path: "/v1/agents", pattern: "POST /v1/agents", token: tok, body: deploy("2", false), status: 201},
		call{name: "list", method: "GET", path: "/v1/agents", pattern: "GET /v1/agents", token: tok, status: 200},
		call{name: "get", method: "GET", path: "/v1/agents/triage", pattern: "GET /v1/agents/{id}", token: tok, status: 200},
		call{name: "get version", method: "GET", path: "/v1/agents/triage@1", pattern: "GET /v1/agents/{id}", token: tok, status: 200},
		call{name: "no version", method: "GET", path: "/v1/agents/triage@9", pattern: "GET /v1/agents/{id}", token: tok, status: 404},
		call{name: "no agent", method: "GET", path: "/v1/agents/nobody", pattern: "GET /v1/agents/{id}", token: tok, status: 404},
		call{name: "versions", method: "GET", path: "/v1/agents/triage/versions", pattern: "GET /v1/agents/{id}/versions", token: tok, status: 200},
		call{name: "set default", method: "PUT", path: "/v1/agents/triage/default", pattern: "PUT /v1/agents/{id}/default", token: tok,
			body: map[string]any{"version": "2"}, status: 200},
		call{name: "invoke", method: "POST", path: "/v1/agents/triage/invoke", pattern: "POST /v1/agents/{id}/invoke", token: tok, body: invoke,
			headers: []string{"Idempotency-Key", "invoke-1"}, status: 200},
		call{name: "invoke replayed", method: "POST", path: "/v1/agents/triage/invoke", pattern: "POST /v1/agents/{id}/invoke", token: tok, body: invoke,
			headers: []string{"Idempotency-Key", "invoke-1"}, status: 200},
		call{name: "stream", method: "POST", path: "/v1/agents/triage@1/invoke", pattern: "POST /v1/agents/{id}/invoke", token: tok,
			body: map[string]any{"goal": "triage", "stream": true}, status: 200},
		call{name: "invoke invalid", method: "POST", path: "/v1/agents/triage/invoke", pattern: "POST /v1/agents/{id}/invoke", token: tok,
			body: map[string]any{"goal": "", "max_tool_calls": 0}, status: 422},
		call{name: "invoke nobody", method: "POST", path: "/v1/agents/nobody/invoke", pattern: "POST /v1/agents/{id}/invoke", token: tok,
			body: invoke, status: 404},
	)
	if ct := got["stream"].Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("streamed invoke: Content-Type %q", ct)
	}
	id := got["invoke"].Header.Get("Workflow-Id")
	listed := h.check(t,
		call{name: "workflows", method: "GET", path: "/v1/workflows?agent=triage&status=completed", pattern: "GET /v1/workflows", token: tok, status: 200},
		call{name: "bad filter", method: "GET", path: "/v1/workflows?status=sleeping", pattern: "GET /v1/workflows", token: tok, status: 422},
		call{name: "workflows of a version", method: "GET", path: "/v1/workflows?agent=triage&version=2&q=the+TRANSACTION", pattern: "GET /v1/workflows", token: tok, status: 200},
		call{name: "version without agent", method: "GET", path: "/v1/workflows?version=1", pattern: "GET /v1/workflows", token: tok, status: 422},
		call{name: "version not a number", method: "GET", path: "/v1/workflows?agent=triage&version=v1", pattern: "GET /v1/workflows", token: tok, status: 422},
		call{name: "workflow", method: "GET", path: "/v1/workflows/" + id, pattern: "GET /v1/workflows/{id}", token: tok, status: 200},
		call{name: "no workflow", method: "GET", path: "/v1/workflows/wf_01J00000000000000000000000", pattern: "GET /v1/workflows/{id}", token: tok, status: 404},
		call{name: "events", method: "GET", path: "/v1/workflows/" + id + "/events", pattern: "GET /v1/workflows/{id}/events", token: tok, status: 200},
		call{name: "events resumed", method: "GET", path: "/v1/workflows/" + id + "/events", pattern: "GET /v1/workflows/{id}/events", token: tok,
			headers: []string{"Last-Event-ID", "1"}, status: 200},
		call{name: "cancel finished", method: "POST", path: "/v1/workflows/" + id + "/cancel", pattern: "POST /v1/workflows/{id}/cancel", token: tok},
	)
	var ofVersion struct {
		Workflows []struct {
			ID string `json:"workflow_id"`
		} `json:"workflows"`
	}
	listed["workflows of a version"].json(t, &ofVersion)
	if len(ofVersion.Workflows) != 1 || ofVersion.Workflows[0].ID != id {
		t.Errorf("workflows of triage@2 with the goal's words: %+v, want only %s", ofVersion.Workflows, id)
	}

	rtok := h.token("acme", "workflows:replay workflows:read")
	got = h.check(t,
		call{name: "replay", method: "POST", path: "/v1/workflows/" + id + "/replay", pattern: "POST /v1/workflows/{id}/replay", token: rtok,
			body: map[string]any{"target_agent_version": "triage@1"}, headers: []string{"Idempotency-Key", "replay-1"}, status: 201},
		call{name: "replay live without invoke", method: "POST", path: "/v1/workflows/" + id + "/replay", pattern: "POST /v1/workflows/{id}/replay", token: rtok,
			body: map[string]any{"target_agent_version": "triage@1", "dry_run": false}, status: 403},
		call{name: "replay no target", method: "POST", path: "/v1/workflows/" + id + "/replay", pattern: "POST /v1/workflows/{id}/replay", token: rtok,
			body: map[string]any{}, status: 422},
		call{name: "replay unknown version", method: "POST", path: "/v1/workflows/" + id + "/replay", pattern: "POST /v1/workflows/{id}/replay", token: rtok,
			body: map[string]any{"target_agent_version": "triage@9"}, status: 404},
		call{name: "replays", method: "GET", path: "/v1/replays?workflow_id=" + id, pattern: "GET /v1/replays", token: rtok, status: 200},
		call{name: "replays bad limit", method: "GET", path: "/v1/replays?limit=0", pattern: "GET /v1/replays", token: rtok, status: 422},
		call{name: "no replay", method: "GET", path: "/v1/replays/rpl_01J00000000000000000000000", pattern: "GET /v1/replays/{id}", token: rtok, status: 404},
	)
	var rp struct {
		ID        string `json:"replay_id"`
		ViewerURL string `json:"viewer_url"`
	}
	if err := json.Unmarshal(got["replay"].Body, &rp); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rp.ViewerURL)
	if err != nil {
		t.Fatal(err)
	}
	h.check(t,
		call{name: "replay again", method: "GET", path: "/v1/replays/" + rp.ID, pattern: "GET /v1/replays/{id}", token: rtok, status: 200},
		call{name: "viewer", method: "GET", path: u.RequestURI(), pattern: "GET /replays/{id}", status: 200},
		call{name: "viewer unsigned", method: "GET", path: u.Path, pattern: "GET /replays/{id}", status: 404},
		call{name: "viewer stylesheet", method: "GET", path: "/viewer/assets/viewer.css", pattern: "GET /viewer/assets/{file}", status: 200},
		call{name: "viewer no file", method: "GET", path: "/viewer/assets/nope.js", pattern: "GET /viewer/assets/{file}", status: 404},
	)
}

// TestConformStreams checks conform's reading of event streams on a stream
// built from the workflow package's own event views, as the server sends it.
func TestConformStreams(t *testing.T) {
	wf := &workflow.Workflow{ID: ids.New(ids.Workflow), Agent: "triage", AgentVersion: "1", Status: workflow.Completed,
		Outcome: "cleared", StartedAt: time.Now().Add(-time.Second), FinishedAt: time.Now()}
	var body bytes.Buffer
	for i, ev := range []any{
		workflow.StepView("triage", workflow.Step{Step: 1, Action: "list_pets", Status: "denied", Tool: "pets", Operation: "listPets"}),
		workflow.StepView("triage", workflow.Step{Step: 2, Action: "fraud_score", Status: "ok", Score: new(float64)}),
		workflow.CompleteView(wf),
	} {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			body.WriteString(": keep-alive\n\n")
		}
		fmt.Fprintf(&body, "id: %d\ndata: %s\n\n", i+1, b)
	}
	header := http.Header{"Content-Type": {"text/event-stream"}, "Request-Id": {ids.New(ids.Request)}, "Workflow-Id": {wf.ID}}
	resp := response{Status: 200, Header: header, Body: body.Bytes()}
	conform(t, "POST", "/v1/agents/triage/invoke", "POST /v1/agents/{id}/invoke", resp)
	conform(t, "GET", "/v1/workflows/"+wf.ID+"/events", "GET /v1/workflows/{id}/events", resp)
}
