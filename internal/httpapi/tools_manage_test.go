package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

func TestToolListPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	var ids []string
	for _, name := range []string{"one", "two", "three"} {
		ids = append(ids, h.mustRegister(tok, inlineTool(t, name)).ID)
	}
	h.mustRegister(h.token("other", "tools:write"), inlineTool(t, "elsewhere"))

	type page struct {
		Tools      []toolJSON `json:"tools"`
		NextCursor *string    `json:"next_cursor"`
	}
	var got []string
	cursor, pages := "", 0
	for {
		var p page
		r := h.do("GET", "/v1/tools?limit=2&cursor="+cursor, tok, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		r.json(t, &p)
		pages++
		if len(p.Tools) > 2 {
			t.Fatalf("page of %d tools with limit=2", len(p.Tools))
		}
		for _, tl := range p.Tools {
			got = append(got, tl.ID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
		if pages > 3 {
			t.Fatal("next_cursor never ends")
		}
	}
	slices.Sort(ids)
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("tools over all pages (-want +got):\n%s", diff)
	}
	if pages != 2 {
		t.Errorf("%d pages of limit 2 for 3 tools, want 2", pages)
	}
	if r := h.do("GET", "/v1/tools?limit=0", tok, nil); r.Status != 422 || r.problem(t).Errors[0].Field != "limit" {
		t.Errorf("limit=0: %d %s", r.Status, r.Body)
	}
}

func TestToolOperationsSearch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	tl := h.mustRegister(tok, inlineTool(t, "pets"))
	for _, tc := range []struct {
		q     string
		first string   // the best result
		all   []string // every result, in order, when not nil
	}{
		{"", "createPet", []string{"createPet", "delete_pets__petId_", "listPets", "showPetById"}}, // by id
		{"LISTPETS", "listPets", nil},    // the id, however written
		{"list_pets", "listPets", nil},   // the id, however written
		{"specific", "showPetById", nil}, // summary
		{"store", "createPet", nil},      // description ("the STORE")
		{"create pet", "createPet", nil}, // words, not a phrase
		{"pets delete", "delete_pets__petId_", nil},
		{"webhook", "", []string{}}, // webhooks are not operations
		{"100%_", "", []string{}},
	} {
		t.Run("q="+tc.q, func(t *testing.T) {
			var page opsPage
			r := h.do("GET", "/v1/tools/"+tl.ID+"/operations?q="+url.QueryEscape(tc.q), tok, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			r.json(t, &page)
			ids := page.ids()
			if page.ToolID != tl.ID || (tc.first != "" && (len(ids) == 0 || ids[0] != tc.first)) {
				t.Errorf("tool %s, operations %v: want %s first", page.ToolID, ids, tc.first)
			}
			if tc.all != nil && !slices.Equal(tc.all, ids) {
				t.Errorf("operations %v, want %v", ids, tc.all)
			}
			for i, op := range page.Operations {
				if len(op.Input) != 0 {
					t.Errorf("%s has an input_schema without view=full", op.ID)
				}
				if tc.q != "" && (op.Score == nil || i > 0 && *op.Score > *page.Operations[i-1].Score) {
					t.Errorf("%s: score %v out of order", op.ID, op.Score)
				}
			}
		})
	}

	t.Run("pages, kind and view=full", func(t *testing.T) {
		var seen []string
		cursor := ""
		for range 5 {
			var page opsPage
			h.do("GET", "/v1/tools/"+tl.ID+"/operations?q=pet&view=full&limit=3&cursor="+cursor, tok, nil).json(t, &page)
			for _, op := range page.Operations {
				seen = append(seen, op.ID)
				if len(op.Input) == 0 {
					t.Errorf("view=full: %s has no input_schema", op.ID)
				}
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
		slices.Sort(seen)
		if want := []string{"createPet", "delete_pets__petId_", "listPets", "showPetById"}; !slices.Equal(seen, want) {
			t.Errorf("pages gave %v, want %v once each", seen, want)
		}
		var page opsPage
		h.do("GET", "/v1/tools/"+tl.ID+"/operations?kind=write", tok, nil).json(t, &page)
		if ids := page.ids(); !slices.Equal(ids, []string{"createPet", "delete_pets__petId_"}) {
			t.Errorf("kind=write: %v", ids)
		}
	})
}

func TestToolUpdateAndDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	files := newSpecServer(t, "petstore31.yaml")
	body := map[string]any{"name": "pets", "type": "openapi", "spec_url": files.URL + "/petstore31.yaml"}
	first := h.mustRegister(tok, body)

	// The served document changes: PUT fetches it again.
	users := testdata(t, "users-swagger20.yaml")
	files.set("/petstore31.yaml", users)
	r := h.do("PUT", "/v1/tools/"+first.ID, tok, body)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	var updated toolJSON
	r.json(t, &updated)
	if updated.ID != first.ID || updated.Revision != 2 || updated.Operations != 5 || updated.SpecSHA256 != sha256Hex(users) ||
		updated.BaseURL != "https://users.example.com/v2" || updated.CreatedAt != first.CreatedAt || updated.IndexedAt < first.IndexedAt {
		t.Errorf("after PUT: %+v\nfirst: %+v", updated, first)
	}
	var read toolJSON
	h.do("GET", "/v1/tools/"+first.ID, tok, nil).json(t, &read)
	if read.Revision != 2 || len(read.OperationList) != 5 || read.OperationList[0].ID != "createUser" {
		t.Errorf("GET after PUT: revision %d, operation_list %+v", read.Revision, read.OperationList)
	}

	renamed := map[string]any{"name": "pets2", "type": "openapi", "spec_url": files.URL + "/petstore31.yaml"}
	r = h.do("PUT", "/v1/tools/"+first.ID, tok, renamed)
	if r.Status != 422 {
		t.Fatalf("PUT with a new name: %d %s", r.Status, r.Body)
	}
	if d := r.problem(t); d.Code != problem.ValidationFailed || len(d.Errors) != 1 || d.Errors[0].Field != "name" {
		t.Errorf("PUT with a new name: %+v", d)
	}
	if r := h.do("PUT", "/v1/tools/tool_01JD0000000000000000000000", tok, body); r.Status != 404 || r.problem(t).Code != problem.NotFound {
		t.Errorf("PUT of an unknown tool: %d %s", r.Status, r.Body)
	}

	// A tool an agent version names cannot be deleted.
	useTool(t, h, "acme", "support", "1", "pets")
	if r := h.do("DELETE", "/v1/tools/"+first.ID, tok, nil); r.Status != 409 || r.problem(t).Code != problem.Conflict {
		t.Fatalf("DELETE of a tool in use: %d %s", r.Status, r.Body)
	}
	other := h.mustRegister(tok, inlineTool(t, "spare"))
	r = h.do("DELETE", "/v1/tools/"+other.ID, tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	var deleted map[string]any
	r.json(t, &deleted)
	if diff := cmp.Diff(map[string]any{"id": other.ID, "deleted": true}, deleted); diff != "" {
		t.Errorf("DELETE answer (-want +got):\n%s", diff)
	}
	for _, req := range [][2]string{{"GET", ""}, {"GET", "/operations"}, {"DELETE", ""}} {
		if r := h.do(req[0], "/v1/tools/"+other.ID+req[1], tok, nil); r.Status != 404 || r.problem(t).Code != problem.NotFound {
			t.Errorf("%s after DELETE: %d %s", req[0]+" "+req[1], r.Status, r.Body)
		}
	}
	// The name is free again.
	h.mustRegister(tok, inlineTool(t, "spare"))
}

// useTool records that an agent version names a tool, as deploying it does.
func useTool(t *testing.T, h *harness, tenant, agent, version, toolName string) {
	t.Helper()
	if _, err := h.rawDB().Exec(`INSERT INTO agent_version_tools (tenant, agent, version, tool_name) VALUES (?, ?, ?, ?)`,
		tenant, agent, version, toolName); err != nil {
		t.Fatal(err)
	}
}

func TestToolsOfAnotherTenantAreNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.token("tenant-a", "tools:write tools:read")
	b := h.token("tenant-b", "tools:write tools:read")
	tl := h.mustRegister(a, inlineTool(t, "pets"))
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/tools/" + tl.ID, nil},
		{"GET", "/v1/tools/" + tl.ID + "/operations?q=pet", nil},
		{"PUT", "/v1/tools/" + tl.ID, inlineTool(t, "pets")},
		{"DELETE", "/v1/tools/" + tl.ID, nil},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := h.do(tc.method, tc.path, b, tc.body)
			if r.Status != http.StatusNotFound {
				t.Fatalf("status %d, want 404: %s", r.Status, r.Body)
			}
			if d := r.problem(t); d.Code != problem.NotFound || strings.Contains(d.Detail, "tenant-a") {
				t.Errorf("problem %+v", d)
			}
		})
	}
	var page struct{ Tools []toolJSON }
	h.do("GET", "/v1/tools", b, nil).json(t, &page)
	if len(page.Tools) != 0 {
		t.Errorf("tenant-b lists %+v", page.Tools)
	}
	// Tenant B may use the same name, and tenant A's tool is untouched.
	h.mustRegister(b, inlineTool(t, "pets"))
	var read toolJSON
	if r := h.do("GET", "/v1/tools/"+tl.ID, a, nil); r.Status != 200 {
		t.Fatalf("tenant-a GET: %d %s", r.Status, r.Body)
	} else if r.json(t, &read); read.Revision != 1 {
		t.Errorf("tenant-a's tool changed: %+v", read)
	}
}

// exchange sends one request without failing the test, for goroutines.
func exchange(c *http.Client, base, method, path, token string, body []byte, headers ...string) (response, error) {
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// slowSpec serves doc once released: arrived is closed when the first
// request reaches it, release lets every request through.
type slowSpec struct {
	*httptest.Server
	arrived chan struct{}
	release func()
}

func newSlowSpec(t testing.TB, doc []byte) *slowSpec {
	t.Helper()
	s := &slowSpec{arrived: make(chan struct{})}
	released := make(chan struct{})
	var arrive, free sync.Once
	s.release = func() { free.Do(func() { close(released) }) }
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrive.Do(func() { close(s.arrived) })
		select {
		case <-released:
			w.Write(doc)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(s.Close)
	t.Cleanup(s.release) // runs first: a failed test must not leave the handler waiting
	return s
}

// racePair sends body with key to first and, once first's spec fetch is
// waiting, to second; it returns both answers after releasing the fetch.
func racePair(t *testing.T, spec *slowSpec, first, second func() (response, error)) (response, response) {
	t.Helper()
	type result struct {
		r   response
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := first()
		done <- result{r, err}
	}()
	select {
	case <-spec.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never fetched the spec")
	}
	r2, err := second()
	spec.release()
	if err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.r, r2
}

// checkOneCreated checks that of two answers to one key exactly one is
// 201 and the other 409 idempotency-key-in-use with Retry-After.
func checkOneCreated(t *testing.T, a, b response) {
	t.Helper()
	created, busy := a, b
	if b.Status == http.StatusCreated {
		created, busy = b, a
	}
	if created.Status != http.StatusCreated || busy.Status != http.StatusConflict {
		t.Fatalf("statuses %d and %d, want one 201 and one 409:\n%s\n%s", a.Status, b.Status, a.Body, b.Body)
	}
	if d := busy.problem(t); d.Code != problem.IdempotencyKeyInUse || busy.Header.Get("Retry-After") == "" {
		t.Errorf("409 %+v, Retry-After %q", d, busy.Header.Get("Retry-After"))
	}
}

func TestToolRegisterIdempotently(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	files := newSpecServer(t, "petstore31.yaml")
	body := map[string]any{"name": "pets", "type": "openapi", "spec_url": files.URL + "/petstore31.yaml"}

	first := h.do("POST", "/v1/tools", tok, body, "Idempotency-Key", "reg-1")
	if first.Status != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v %s", first.Status, first.Header, first.Body)
	}
	again := h.do("POST", "/v1/tools", tok, body, "Idempotency-Key", "reg-1")
	if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %v %s", again.Status, again.Header, again.Body)
	}
	if diff := cmp.Diff(string(first.Body), string(again.Body)); diff != "" {
		t.Errorf("replayed body (-first +repeat):\n%s", diff)
	}
	if a, b := first.Header.Get("Location"), again.Header.Get("Location"); a == "" || a != b {
		t.Errorf("Location %q, replayed %q", a, b)
	}
	if n := files.gets.Load(); n != 1 {
		t.Errorf("the spec was fetched %d times, want 1", n)
	}
	var page struct{ Tools []toolJSON }
	h.do("GET", "/v1/tools", tok, nil).json(t, &page)
	if len(page.Tools) != 1 {
		t.Errorf("%d tools after a repeated registration, want 1", len(page.Tools))
	}
	body["policy_class"] = "other"
	if r := h.do("POST", "/v1/tools", tok, body, "Idempotency-Key", "reg-1"); r.Status != 422 || r.problem(t).Code != problem.IdempotencyKeyReused {
		t.Errorf("same key, other body: %d %s", r.Status, r.Body)
	}
}

func TestToolConcurrentRegistrationsWithOneKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	spec := newSlowSpec(t, testdata(t, "petstore31.yaml"))
	body, _ := json.Marshal(map[string]any{"name": "pets", "type": "openapi", "spec_url": spec.URL + "/petstore31.yaml"})
	post := func() (response, error) {
		return exchange(h.client, h.URL, "POST", "/v1/tools", tok, body, "Idempotency-Key", "race")
	}
	a, b := racePair(t, spec, post, post)
	checkOneCreated(t, a, b)

	var page struct{ Tools []toolJSON }
	h.do("GET", "/v1/tools", tok, nil).json(t, &page)
	if len(page.Tools) != 1 {
		t.Errorf("%d tools, want 1", len(page.Tools))
	}
	// Once the first is done, a repeat gets its answer.
	if r, err := post(); err != nil || r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("repeat after completion: %d %v (%v)", r.Status, r.Header, err)
	}
}

func TestToolRegistrationIsAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write")
	tl, r := h.register(tok, inlineTool(t, "pets"))
	if r.Status != http.StatusCreated {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var page auditPage
	q := h.do("GET", "/v1/audit/query?resource_id="+tl.ID, h.token("acme", "audit:read"), nil)
	if q.Status != http.StatusOK {
		t.Fatalf("audit query: %d %s", q.Status, q.Body)
	}
	q.json(t, &page)
	if len(page.Records) != 1 {
		t.Fatalf("%d records for %s, want exactly 1: %+v", len(page.Records), tl.ID, page.Records)
	}
	rec := page.Records[0]
	want := audit.Record{
		Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "tool.create",
		Resource: audit.Resource{Type: "tool", ID: tl.ID}, Outcome: audit.Success, Status: 201,
		RequestID: r.Header.Get("Request-Id"),
	}
	got := audit.Record{Tenant: rec.Tenant, Actor: rec.Actor, Action: rec.Action, Resource: rec.Resource,
		Outcome: rec.Outcome, Status: rec.Status, RequestID: rec.RequestID}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit record (-want +got):\n%s", diff)
	}
	if strings.Contains(string(rec.Details), "paths:") {
		t.Errorf("the record holds the spec: %s", rec.Details)
	}
	// A refused registration leaves no tool and a record of the refusal only.
	if _, r := h.register(tok, inlineTool(t, "pets")); r.Status != 409 {
		t.Fatalf("duplicate: %d", r.Status)
	}
	h.do("GET", "/v1/audit/query?action=tool.create", h.token("acme", "audit:read"), nil).json(t, &page)
	var outcomes []string
	for _, rec := range page.Records {
		outcomes = append(outcomes, rec.Outcome+" "+strconv.Itoa(rec.Status)+" "+rec.Resource.ID)
	}
	if diff := cmp.Diff([]string{"error 409 ", "success 201 " + tl.ID}, outcomes); diff != "" {
		t.Errorf("tool.create records, newest first (-want +got):\n%s", diff)
	}
}
