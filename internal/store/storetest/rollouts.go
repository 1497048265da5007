package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/workflow"
)

// testRollouts: one active rollout per agent, kept whole; a workflow keeps
// the arm it ran; each run is counted once, its checks by arm; an active
// rollout ends once (docs/change-safety.md, "Rollouts").
func testRollouts(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	r := &rollout.Rollout{ID: ids.NewAt(ids.Rollout, base), Tenant: "acme", Agent: "triage", BaseVersion: "1", Target: "2",
		Percent: 12.5, Sticky: "context.customer_id", Mode: rollout.Canary, MinRuns: 3, AutoPromote: true, State: rollout.Active,
		Spec:        replay.Spec{Checks: []replay.CheckSpec{{Name: "ok", Expr: "run.outcome != 'failed'"}}, Gate: map[string]float64{"ok": 0.9}},
		RequestHash: "h1", CreatedBy: "alice", CreatedAt: base}
	must(t, s.CreateRollout(ctx, r, record("acme", "agent.rollout.put", 1), nil), "create rollout")
	for name, get := range map[string]func() (*rollout.Rollout, error){
		"rollout": func() (*rollout.Rollout, error) { return s.Rollout(ctx, "acme", r.ID) },
		"active":  func() (*rollout.Rollout, error) { return s.ActiveRollout(ctx, "acme", "triage") },
		"latest":  func() (*rollout.Rollout, error) { return s.LatestRollout(ctx, "acme", "triage") },
	} {
		got, err := get()
		must(t, err, name)
		if d := cmp.Diff(r, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
	if _, err := s.Rollout(ctx, "other", r.ID); !problem.Is(err, problem.NotFound) {
		t.Errorf("another tenant's rollout: %v, want not found", err)
	}
	second := *r
	second.ID, second.RequestHash = ids.NewAt(ids.Rollout, base.Add(time.Second)), "h2"
	if err := s.CreateRollout(ctx, &second, nil, nil); !problem.Is(err, problem.Conflict) {
		t.Errorf("a second active rollout: %v, want conflict", err)
	}

	w := newWorkflow("acme", "triage", "replica-a", 0)
	w.Rollout = &workflow.RolloutArm{ID: r.ID, Arm: workflow.ArmCanary}
	create(t, s, w)
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if d := cmp.Diff(w.Rollout, got.Rollout); d != "" {
		t.Errorf("workflow's rollout arm (-want +got):\n%s", d)
	}

	uncounted := func(before time.Time) []string {
		t.Helper()
		wfs, err := s.UncountedRolloutWorkflows(ctx, before, 10)
		must(t, err, "uncounted workflows")
		var ids []string
		for _, wf := range wfs {
			ids = append(ids, wf.ID)
			if wf.Rollout == nil || wf.Rollout.ID != r.ID {
				t.Errorf("uncounted workflow %s has the arm %+v", wf.ID, wf.Rollout)
			}
		}
		return ids
	}
	plain := create(t, s, newWorkflow("acme", "triage", "replica-a", 1))
	finish(t, s, "replica-a", plain)
	if got := uncounted(base.Add(time.Hour)); len(got) != 0 {
		t.Errorf("uncounted while the workflow runs: %v, want none", got)
	}
	finish(t, s, "replica-a", w)
	if got := uncounted(base.Add(30 * time.Second)); len(got) != 0 {
		t.Errorf("uncounted before the workflow finished: %v, want none", got)
	}
	if got := uncounted(base.Add(time.Hour)); !cmp.Equal(got, []string{w.ID}) {
		t.Errorf("uncounted = %v, want [%s]", got, w.ID)
	}
	counted := &rollout.Run{Tenant: "acme", RolloutID: r.ID, WorkflowID: w.ID, Arm: workflow.ArmCanary, Priced: true, FinishedAt: base}
	if _, err := s.RecordRolloutRun(ctx, counted); err != nil {
		t.Fatal(err)
	}
	if got := uncounted(base.Add(time.Hour)); len(got) != 0 {
		t.Errorf("uncounted once counted: %v, want none", got)
	}

	runs := []*rollout.Run{
		{WorkflowID: "wf_1", Arm: workflow.ArmCanary, Outcome: "done", InputTokens: 10, OutputTokens: 5, Cost: 0.25, Currency: "USD", Priced: true,
			Checks: []replay.CheckResult{{Name: "ok", Passed: true}}},
		{WorkflowID: "wf_2", Arm: workflow.ArmCanary, Outcome: "failed", InputTokens: 1, OutputTokens: 2, Cost: 0.5, Currency: "USD", Priced: true,
			Checks: []replay.CheckResult{{Name: "ok"}}},
		{WorkflowID: "wf_3", Arm: workflow.ArmDefault, Outcome: "done", Priced: true, Checks: []replay.CheckResult{{Name: "ok", Error: "boom"}}},
	}
	for _, run := range runs {
		run.Tenant, run.RolloutID, run.FinishedAt = "acme", r.ID, base
		stored, err := s.RecordRolloutRun(ctx, run)
		must(t, err, "record run")
		if !stored {
			t.Errorf("run %s not stored", run.WorkflowID)
		}
	}
	if stored, err := s.RecordRolloutRun(ctx, runs[0]); err != nil || stored {
		t.Errorf("the same run again: stored %v, %v; want false, nil", stored, err)
	}
	totals, counts, err := s.RolloutTotals(ctx, "acme", r.ID)
	must(t, err, "totals")
	wantTotals := []rollout.ArmTotals{
		{Arm: "canary", Runs: 3, InputTokens: 11, OutputTokens: 7, Cost: 0.75, Priced: 3, MinCurrency: "USD", MaxCurrency: "USD"},
		{Arm: "default", Runs: 1, Priced: 1},
	}
	if d := cmp.Diff(wantTotals, totals); d != "" {
		t.Errorf("totals (-want +got):\n%s", d)
	}
	wantCounts := []rollout.CheckCount{
		{Arm: "canary", Name: "ok", Result: "failed", Count: 1}, {Arm: "canary", Name: "ok", Result: "passed", Count: 1},
		{Arm: "default", Name: "ok", Result: "errored", Count: 1},
	}
	if d := cmp.Diff(wantCounts, counts); d != "" {
		t.Errorf("check counts (-want +got):\n%s", d)
	}

	at := base.Add(time.Minute)
	ended, err := s.EndRollout(ctx, "acme", r.ID, rollout.RolledBack, "ok", at, record("acme", "rollout.rollback", 2), nil)
	must(t, err, "end rollout")
	if !ended {
		t.Error("the active rollout was not ended")
	}
	if ended, err := s.EndRollout(ctx, "acme", r.ID, rollout.Promoted, "", at, nil, nil); err != nil || ended {
		t.Errorf("an ended rollout ended again: %v, %v; want false, nil", ended, err)
	}
	back, err := s.LatestRollout(ctx, "acme", "triage")
	must(t, err, "latest")
	if back.State != rollout.RolledBack || back.FailedCheck != "ok" || back.Percent != 0 || !back.EndedAt.Equal(at) {
		t.Errorf("rolled back: state %q, failed check %q, percent %v, ended %v", back.State, back.FailedCheck, back.Percent, back.EndedAt)
	}
	if _, err := s.ActiveRollout(ctx, "acme", "triage"); !problem.Is(err, problem.NotFound) {
		t.Errorf("active after the end: %v, want not found", err)
	}
	must(t, s.CreateRollout(ctx, &second, nil, nil), "a new rollout once the first ended")
}
