package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

func newTool(tenant, name string) *tool.Tool {
	return &tool.Tool{
		ID: ids.New(ids.Tool), Tenant: tenant, Name: name, Type: tool.OpenAPI,
		SpecURL: "https://api.example.com/openapi.json", EndpointURL: "https://api.example.com",
		Auth:        tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://PETS_SECRET", ClientID: "pets", Scopes: []string{"read", "write"}},
		PolicyClass: "standard", SideEffects: []string{"create", "update"}, IdempotencySupport: true,
		SpecSHA256: "ab12", Revision: 1, OperationCount: 3, BaseURL: "https://api.example.com/v1",
		SpecTokenURL: "https://auth.example.com/token",
		Limits: &tool.Limits{Rate: "50/s", Concurrency: 8, Timeout: "10s",
			Retries: &tool.RetryLimits{Max: 3, On: []int{429, 503}},
			Circuit: &tool.CircuitLimits{Failures: 5, Window: "30s", OpenFor: "30s"}},
		OperationLimits: map[string]tool.Limits{"createPet": {Concurrency: 1}},
		Redact: &redact.Config{Fields: []string{"/response/body/owner/email"}, Headers: []string{"X-Customer"},
			Detect: []string{redact.IBAN}},
		IndexedAt: base, CreatedAt: base, UpdatedAt: base,
	}
}

func petOps() []tool.Operation {
	return []tool.Operation{
		{ID: "listPets", Kind: tool.Read, Summary: "List all pets", Input: json.RawMessage(`{"type":"object"}`),
			HTTP: &tool.HTTPBinding{Method: "GET", Path: "/pets", Params: []tool.Param{{Name: "limit", In: "query", Schema: json.RawMessage(`{"type":"integer"}`)}}}},
		{ID: "createPet", Kind: tool.Write, Summary: "Create a pet", Description: "Adds a 100% new animal",
			HTTP: &tool.HTTPBinding{Method: "POST", Path: "/pets", Body: &tool.Body{Required: true, ContentType: "application/json"}}},
		{ID: "getOwner", Kind: tool.Read, Summary: "Owner by id", Description: "Returns the PERSON who owns a pet",
			HTTP: &tool.HTTPBinding{Method: "GET", Path: "/owners/{id}", Params: []tool.Param{{Name: "id", In: "path", Required: true}}}},
	}
}

func opIDs(ops []tool.Operation) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.ID)
	}
	return out
}

func testToolCRUD(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	want := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, want, petOps(), nil), "create")

	got, err := s.Tool(ctx, "acme", want.ID)
	must(t, err, "tool")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tool (-want +got):\n%s", diff)
	}
	got, err = s.ToolByName(ctx, "acme", "pets")
	must(t, err, "tool by name")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToolByName (-want +got):\n%s", diff)
	}
	ops, err := s.Operations(ctx, "acme", want.ID, "")
	must(t, err, "operations")
	wantOps := petOps()
	if diff := cmp.Diff([]tool.Operation{wantOps[1], wantOps[2], wantOps[0]}, ops); diff != "" {
		t.Errorf("Operations ordered by id (-want +got):\n%s", diff)
	}

	upd := *want
	upd.Revision, upd.OperationCount, upd.SideEffects = 2, 1, []string{}
	upd.Auth = tool.Auth{Type: tool.AuthNone}
	upd.UpdatedAt = base.Add(1000)
	newOps := []tool.Operation{{ID: "deletePet", Kind: tool.Write, HTTP: &tool.HTTPBinding{Method: "DELETE", Path: "/pets/{id}"}}}
	must(t, s.UpdateTool(ctx, &upd, newOps, nil), "update")
	got, err = s.Tool(ctx, "acme", want.ID)
	must(t, err, "tool after update")
	if diff := cmp.Diff(&upd, got); diff != "" {
		t.Errorf("Tool after update (-want +got):\n%s", diff)
	}
	ops, err = s.Operations(ctx, "acme", want.ID, "")
	must(t, err, "operations after update")
	if diff := cmp.Diff(newOps, ops); diff != "" {
		t.Errorf("Operations after update (-want +got):\n%s", diff)
	}

	must(t, s.DeleteTool(ctx, "acme", want.ID, nil), "delete")
	_, err = s.Tool(ctx, "acme", want.ID)
	wantCode(t, err, problem.NotFound, "tool after delete")
	_, err = s.ToolByName(ctx, "acme", "pets")
	wantCode(t, err, problem.NotFound, "tool by name after delete")
	_, err = s.Operations(ctx, "acme", want.ID, "")
	wantCode(t, err, problem.NotFound, "operations after delete")
	wantCode(t, s.DeleteTool(ctx, "acme", want.ID, nil), problem.NotFound, "second delete")
	wantCode(t, s.UpdateTool(ctx, &upd, nil, nil), problem.NotFound, "update after delete")

	// The name is free again.
	must(t, s.CreateTool(ctx, newTool("acme", "pets"), petOps(), nil), "create again")
}

func testToolNameConflict(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	first, other := newTool("acme", "pets"), newTool("acme", "shop")
	must(t, s.CreateTool(ctx, first, petOps(), nil), "create")
	must(t, s.CreateTool(ctx, other, nil, nil), "create other")
	rec := record("acme", "tool.create", 1)
	wantCode(t, s.CreateTool(ctx, newTool("acme", "pets"), petOps(), rec), problem.Conflict, "same name")

	renamed := *other
	renamed.Name = "pets"
	wantCode(t, s.UpdateTool(ctx, &renamed, nil, nil), problem.Conflict, "rename onto a taken name")

	// Another tenant may use the name.
	must(t, s.CreateTool(ctx, newTool("globex", "pets"), petOps(), nil), "same name, other tenant")

	// The failed create left no audit record behind.
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query audit")
	if len(recs) != 0 {
		t.Errorf("a failed create appended %d audit records, want 0", len(recs))
	}
	ops, err := s.Operations(ctx, "acme", first.ID, "")
	must(t, err, "operations")
	if len(ops) != 3 {
		t.Errorf("operations after failed create: %v, want the first tool's 3", opIDs(ops))
	}
}

func testToolTenantIsolation(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	a := newTool("tenant-a", "pets")
	must(t, s.CreateTool(ctx, a, petOps(), nil), "create")

	_, err := s.Tool(ctx, "tenant-b", a.ID)
	wantCode(t, err, problem.NotFound, "B reads A's tool")
	_, err = s.ToolByName(ctx, "tenant-b", "pets")
	wantCode(t, err, problem.NotFound, "B reads A's tool by name")
	_, err = s.Operations(ctx, "tenant-b", a.ID, "")
	wantCode(t, err, problem.NotFound, "B lists A's operations")
	_, err = s.Operation(ctx, "tenant-b", a.ID, "listPets")
	wantCode(t, err, problem.NotFound, "B reads A's operation")
	list, err := s.ListTools(ctx, "tenant-b", tool.ListOptions{})
	must(t, err, "B lists tools")
	if len(list) != 0 {
		t.Errorf("B lists %d tools, want 0", len(list))
	}

	steal := *a
	steal.Tenant, steal.Revision = "tenant-b", 9
	wantCode(t, s.UpdateTool(ctx, &steal, nil, nil), problem.NotFound, "B updates A's tool")
	wantCode(t, s.DeleteTool(ctx, "tenant-b", a.ID, nil), problem.NotFound, "B deletes A's tool")

	got, err := s.Tool(ctx, "tenant-a", a.ID)
	must(t, err, "A reads its tool")
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("A's tool changed by B (-want +got):\n%s", diff)
	}
	ops, err := s.Operations(ctx, "tenant-a", a.ID, "")
	must(t, err, "A's operations")
	if len(ops) != 3 {
		t.Errorf("A's operations = %v, want 3", opIDs(ops))
	}
}

func testToolList(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var want []string
	for i := range 7 {
		tl := newTool("acme", fmt.Sprintf("tool-%d", i))
		must(t, s.CreateTool(ctx, tl, nil, nil), "create")
		want = append(want, tl.ID)
	}
	must(t, s.CreateTool(ctx, newTool("globex", "tool-x"), nil, nil), "create other tenant")

	var got []string
	after := ""
	for range 10 {
		page, err := s.ListTools(ctx, "acme", tool.ListOptions{Limit: 3, After: after})
		must(t, err, "list")
		if len(page) > 3 {
			t.Fatalf("page of %d tools, limit 3", len(page))
		}
		for _, tl := range page {
			got = append(got, tl.ID)
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged ids (-want +got):\n%s", diff)
	}
	all, err := s.ListTools(ctx, "acme", tool.ListOptions{})
	must(t, err, "list default")
	if len(all) != 7 {
		t.Errorf("default limit listed %d tools, want 7", len(all))
	}
}

func testToolOperations(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	tl := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, tl, petOps(), nil), "create")
	tests := []struct {
		q    string
		want []string
	}{
		{"", []string{"createPet", "getOwner", "listPets"}},
		{"PET", []string{"createPet", "getOwner", "listPets"}},
		{"listp", []string{"listPets"}},
		{"all pets", []string{"listPets"}},
		{"person", []string{"getOwner"}},
		{"100%", []string{"createPet"}},
		{"%", []string{"createPet"}},
		{"_", nil},
		{"nothing", nil},
	}
	for _, tc := range tests {
		t.Run(tc.q, func(t *testing.T) {
			ops, err := s.Operations(ctx, "acme", tl.ID, tc.q)
			must(t, err, "operations")
			if diff := cmp.Diff(tc.want, opIDs(ops)); diff != "" {
				t.Errorf("Operations(%q) (-want +got):\n%s", tc.q, diff)
			}
		})
	}
	op, err := s.Operation(ctx, "acme", tl.ID, "getOwner")
	must(t, err, "operation")
	if diff := cmp.Diff(&petOps()[2], op); diff != "" {
		t.Errorf("Operation (-want +got):\n%s", diff)
	}
	_, err = s.Operation(ctx, "acme", tl.ID, "nope")
	wantCode(t, err, problem.NotFound, "unknown operation")
	_, err = s.Operation(ctx, "acme", "tool_nope", "getOwner")
	wantCode(t, err, problem.NotFound, "operation of unknown tool")
}

func testToolDeleteInUse(t *testing.T, s Store, h Hooks) {
	if h.UseTool == nil {
		t.Skip("no UseTool hook")
	}
	ctx := ctxOf(t)
	tl := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, tl, petOps(), nil), "create")
	h.UseTool(t, s, "globex", "bot", "v1", "pets") // another tenant's agent does not count
	must(t, s.DeleteTool(ctx, "acme", tl.ID, nil), "delete unused")

	tl = newTool("acme", "pets")
	must(t, s.CreateTool(ctx, tl, petOps(), nil), "create again")
	h.UseTool(t, s, "acme", "bot", "v2", "pets")
	rec := record("acme", "tool.delete", 1)
	wantCode(t, s.DeleteTool(ctx, "acme", tl.ID, rec), problem.Conflict, "delete in use")
	if _, err := s.Tool(ctx, "acme", tl.ID); err != nil {
		t.Errorf("tool gone after refused delete: %v", err)
	}
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query audit")
	if len(recs) != 0 {
		t.Errorf("a refused delete appended %d audit records, want 0", len(recs))
	}
}

// testToolRevisions checks the snapshots a resume compiles against: an
// update keeps the revision it replaces and those an unfinished workflow
// started with, drops the others, and a delete drops all; a workflow keeps
// the revisions it started with.
func testToolRevisions(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	pets := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, pets, petOps(), nil), "create")
	_, _, err := s.ToolRevision(ctx, "acme", "pets", 1)
	wantCode(t, err, problem.NotFound, "the current revision, never replaced")

	w := newWorkflow("acme", "triage", "replica-a", 0)
	w.ToolRevisions = map[string]int{"pets": 1}
	create(t, s, w)
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if diff := cmp.Diff(w.ToolRevisions, got.ToolRevisions); diff != "" {
		t.Errorf("ToolRevisions after create (-want +got):\n%s", diff)
	}
	claimed, err := s.ClaimExpired(ctx, "replica-b", base.Add(2*time.Hour), base.Add(3*time.Hour), 10)
	must(t, err, "claim")
	if len(claimed) != 1 || !cmp.Equal(w.ToolRevisions, claimed[0].ToolRevisions) {
		t.Fatalf("claimed %d workflows, tool revisions %v; want 1 with %v", len(claimed), claimed, w.ToolRevisions)
	}

	update := func(rev int, class string) {
		t.Helper()
		upd := *pets
		upd.Revision, upd.PolicyClass, upd.OperationCount = rev, class, 1
		upd.UpdatedAt = base.Add(time.Duration(rev) * time.Second)
		ops := []tool.Operation{{ID: fmt.Sprintf("op%d", rev), Kind: tool.Write, HTTP: &tool.HTTPBinding{Method: "POST", Path: "/x"}}}
		must(t, s.UpdateTool(ctx, &upd, ops, nil), fmt.Sprintf("update to revision %d", rev))
	}
	kept := func(want ...int) {
		t.Helper()
		var got []int
		for rev := 1; rev <= 6; rev++ {
			_, _, err := s.ToolRevision(ctx, "acme", "pets", rev)
			if err == nil {
				got = append(got, rev)
			} else if !problem.Is(err, problem.NotFound) {
				t.Fatalf("revision %d: %v", rev, err)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("revisions kept (-want +got):\n%s", diff)
		}
	}

	update(2, "restricted")
	old, ops, err := s.ToolRevision(ctx, "acme", "pets", 1)
	must(t, err, "revision 1 after an update")
	if diff := cmp.Diff(pets, old); diff != "" {
		t.Errorf("revision 1 (-want +got):\n%s", diff)
	}
	wantOps := petOps()
	if diff := cmp.Diff([]tool.Operation{wantOps[1], wantOps[2], wantOps[0]}, ops); diff != "" {
		t.Errorf("operations of revision 1, ordered by id (-want +got):\n%s", diff)
	}
	_, _, err = s.ToolRevision(ctx, "globex", "pets", 1)
	wantCode(t, err, problem.NotFound, "another tenant's snapshot")

	update(3, "standard")
	kept(1, 2)
	// Revision 2 was only replaced; 1 is the running workflow's.
	update(4, "standard")
	kept(1, 3)
	w.Owner = "replica-b"
	finish(t, s, "replica-b", w)
	update(5, "standard")
	kept(4)
	must(t, s.DeleteTool(ctx, "acme", pets.ID, nil), "delete")
	kept()
}
