package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// testToolRefreshes checks tool drift's revisions: an applied refresh
// replaces the tool and its operations at once; a pending one keeps its
// operations until applied, is superseded by a later pending one, cannot
// be applied twice nor after the tool left its base revision; the list is
// newest first; a delete drops them.
func testToolRefreshes(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	pets := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, pets, petOps(), nil), "create")
	_, err := s.ToolRefreshes(ctx, "acme", "tool_unknown")
	wantCode(t, err, problem.NotFound, "refreshes of an unknown tool")
	_, _, err = s.ToolRefresh(ctx, "acme", pets.ID, 1)
	wantCode(t, err, problem.NotFound, "an unknown refresh")

	// An applied refresh: one operation more, the tool at revision 2.
	ops := append(petOps(), tool.Operation{ID: "zooKeepers", Kind: tool.Read, Input: []byte(`{"type":"object"}`)})
	upd := *pets
	upd.Revision, upd.OperationCount, upd.SpecSHA256 = 2, len(ops), "sha-2"
	upd.UpdatedAt = base.Add(time.Minute)
	applied := &tool.Refresh{Tenant: "acme", ToolID: pets.ID, Status: tool.RefreshApplied, BaseRevision: 1, ToolRevision: 2,
		Diff:      tool.Diff{Added: []string{"zooKeepers"}, Removed: []string{}, Changed: []tool.ChangedOperation{}},
		CreatedAt: upd.UpdatedAt, AppliedAt: &upd.UpdatedAt, SpecSHA256: "sha-2"}
	must(t, s.AddToolRefresh(ctx, applied, &upd, ops, &audit.Record{Tenant: "acme", Action: "tool.refresh", Outcome: audit.Success, Status: 200}), "applied refresh")
	if applied.N != 1 {
		t.Fatalf("the first refresh is numbered %d, want 1", applied.N)
	}
	got, err := s.Tool(ctx, "acme", pets.ID)
	must(t, err, "tool")
	if got.Revision != 2 || got.SpecSHA256 != "sha-2" {
		t.Fatalf("after an applied refresh the tool is at revision %d (sha %q), want 2 (sha-2)", got.Revision, got.SpecSHA256)
	}
	cur, err := s.Operations(ctx, "acme", pets.ID, "")
	must(t, err, "operations")
	if diff := cmp.Diff(opIDs(ops), opIDs(cur), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Fatalf("operations after an applied refresh (-want +got):\n%s", diff)
	}
	// An applied refresh taken against a revision the tool left: refused.
	stale := *applied
	stale.BaseRevision = 1
	again := upd
	again.Revision = 3
	wantCode(t, s.AddToolRefresh(ctx, &stale, &again, ops, nil), problem.Conflict, "an applied refresh against revision 1 of a tool at 2")

	// Two pending refreshes: the second supersedes the first.
	pendingOps := petOps()[:1]
	pending := func(at time.Duration) *tool.Refresh {
		return &tool.Refresh{Tenant: "acme", ToolID: pets.ID, Status: tool.RefreshPending, BaseRevision: 2,
			Diff:      tool.Diff{Added: []string{}, Removed: []string{"zooKeepers"}, Changed: []tool.ChangedOperation{}},
			CreatedAt: base.Add(at), SpecSHA256: "sha-3", BaseURL: "https://pets.example/v3"}
	}
	p1, p2 := pending(2*time.Minute), pending(3*time.Minute)
	must(t, s.AddToolRefresh(ctx, p1, nil, pendingOps, nil), "pending refresh")
	must(t, s.AddToolRefresh(ctx, p2, nil, pendingOps, nil), "second pending refresh")
	if p1.N != 2 || p2.N != 3 {
		t.Fatalf("pending refreshes numbered %d and %d, want 2 and 3", p1.N, p2.N)
	}
	list, err := s.ToolRefreshes(ctx, "acme", pets.ID)
	must(t, err, "list")
	var states []string
	for _, r := range list {
		states = append(states, r.Status)
	}
	if diff := cmp.Diff([]string{tool.RefreshPending, tool.RefreshSuperseded, tool.RefreshApplied}, states); diff != "" {
		t.Fatalf("refresh states, newest first (-want +got):\n%s", diff)
	}
	if list[2].AppliedAt == nil || !list[2].AppliedAt.Equal(upd.UpdatedAt) || list[2].ToolRevision != 2 {
		t.Errorf("the applied refresh reads back as %+v", list[2])
	}
	if diff := cmp.Diff(applied.Diff, list[2].Diff); diff != "" {
		t.Errorf("the diff read back (-want +got):\n%s", diff)
	}
	r, kept, err := s.ToolRefresh(ctx, "acme", pets.ID, 3)
	must(t, err, "pending refresh")
	if r.BaseURL != "https://pets.example/v3" || r.AppliedAt != nil || len(kept) != 1 || kept[0].ID != pendingOps[0].ID {
		t.Fatalf("pending refresh %+v keeps operations %v", r, opIDs(kept))
	}
	if _, kept, _ := s.ToolRefresh(ctx, "acme", pets.ID, 2); len(kept) != 0 {
		t.Errorf("a superseded refresh keeps %d operations", len(kept))
	}
	// Applying: the superseded one is refused, the pending one applies once.
	next := upd
	next.Revision, next.OperationCount, next.SpecSHA256 = 3, 1, "sha-3"
	next.UpdatedAt = base.Add(4 * time.Minute)
	wantCode(t, s.ApplyToolRefresh(ctx, &next, 2, kept, nil), problem.Conflict, "apply of a superseded refresh")
	must(t, s.ApplyToolRefresh(ctx, &next, 3, kept, nil), "apply")
	wantCode(t, s.ApplyToolRefresh(ctx, &next, 3, kept, nil), problem.Conflict, "a second apply")
	got, err = s.Tool(ctx, "acme", pets.ID)
	must(t, err, "tool")
	cur, err = s.Operations(ctx, "acme", pets.ID, "")
	must(t, err, "operations")
	if got.Revision != 3 || len(cur) != 1 {
		t.Fatalf("after apply the tool is at revision %d with %d operations, want 3 and 1", got.Revision, len(cur))
	}
	r, _, err = s.ToolRefresh(ctx, "acme", pets.ID, 3)
	must(t, err, "applied refresh")
	if r.Status != tool.RefreshApplied || r.ToolRevision != 3 || r.AppliedAt == nil {
		t.Errorf("refresh 3 after apply: %+v", r)
	}
	// A pending refresh against a base the tool has left does not apply.
	p4 := pending(5 * time.Minute)
	must(t, s.AddToolRefresh(ctx, p4, nil, pendingOps, nil), "pending on an old base")
	late := next
	late.Revision = 4
	wantCode(t, s.ApplyToolRefresh(ctx, &late, p4.N, pendingOps, nil), problem.Conflict, "apply against a base the tool left")

	// Other tenants see none; a delete drops them.
	_, err = s.ToolRefreshes(ctx, "globex", pets.ID)
	wantCode(t, err, problem.NotFound, "another tenant's tool")
	must(t, s.DeleteTool(ctx, "acme", pets.ID, nil), "delete")
	_, err = s.ToolRefreshes(ctx, "acme", pets.ID)
	wantCode(t, err, problem.NotFound, "refreshes of a deleted tool")
}
