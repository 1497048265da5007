package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Three versions of one API's description: B breaks A in each way SPEC §4
// lists, C only adds to B.
const (
	issuesA = `{"openapi":"3.0.3","info":{"title":"issues","version":"1"},"servers":[{"url":"https://issues.example/v1"}],"paths":{
  "/issues":{"get":{"operationId":"listIssues","parameters":[
    {"name":"state","in":"query","schema":{"type":"string","enum":["open","closed","all"]}},
    {"name":"limit","in":"query","schema":{"type":"integer"}}],
    "responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object","properties":{
      "id":{"type":"string"},"title":{"type":"string"},"email":{"type":"string"}}}}}}}}},
  "/issues/{id}":{"get":{"operationId":"getIssue","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok"}}},
    "delete":{"operationId":"deleteIssue","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
    "responses":{"204":{"description":"gone"}}}},
  "/users":{"get":{"operationId":"listUsers","parameters":[{"name":"page","in":"query","schema":{"type":"integer"}}],
    "responses":{"200":{"description":"ok"}}}}}}`
	issuesB = `{"openapi":"3.0.3","info":{"title":"issues","version":"2"},"servers":[{"url":"https://issues.example/v2"}],"paths":{
  "/issues":{"get":{"operationId":"listIssues","parameters":[
    {"name":"state","in":"query","schema":{"type":"string","enum":["open","closed"]}},
    {"name":"limit","in":"query","schema":{"type":"integer"}},
    {"name":"org","in":"query","required":true,"schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object","properties":{
      "id":{"type":"string"},"title":{"type":"string"}}}}}}}}},
  "/issues/{id}":{"get":{"operationId":"getIssue","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok"}}}},
  "/users":{"get":{"operationId":"listUsers","parameters":[{"name":"page","in":"query","schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok"}}}}}}`
	issuesC = `{"openapi":"3.0.3","info":{"title":"issues","version":"3"},"servers":[{"url":"https://issues.example/v2"}],"paths":{
  "/issues":{"get":{"operationId":"listIssues","parameters":[
    {"name":"state","in":"query","schema":{"type":"string","enum":["open","closed"]}},
    {"name":"limit","in":"query","schema":{"type":"integer"}},
    {"name":"org","in":"query","required":true,"schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object","properties":{
      "id":{"type":"string"},"title":{"type":"string"}}}}}}}}},
  "/issues/{id}":{"get":{"operationId":"getIssue","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok"}}}},
  "/users":{"get":{"operationId":"listUsers","parameters":[{"name":"page","in":"query","schema":{"type":"string"}},
    {"name":"sort","in":"query","schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok"}}}},
  "/users/{id}":{"get":{"operationId":"getUser","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
    "responses":{"200":{"description":"ok"}}}}}}`
)

// versionedSpec serves whichever document was last set, with the status
// set (200 unless told).
type versionedSpec struct {
	doc    atomic.Value
	status atomic.Int32
	URL    string
}

func newVersionedSpec(t *testing.T, doc string) *versionedSpec {
	v := &versionedSpec{}
	v.set(doc)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := v.status.Load(); s != 0 {
			http.Error(w, "the description is down", int(s))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(v.doc.Load().(string)))
	}))
	t.Cleanup(srv.Close)
	v.URL = srv.URL + "/openapi.json"
	return v
}

func (v *versionedSpec) set(doc string) { v.doc.Store(doc) }

type changeJSON struct {
	Kind     string `json:"kind"`
	Path     string `json:"path"`
	Breaking bool   `json:"breaking"`
	Detail   string `json:"detail"`
}

type refreshJSON struct {
	Revision     int    `json:"revision"`
	ToolRevision int    `json:"tool_revision"`
	Status       string `json:"status"`
	Breaking     bool   `json:"breaking"`
	Diff         struct {
		Added   []string `json:"added"`
		Removed []string `json:"removed"`
		Changed []struct {
			Operation string       `json:"operation"`
			Breaking  bool         `json:"breaking"`
			Changes   []changeJSON `json:"changes"`
		} `json:"changed"`
	} `json:"diff"`
}

// kinds lists a refresh's changes as "operation kind path breaking".
func (r refreshJSON) kinds() []string {
	var out []string
	for _, c := range r.Diff.Changed {
		for _, ch := range c.Changes {
			b := ""
			if ch.Breaking {
				b = " breaking"
			}
			out = append(out, c.Operation+" "+ch.Kind+" "+ch.Path+b)
		}
	}
	return out
}

func (h *harness) refresh(tok, id string) (refreshJSON, response) {
	h.t.Helper()
	var out refreshJSON
	r := h.do("POST", "/v1/tools/"+id+"/refresh", tok, nil)
	if r.Status == http.StatusOK {
		r.json(h.t, &out)
	}
	return out, r
}

func TestToolRefreshDrift(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	spec := newVersionedSpec(t, issuesA)
	tl := h.mustRegister(tok, map[string]any{"name": "issues", "type": "openapi", "spec_url": spec.URL})

	// The same description: unchanged, nothing stored.
	got, r := h.refresh(tok, tl.ID)
	if r.Status != http.StatusOK || got.Status != "unchanged" || got.Revision != 0 || got.ToolRevision != 1 {
		t.Fatalf("refresh of the same description: %d %s", r.Status, r.Body)
	}

	// B breaks in every listed way: pending, each change named.
	spec.set(issuesB)
	got, r = h.refresh(tok, tl.ID)
	if r.Status != http.StatusOK {
		t.Fatalf("refresh to B: %d %s", r.Status, r.Body)
	}
	if got.Status != "pending" || !got.Breaking || got.Revision != 1 || got.ToolRevision != 1 {
		t.Fatalf("refresh to B: status %q breaking %v revision %d tool revision %d, want pending, breaking, 1, 1", got.Status, got.Breaking, got.Revision, got.ToolRevision)
	}
	if diff := cmp.Diff([]string{"deleteIssue"}, got.Diff.Removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	want := []string{
		"listIssues required_added org breaking",
		"listIssues response_field_removed response.email breaking",
		"listIssues enum_narrowed state breaking",
		"listUsers type_changed page breaking",
	}
	if diff := cmp.Diff(want, got.kinds()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	// Pending: the tool still has A's operations.
	var cur toolJSON
	h.do("GET", "/v1/tools/"+tl.ID, tok, nil).json(t, &cur)
	if cur.Revision != 1 || cur.Operations != 4 {
		t.Fatalf("while pending the tool is at revision %d with %d operations, want 1 and 4", cur.Revision, cur.Operations)
	}

	// A description that now fails, or answers another kind of document,
	// changes nothing and says why.
	spec.status.Store(http.StatusServiceUnavailable)
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/refresh", tok, nil); r.Status != http.StatusUnprocessableEntity || r.problem(t).Code != "spec-unreachable" {
		t.Errorf("refresh of a failing URL: %d %s", r.Status, r.Body)
	}
	spec.status.Store(0)
	spec.set(`<definitions xmlns="http://schemas.xmlsoap.org/wsdl/"/>`)
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/refresh", tok, nil); r.Status != http.StatusUnprocessableEntity || r.problem(t).Code != "spec-invalid" {
		t.Errorf("refresh answering a WSDL: %d %s", r.Status, r.Body)
	}
	var list struct {
		Revisions []struct {
			Revision int    `json:"revision"`
			Status   string `json:"status"`
			Summary  struct {
				Removed, Changed int
				Breaking         bool
			} `json:"summary"`
		} `json:"revisions"`
	}
	h.do("GET", "/v1/tools/"+tl.ID+"/revisions", h.token("acme", "tools:read"), nil).json(t, &list)
	if len(list.Revisions) != 1 || list.Revisions[0].Status != "pending" || list.Revisions[0].Summary.Removed != 1 ||
		list.Revisions[0].Summary.Changed != 2 || !list.Revisions[0].Summary.Breaking {
		t.Fatalf("revisions after failed refreshes: %+v", list.Revisions)
	}

	// Apply: B's operations; a second apply and an unknown revision refused.
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/revisions/1/apply", h.token("acme", "tools:read"), nil); r.Status != http.StatusForbidden {
		t.Errorf("apply with tools:read: %d", r.Status)
	}
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/revisions/1/apply", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("apply: %d %s", r.Status, r.Body)
	}
	h.do("GET", "/v1/tools/"+tl.ID, tok, nil).json(t, &cur)
	if cur.Revision != 2 || cur.Operations != 3 || cur.BaseURL != "https://issues.example/v2" {
		t.Fatalf("after apply the tool is at revision %d with %d operations at %s, want 2, 3, https://issues.example/v2", cur.Revision, cur.Operations, cur.BaseURL)
	}
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/revisions/1/apply", tok, nil); r.Status != http.StatusConflict {
		t.Errorf("second apply: %d %s", r.Status, r.Body)
	}
	for _, n := range []string{"9", "x"} {
		if r := h.do("POST", "/v1/tools/"+tl.ID+"/revisions/"+n+"/apply", tok, nil); r.Status != http.StatusNotFound {
			t.Errorf("apply of revision %s: %d %s", n, r.Status, r.Body)
		}
	}

	// C only adds (an optional argument, an operation): applied at once.
	spec.set(issuesC)
	got, r = h.refresh(tok, tl.ID)
	if r.Status != http.StatusOK || got.Status != "applied" || got.Breaking || got.Revision != 2 || got.ToolRevision != 3 {
		t.Fatalf("refresh to C: %d %s", r.Status, r.Body)
	}
	if diff := cmp.Diff([]string{"getUser"}, got.Diff.Added); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"listUsers parameter_added sort"}, got.kinds()); diff != "" {
		t.Errorf("changes of C (-want +got):\n%s", diff)
	}
	h.do("GET", "/v1/tools/"+tl.ID, tok, nil).json(t, &cur)
	if cur.Revision != 3 || cur.Operations != 4 {
		t.Fatalf("after C the tool is at revision %d with %d operations, want 3 and 4", cur.Revision, cur.Operations)
	}
	h.do("GET", "/v1/tools/"+tl.ID+"/revisions", tok, nil).json(t, &list)
	if len(list.Revisions) != 2 || list.Revisions[0].Revision != 2 || list.Revisions[0].Status != "applied" || list.Revisions[1].Status != "applied" {
		t.Errorf("revisions after C: %+v", list.Revisions)
	}

	// Audited: each refresh and the apply, with their outcome.
	var page auditPage
	h.do("GET", "/v1/audit/query?resource_id="+tl.ID, h.token("acme", "audit:read"), nil).json(t, &page)
	var actions []string
	for _, rec := range page.Records {
		if rec.Action == "tool.refresh" || rec.Action == "tool.revision.apply" {
			actions = append(actions, rec.Action+" "+string(rec.Outcome))
		}
	}
	slices.Sort(actions)
	// Three refreshes answered (unchanged, B, C), two refused (a failing
	// URL, a WSDL); one apply, then one denied, one conflict, two unknown.
	want = []string{"tool.refresh error", "tool.refresh error", "tool.refresh success", "tool.refresh success", "tool.refresh success",
		"tool.revision.apply denied", "tool.revision.apply error", "tool.revision.apply error", "tool.revision.apply error", "tool.revision.apply success"}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

func TestToolRefreshRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	inline := h.mustRegister(tok, inlineTool(t, "pets"))
	r := h.do("POST", "/v1/tools/"+inline.ID+"/refresh", tok, nil)
	if r.Status != http.StatusUnprocessableEntity || len(r.problem(t).Errors) != 1 || r.problem(t).Errors[0].Field != "spec_url" {
		t.Errorf("refresh of an inline tool: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/tools/tool_unknown/refresh", tok, nil); r.Status != http.StatusNotFound {
		t.Errorf("refresh of an unknown tool: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/tools/tool_unknown/revisions", tok, nil); r.Status != http.StatusNotFound {
		t.Errorf("revisions of an unknown tool: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/tools/"+inline.ID+"/refresh", h.token("acme", "tools:read"), nil); r.Status != http.StatusForbidden {
		t.Errorf("refresh with tools:read: %d", r.Status)
	}
}

// TestToolRefreshGraphQL: a GraphQL schema served as A, then B, which
// makes an argument non-null, changes an argument's type where JSON cannot
// tell (ID to Int is, String to ID is not), removes a field of a result
// and a root field: each named, the revision pending.
func TestToolRefreshGraphQL(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	const sdlA = `type Query { book(id: ID, isbn: String): Book
  books(limit: Int): [Book!]!
  authors: [String!]! }
type Book { id: ID! title: String! price: Float }`
	const sdlB = `type Query { book(id: ID!, isbn: ID): Book
  books(limit: Int): [Book!]! }
type Book { id: ID! title: String! }`
	spec := newVersionedSpec(t, sdlA)
	tl := h.mustRegister(tok, map[string]any{"name": "library", "type": "graphql", "spec_url": spec.URL,
		"endpoint_url": "https://library.example/graphql"})
	spec.set(sdlB)
	got, r := h.refresh(tok, tl.ID)
	if r.Status != http.StatusOK || got.Status != "pending" {
		t.Fatalf("refresh to B: %d %s", r.Status, r.Body)
	}
	if diff := cmp.Diff([]string{"authors"}, got.Diff.Removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	want := []string{
		"book required_added id breaking",
		"book type_changed isbn breaking",
		"book response_field_removed response.price breaking",
		"books response_field_removed response[].price breaking",
	}
	if diff := cmp.Diff(want, got.kinds()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// TestToolRefreshToAnotherHostWaits: a description whose operations do
// not change but whose server moves to another host is kept pending, as
// a breaking one is: a scheduled refresh would otherwise send the tool's
// credentials to whoever the description names. Applied by a person, the
// tool moves.
func TestToolRefreshToAnotherHostWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	spec := newVersionedSpec(t, issuesA)
	tl := h.mustRegister(tok, map[string]any{"name": "issues", "type": "openapi", "spec_url": spec.URL})

	spec.set(strings.Replace(issuesA, "https://issues.example/v1", "https://elsewhere.example/v1", 1))
	got, r := h.refresh(tok, tl.ID)
	if r.Status != http.StatusOK || got.Status != "pending" || got.Breaking || got.Revision != 1 || got.ToolRevision != 1 {
		t.Fatalf("refresh to another host: %d %s, want pending, not breaking, revision 1", r.Status, r.Body)
	}
	var cur toolJSON
	h.do("GET", "/v1/tools/"+tl.ID, tok, nil).json(t, &cur)
	if cur.Revision != 1 || cur.BaseURL != "https://issues.example/v1" {
		t.Fatalf("while pending the tool is at revision %d at %s, want 1 at https://issues.example/v1", cur.Revision, cur.BaseURL)
	}
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/revisions/1/apply", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("apply: %d %s", r.Status, r.Body)
	}
	h.do("GET", "/v1/tools/"+tl.ID, tok, nil).json(t, &cur)
	if cur.Revision != 2 || cur.BaseURL != "https://elsewhere.example/v1" {
		t.Fatalf("after apply the tool is at revision %d at %s, want 2 at https://elsewhere.example/v1", cur.Revision, cur.BaseURL)
	}

	// Another path on the same host is applied at once.
	spec.set(strings.Replace(issuesA, "https://issues.example/v1", "https://elsewhere.example/v2", 1))
	if got, r := h.refresh(tok, tl.ID); r.Status != http.StatusOK || got.Status != "applied" {
		t.Fatalf("refresh to another path: %d %s, want applied", r.Status, r.Body)
	}
}
