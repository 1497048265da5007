package storetest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// testAgentArchiveVersion: a version is archived unless it is the default,
// has a running or waiting workflow, or a schedule invokes it; once
// archived it stays readable, stops holding its tools and models, and
// cannot become the default.
func testAgentArchiveVersion(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	pets := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, pets, petOps(), nil), "create pets")
	must(t, s.CreateModel(ctx, newModel("acme", "gpt"), nil), "create gpt")
	v1 := newVersion("acme", "triage", "", 1)
	deploy(t, s, v1, false)
	v2 := newVersion("acme", "triage", "", 2)
	v2.Tools, v2.Models = []string{"pets"}, []string{"gpt"}
	deploy(t, s, v2, false)
	v3 := newVersion("acme", "triage", "", 3)
	deploy(t, s, v3, false)

	wantCode(t, s.ArchiveVersion(ctx, "acme", "triage", "1", nil), problem.Conflict, "archive the default")
	wantCode(t, s.ArchiveVersion(ctx, "acme", "triage", "9", nil), problem.AgentVersionNotFound, "archive an unknown version")
	wantCode(t, s.ArchiveVersion(ctx, "acme", "nobody", "1", nil), problem.NotFound, "archive a version of an unknown agent")
	wantCode(t, s.ArchiveVersion(ctx, "globex", "triage", "2", nil), problem.NotFound, "archive another tenant's version")

	w := newWorkflow("acme", "triage", "o", 1)
	w.AgentVersion = "2"
	create(t, s, w)
	err := s.ArchiveVersion(ctx, "acme", "triage", "2", nil)
	wantCode(t, err, problem.Conflict, "archive a version with a running workflow")
	if !strings.Contains(err.Error(), w.ID) {
		t.Errorf("refusal %q does not name the running workflow %s", err, w.ID)
	}
	finish(t, s, "o", w)

	sch := newSchedule("acme", 1)
	sch.Agent = "triage@2"
	must(t, s.CreateSchedule(ctx, sch, nil), "create schedule")
	err = s.ArchiveVersion(ctx, "acme", "triage", "2", nil)
	wantCode(t, err, problem.Conflict, "archive a version a schedule invokes")
	if !strings.Contains(err.Error(), sch.ID) {
		t.Errorf("refusal %q does not name the schedule %s", err, sch.ID)
	}
	must(t, s.DeleteSchedule(ctx, "acme", sch.ID, nil), "delete the schedule")

	wantCode(t, s.DeleteTool(ctx, "acme", pets.ID, nil), problem.Conflict, "delete a tool a live version uses")
	must(t, s.ArchiveVersion(ctx, "acme", "triage", "2", record("acme", "agent.archive", 1)), "archive 2")
	must(t, s.ArchiveVersion(ctx, "acme", "triage", "2", nil), "archive 2 again")

	got, err := s.AgentVersion(ctx, "acme", "triage", "2")
	must(t, err, "read the archived version")
	if got.ArchivedAt == nil {
		t.Fatal("the archived version has no archived_at")
	}
	want := *v2
	want.ArchivedAt = got.ArchivedAt
	if diff := cmp.Diff(&want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Models" }, cmp.Ignore())); diff != "" {
		t.Errorf("archived version read back (-want +got):\n%s", diff)
	}
	vs, err := s.ListVersions(ctx, "acme", "triage")
	must(t, err, "list versions")
	var archived []string
	for _, v := range vs {
		if v.ArchivedAt != nil {
			archived = append(archived, v.Version)
		}
	}
	if diff := cmp.Diff([]string{"2"}, archived); diff != "" {
		t.Errorf("archived versions listed (-want +got):\n%s", diff)
	}

	must(t, s.DeleteTool(ctx, "acme", pets.ID, nil), "delete the tool only an archived version named")
	must(t, s.DeleteModel(ctx, "acme", "gpt", nil), "delete the model only an archived version named")
	wantCode(t, s.SetDefault(ctx, "acme", "triage", "2", nil), problem.AgentVersionArchived, "promote an archived version")
	must(t, s.SetDefault(ctx, "acme", "triage", "3", nil), "promote 3")
	must(t, s.ArchiveVersion(ctx, "acme", "triage", "1", nil), "archive 1 once it is no longer the default")

	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "agent.archive"})
	must(t, err, "query audit")
	if len(recs) != 1 {
		t.Errorf("%d agent.archive records, want the one given with the archive", len(recs))
	}
}

// testAgentArchiveWhole: archiving an agent archives every version, hides
// it from ListAgents, and a later deployment revives it with a fresh
// version number.
func testAgentArchiveWhole(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	pets := newTool("acme", "pets")
	must(t, s.CreateTool(ctx, pets, petOps(), nil), "create pets")
	for i := 1; i <= 3; i++ {
		v := newVersion("acme", "triage", "", i)
		v.Tools = []string{"pets"}
		deploy(t, s, v, false)
	}
	deploy(t, s, newVersion("acme", "other", "", 4), false)
	wantCode(t, s.ArchiveVersion(ctx, "acme", "triage", "1", nil), problem.Conflict, "archive the default alone")
	must(t, s.ArchiveVersion(ctx, "acme", "triage", "3", nil), "archive 3")
	_, err := s.ArchiveAgent(ctx, "acme", "nobody", nil)
	wantCode(t, err, problem.NotFound, "archive an unknown agent")

	held := newWorkflow("acme", "other", "o", 2)
	held.Status = workflow.Waiting
	create(t, s, held)
	_, err = s.ArchiveAgent(ctx, "acme", "other", nil)
	wantCode(t, err, problem.Conflict, "archive an agent with a waiting workflow")
	w := newWorkflow("acme", "triage", "o", 1)
	w.AgentVersion = "2"
	create(t, s, w)
	_, err = s.ArchiveAgent(ctx, "acme", "triage", nil)
	wantCode(t, err, problem.Conflict, "archive an agent with a running workflow")
	finish(t, s, "o", w)
	sch := newSchedule("acme", 1)
	sch.Agent = "triage"
	must(t, s.CreateSchedule(ctx, sch, nil), "create schedule")
	_, err = s.ArchiveAgent(ctx, "acme", "triage", nil)
	wantCode(t, err, problem.Conflict, "archive an agent a schedule invokes")
	must(t, s.DeleteSchedule(ctx, "acme", sch.ID, nil), "delete the schedule")

	rec := record("acme", "agent.archive", 1)
	n, err := s.ArchiveAgent(ctx, "acme", "triage", rec)
	must(t, err, "archive the agent")
	if n != 2 {
		t.Errorf("ArchiveAgent archived %d versions now, want 2 (3 was archived before)", n)
	}
	if n, err := s.ArchiveAgent(ctx, "acme", "triage", nil); err != nil || n != 0 {
		t.Errorf("archive again: %d, %v; want 0, nil", n, err)
	}
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "agent.archive"})
	must(t, err, "query audit")
	if len(recs) != 1 || !strings.Contains(string(recs[0].Details), `"versions_archived":2`) {
		t.Errorf("agent.archive records %v, want one with versions_archived 2", recs)
	}
	must(t, s.DeleteTool(ctx, "acme", pets.ID, nil), "delete the tool only the archived agent named")

	live, err := s.ListAgents(ctx, "acme", "", 0)
	must(t, err, "list agents")
	all, err := s.ListAllAgents(ctx, "acme", "", 0)
	must(t, err, "list all agents")
	if len(live) != 1 || live[0].Name != "other" || len(all) != 2 || all[1].Name != "triage" || all[1].ArchivedAt == nil {
		t.Errorf("ListAgents %v and ListAllAgents %v: want other, then other and the archived triage", live, all)
	}
	a, err := s.Agent(ctx, "acme", "triage")
	must(t, err, "read the archived agent")
	if a.ArchivedAt == nil || a.Versions != 3 {
		t.Errorf("archived agent: archived_at %v, %d versions; want set, 3", a.ArchivedAt, a.Versions)
	}
	def, err := s.AgentVersion(ctx, "acme", "triage", "")
	must(t, err, "read the archived agent's default")
	if def.ArchivedAt == nil {
		t.Error("the archived agent's default version is not archived")
	}

	again := newVersion("acme", "triage", "", 5)
	deploy(t, s, again, false)
	if again.Version != "4" || !again.Default {
		t.Errorf("redeploy: version %q default %v; want \"4\" (after every archived one), true", again.Version, again.Default)
	}
	a, err = s.Agent(ctx, "acme", "triage")
	must(t, err, "read the revived agent")
	if a.ArchivedAt != nil || a.DefaultVersion != "4" {
		t.Errorf("revived agent: archived_at %v, default %q; want live, 4", a.ArchivedAt, a.DefaultVersion)
	}
	old, err := s.AgentVersion(ctx, "acme", "triage", "1")
	must(t, err, "read an old version")
	if old.ArchivedAt == nil {
		t.Error("reviving the agent revived its archived versions")
	}
}
