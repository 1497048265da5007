package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// testToolImpactReads: the live versions naming a tool (an archived one
// and other tenants' left out), and the tool's sent calls of a tenant's
// workflows since a time, newest first, up to a limit (calls not sent,
// other tools' steps, replays, older workflows and other tenants' left
// out).
func testToolImpactReads(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	for _, tn := range [][2]string{{"acme", "pets"}, {"acme", "cats"}, {"globex", "pets"}} {
		must(t, s.CreateTool(ctx, newTool(tn[0], tn[1]), petOps(), nil), "create "+tn[1])
	}
	use := func(tenant, name string, i int, tools ...string) *agent.Version {
		v := newVersion(tenant, name, "", i)
		v.Tools = tools
		return deploy(t, s, v, false)
	}
	use("acme", "triage", 1, "pets")
	use("acme", "triage", 2, "pets")
	use("acme", "triage", 3)
	use("acme", "audit", 4, "pets", "cats")
	use("globex", "triage", 5, "pets")
	must(t, s.ArchiveVersion(ctx, "acme", "triage", "2", nil), "archive triage@2")

	refs := func(tenant, toolName string) []string {
		vs, err := s.VersionsUsingTool(ctx, tenant, toolName)
		must(t, err, "versions using "+toolName)
		var out []string
		for _, v := range vs {
			if v.Tenant != tenant || len(v.Definition) == 0 || !v.Default {
				t.Errorf("version %s: tenant %q, definition %s, default %v", v.Ref(), v.Tenant, v.Definition, v.Default)
			}
			out = append(out, v.Ref())
		}
		return out
	}
	if diff := cmp.Diff([]string{"audit@1", "triage@1"}, refs("acme", "pets")); diff != "" {
		t.Errorf("versions using pets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"audit@1"}, refs("acme", "cats")); diff != "" {
		t.Errorf("versions using cats (-want +got):\n%s", diff)
	}
	if got := refs("acme", "dogs"); len(got) != 0 {
		t.Errorf("versions using an unknown tool: %v", got)
	}

	// Workflows at base+1s.. (acme), one before since, a replay, globex's.
	wf := func(tenant string, i int, replayOf string, steps ...*workflow.Step) string {
		w := newWorkflow(tenant, "triage", "o", i)
		w.ReplayOf = replayOf
		create(t, s, w)
		for n, st := range steps {
			st.WorkflowID, st.Seq, st.Step = w.ID, n+1, n+1
			st.StartedAt = w.StartedAt.Add(time.Duration(n) * time.Millisecond)
			must(t, s.AppendSteps(ctx, "o", written(st)), "append step")
		}
		return w.ID
	}
	call := func(toolName string, sent bool) *workflow.Step {
		st := newStep("", 1)
		st.Tool, st.Sent = toolName, sent
		return st
	}
	score := newStep("", 1)
	score.Kind, score.Tool, score.Operation = "score", "", ""
	old := wf("acme", -3600, "", call("pets", true))
	w1 := wf("acme", 1, "", call("pets", true), call("pets", false), call("cats", true), score)
	wf("acme", 2, old, call("pets", true))
	w3 := wf("acme", 3, "", call("pets", true), call("pets", true))
	wf("globex", 4, "", call("pets", true))

	calls := func(limit int) []string {
		var out []string
		err := s.ToolCalls(ctx, "acme", "pets", base, limit, func(st *workflow.Step) error {
			if st.Operation != "listPets" || string(st.Args) != `{"limit": 3}` && string(st.Args) != `{"limit":3}` {
				t.Errorf("call %s/%d: operation %q args %s", st.WorkflowID, st.Step, st.Operation, st.Args)
			}
			out = append(out, st.WorkflowID+"/"+string(rune('0'+st.Step)))
			return nil
		})
		must(t, err, "tool calls")
		return out
	}
	if diff := cmp.Diff([]string{w3 + "/2", w3 + "/1", w1 + "/1"}, calls(10)); diff != "" {
		t.Errorf("pets calls since base, newest first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{w3 + "/2", w3 + "/1"}, calls(2)); diff != "" {
		t.Errorf("pets calls, two of them (-want +got):\n%s", diff)
	}
	// An error of the callback stops the listing and is returned.
	stop := errors.New("stop")
	seen := 0
	if err := s.ToolCalls(ctx, "acme", "pets", base, 10, func(*workflow.Step) error { seen++; return stop }); !errors.Is(err, stop) || seen != 1 {
		t.Errorf("a callback's error: %v after %d calls, want it after 1", err, seen)
	}
}

// testToolRefreshSchedule: a tool with a refresh is first due its duration
// after it was stored; a claim moves the due time once (a second claim of
// the same time loses); an update keeping the refresh keeps the due time,
// one changing it restarts it, one dropping it ends it; the refresh
// survives as the tool's.
func testToolRefreshSchedule(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	pets := newTool("acme", "pets")
	pets.Refresh = "1h"
	must(t, s.CreateTool(ctx, pets, petOps(), nil), "create pets")
	plain := newTool("globex", "plain")
	must(t, s.CreateTool(ctx, plain, petOps(), nil), "create plain")
	other := newTool("globex", "cats")
	other.Refresh = "2h"
	must(t, s.CreateTool(ctx, other, petOps(), nil), "create cats")

	due := func(at time.Duration) []string {
		ts, err := s.DueToolRefreshes(ctx, base.Add(at), 10)
		must(t, err, "due refreshes")
		var out []string
		for _, tl := range ts {
			out = append(out, tl.Name+"@"+tl.RefreshDue.Sub(base).String()+"/"+tl.Refresh)
		}
		return out
	}
	if got := due(59 * time.Minute); len(got) != 0 {
		t.Fatalf("due before the hour: %v", got)
	}
	if diff := cmp.Diff([]string{"pets@1h0m0s/1h", "cats@2h0m0s/2h"}, due(3*time.Hour)); diff != "" {
		t.Fatalf("due after two hours (-want +got):\n%s", diff)
	}
	won, err := s.ClaimToolRefresh(ctx, "acme", pets.ID, base.Add(time.Hour), base.Add(3*time.Hour))
	must(t, err, "claim")
	again, err := s.ClaimToolRefresh(ctx, "acme", pets.ID, base.Add(time.Hour), base.Add(4*time.Hour))
	must(t, err, "claim again")
	if !won || again {
		t.Fatalf("claims of one due time: first %v, second %v; want true, false", won, again)
	}
	if diff := cmp.Diff([]string{"cats@2h0m0s/2h"}, due(2*time.Hour)); diff != "" {
		t.Fatalf("due after the claim (-want +got):\n%s", diff)
	}
	// An update keeping the refresh keeps the claimed time; changing it
	// restarts it from the update; dropping it ends it.
	upd := *pets
	upd.Revision, upd.UpdatedAt = 2, base.Add(10*time.Minute)
	must(t, s.UpdateTool(ctx, &upd, petOps(), nil), "update keeping refresh")
	if diff := cmp.Diff([]string{"cats@2h0m0s/2h", "pets@3h0m0s/1h"}, due(3*time.Hour)); diff != "" {
		t.Fatalf("after an update keeping the refresh (-want +got):\n%s", diff)
	}
	upd.Revision, upd.Refresh = 3, "24h"
	must(t, s.UpdateTool(ctx, &upd, petOps(), nil), "update changing refresh")
	if got := due(24 * time.Hour); len(got) != 1 || got[0] != "cats@2h0m0s/2h" {
		t.Fatalf("due a day after, before the new refresh: %v", got)
	}
	if got := due(25 * time.Hour); len(got) != 2 || got[1] != "pets@24h10m0s/24h" {
		t.Fatalf("due after the new refresh: %v", got)
	}
	upd.Revision, upd.Refresh = 4, ""
	must(t, s.UpdateTool(ctx, &upd, petOps(), nil), "update dropping refresh")
	if got := due(100 * time.Hour); len(got) != 1 || got[0] != "cats@2h0m0s/2h" {
		t.Fatalf("due after the refresh was dropped: %v", got)
	}
	got, err := s.Tool(ctx, "globex", other.ID)
	must(t, err, "tool")
	if got.Refresh != "2h" {
		t.Errorf("the stored tool's refresh is %q, want 2h", got.Refresh)
	}
}
