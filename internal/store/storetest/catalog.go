package storetest

import (
	"testing"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/rollout"
)

// testCatalogGeneration: a tenant's catalog generation moves with every
// change to its agents, versions, tools and rollouts, committed with the
// change, and with nothing of another tenant's.
func testCatalogGeneration(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	gen := func(tenant string) int64 {
		t.Helper()
		g, err := s.CatalogGeneration(ctx, tenant)
		must(t, err, "catalog generation")
		return g
	}
	if g := gen("acme"); g != 0 {
		t.Fatalf("generation of a new tenant = %d, want 0", g)
	}
	last := int64(0)
	moved := func(what string) {
		t.Helper()
		if g := gen("acme"); g <= last {
			t.Errorf("after %s the generation is %d, was %d; want it moved", what, g, last)
		} else {
			last = g
		}
	}
	pets := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, pets, petOps(), nil), "create tool")
	moved("a tool's creation")
	pets.Revision, pets.SpecSHA256 = 2, "cd34"
	must(t, s.UpdateTool(ctx, pets, petOps(), nil), "update tool")
	moved("a tool's update")
	deploy(t, s, newVersion("acme", "triage", "1", 1), false)
	moved("a first version")
	deploy(t, s, newVersion("acme", "triage", "2", 2), false)
	moved("a second version")
	must(t, s.SetDefault(ctx, "acme", "triage", "2", nil), "set default")
	moved("a new default")
	r := &rollout.Rollout{ID: ids.NewAt(ids.Rollout, base), Tenant: "acme", Agent: "triage", BaseVersion: "2", Target: "1",
		Percent: 10, Mode: rollout.Canary, State: rollout.Active, RequestHash: "h", CreatedBy: "alice", CreatedAt: base}
	must(t, s.CreateRollout(ctx, r, nil, nil), "create rollout")
	moved("a rollout's start")
	ended, err := s.EndRollout(ctx, "acme", r.ID, rollout.Ended, "", base, nil, nil)
	must(t, err, "end rollout")
	if !ended {
		t.Fatal("the rollout did not end")
	}
	moved("a rollout's end")
	must(t, s.ArchiveVersion(ctx, "acme", "triage", "1", record("acme", "agent.archive", 0)), "archive version")
	moved("a version's archiving")
	must(t, s.DeleteTool(ctx, "acme", newToolToDelete(t, s), nil), "delete tool")
	moved("a tool's deletion")

	// Another tenant's changes leave acme's generation, and a workflow's
	// none.
	deploy(t, s, newVersion("globex", "triage", "1", 1), false)
	create(t, s, newWorkflow("acme", "triage", "replica-a", 0))
	if g := gen("acme"); g != last {
		t.Errorf("acme's generation moved from %d to %d with globex's deploy and a workflow", last, g)
	}
	if gen("globex") == 0 {
		t.Error("globex's generation did not move with its deploy")
	}
}

// newToolToDelete creates a tool of acme no version names, returning its id.
func newToolToDelete(t *testing.T, s Store) string {
	t.Helper()
	spare := newTool("acme", "spare")
	must(t, s.CreateTool(ctxOf(t), spare, petOps(), nil), "create spare tool")
	return spare.ID
}
