package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/workflow"
)

func newSchedule(tenant string, i int) *schedule.Schedule {
	at := base.Add(time.Duration(i) * time.Second)
	calls := 5
	return &schedule.Schedule{
		ID: ids.NewAt(ids.Schedule, at), Tenant: tenant, Agent: "triage@3", Cron: "*/5 * * * *", Timezone: "Europe/Paris",
		Goal: "nightly sweep", Context: json.RawMessage(`{"queue":"billing"}`), MaxToolCalls: &calls,
		Overlap: schedule.OverlapSkip, Creator: workflow.Caller{Sub: "user-1", ClientID: "cli-1", Scopes: []string{"agents:invoke", "tool:pets"}},
		CreatedAt: at, UpdatedAt: at,
	}
}

func testScheduleCRUD(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	a, b := newSchedule("acme", 1), newSchedule("acme", 2)
	b.Paused, b.MaxToolCalls, b.Context = true, nil, json.RawMessage(`{}`)
	must(t, s.CreateSchedule(ctx, a, record("acme", "schedule.create", 0)), "create a")
	must(t, s.CreateSchedule(ctx, b, nil), "create b")
	again := *a
	wantCode(t, s.CreateSchedule(ctx, &again, nil), problem.Conflict, "same id again")

	got, err := s.Schedule(ctx, "acme", a.ID)
	must(t, err, "get a")
	if diff := cmp.Diff(a, got); diff != "" {
		t.Fatalf("schedule read back (-want +got):\n%s", diff)
	}
	_, err = s.Schedule(ctx, "other", a.ID)
	wantCode(t, err, problem.NotFound, "another tenant's schedule")

	list, err := s.ListSchedules(ctx, "acme")
	must(t, err, "list")
	if len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID || list[1].MaxToolCalls != nil {
		t.Fatalf("list = %+v, want a then b", list)
	}
	active, err := s.ActiveSchedules(ctx)
	must(t, err, "active")
	if len(active) != 1 || active[0].ID != a.ID {
		t.Fatalf("active = %+v, want only a (b is paused)", active)
	}

	a.Cron, a.Paused, a.UpdatedAt = "@every 1h", true, base.Add(time.Hour)
	must(t, s.UpdateSchedule(ctx, a, nil), "update")
	got, err = s.Schedule(ctx, "acme", a.ID)
	must(t, err, "get updated")
	if got.Cron != "@every 1h" || !got.Paused || !got.UpdatedAt.Equal(a.UpdatedAt) || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("updated = %+v", got)
	}
	other := *a
	other.Tenant = "other"
	wantCode(t, s.UpdateSchedule(ctx, &other, nil), problem.NotFound, "update in another tenant")
	wantCode(t, s.DeleteSchedule(ctx, "other", a.ID, nil), problem.NotFound, "delete in another tenant")
	must(t, s.DeleteSchedule(ctx, "acme", a.ID, nil), "delete")
	_, err = s.Schedule(ctx, "acme", a.ID)
	wantCode(t, err, problem.NotFound, "deleted schedule")
}

// testSchedulePause: PauseSchedule pauses a running schedule with its
// reason and audit record once; a person's update clears the reason.
func testSchedulePause(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	sch := newSchedule("acme", 1)
	must(t, s.CreateSchedule(ctx, sch, nil), "create schedule")
	const reason = "its creator's client cli-1 is revoked"
	at := base.Add(time.Hour)
	for i, want := range []bool{true, false} {
		paused, err := s.PauseSchedule(ctx, sch.ID, reason, at, record("acme", "schedule.pause", i))
		must(t, err, "pause")
		if paused != want {
			t.Fatalf("pause %d: paused = %v, want %v", i+1, paused, want)
		}
	}
	got, err := s.Schedule(ctx, "acme", sch.ID)
	must(t, err, "get paused")
	want := *sch
	want.Paused, want.PausedReason, want.UpdatedAt = true, reason, at
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Fatalf("paused schedule (-want +got):\n%s", diff)
	}
	if active, err := s.ActiveSchedules(ctx); err != nil || len(active) != 0 {
		t.Fatalf("active after the pause = %v (%v), want none", active, err)
	}
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "schedule.pause"})
	must(t, err, "query audit")
	if len(recs) != 1 {
		t.Fatalf("schedule.pause records = %d, want 1 (the second pause changed nothing)", len(recs))
	}
	if paused, err := s.PauseSchedule(ctx, "sch_none", reason, at, nil); err != nil || paused {
		t.Fatalf("pause of an unknown schedule = %v, %v; want false, nil", paused, err)
	}

	got.Paused, got.PausedReason, got.UpdatedAt = false, "", at.Add(time.Minute)
	must(t, s.UpdateSchedule(ctx, got, nil), "resume")
	again, err := s.Schedule(ctx, "acme", sch.ID)
	must(t, err, "get resumed")
	if again.Paused || again.PausedReason != "" {
		t.Fatalf("resumed = %+v, want running without a reason", again)
	}
}

func testScheduleClaims(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	sch := newSchedule("acme", 1)
	must(t, s.CreateSchedule(ctx, sch, nil), "create schedule")
	due := base.Add(10 * time.Minute)

	w := newWorkflow("acme", "triage", "owner-a", 1)
	w.ScheduleID, w.ScheduledFor = sch.ID, due
	create(t, s, w)
	// A second workflow for the same due time is refused and not stored.
	dup := newWorkflow("acme", "triage", "owner-b", 2)
	dup.ScheduleID, dup.ScheduledFor = sch.ID, due
	wantCode(t, s.CreateWorkflow(ctx, dup, nil), problem.Conflict, "second workflow for a due time")
	_, err := s.Workflow(ctx, "acme", dup.ID)
	wantCode(t, err, problem.NotFound, "the refused workflow")
	if ok, err := s.SkipDue(ctx, sch.ID, due, "refused", record("acme", "schedule.skip", 0)); err != nil || ok {
		t.Fatalf("SkipDue of a claimed due time = %v, %v; want false", ok, err)
	}

	// Manual runs claim no due time: any number of them.
	for i := 3; i < 5; i++ {
		m := newWorkflow("acme", "triage", "owner-a", i)
		m.ScheduleID = sch.ID
		create(t, s, m)
	}
	if id, err := s.ScheduleOf(ctx, w.ID); err != nil || id != sch.ID {
		t.Fatalf("ScheduleOf = %q, %v; want %s", id, err, sch.ID)
	}
	if id, err := s.ScheduleOf(ctx, newWorkflow("acme", "x", "o", 9).ID); err != nil || id != "" {
		t.Fatalf("ScheduleOf an unscheduled workflow = %q, %v", id, err)
	}
	got, err := s.Schedule(ctx, "acme", sch.ID)
	must(t, err, "get")
	if !got.LastDue.Equal(due) || got.LastSkip != nil {
		t.Fatalf("LastDue = %v, LastSkip %+v; want %v and none", got.LastDue, got.LastSkip, due)
	}

	busy, err := s.Busy(ctx, sch.ID)
	must(t, err, "busy")
	if !busy {
		t.Fatal("Busy = false while its workflows run")
	}
	later := due.Add(5 * time.Minute)
	if ok, err := s.SkipDue(ctx, sch.ID, later, "overlap skip", record("acme", "schedule.skip", 1)); err != nil || !ok {
		t.Fatalf("SkipDue = %v, %v; want true", ok, err)
	}
	got, err = s.Schedule(ctx, "acme", sch.ID)
	must(t, err, "get after skip")
	if !got.LastDue.Equal(later) {
		t.Fatalf("LastDue after a skip = %v, want %v", got.LastDue, later)
	}
	if want := (schedule.Skip{DueAt: later, Reason: "overlap skip"}); got.LastSkip == nil || !got.LastSkip.DueAt.Equal(later) || got.LastSkip.Reason != want.Reason {
		t.Fatalf("LastSkip = %+v, want %+v", got.LastSkip, want)
	}
	// The latest skip is the one shown, in the list too.
	latest := later.Add(5 * time.Minute)
	if ok, err := s.SkipDue(ctx, sch.ID, latest, "validation-failed: context.queue: is required", nil); err != nil || !ok {
		t.Fatalf("SkipDue = %v, %v; want true", ok, err)
	}
	list, err := s.ListSchedules(ctx, "acme")
	must(t, err, "list after skips")
	if len(list) != 1 || list[0].LastSkip == nil || !list[0].LastSkip.DueAt.Equal(latest) ||
		list[0].LastSkip.Reason != "validation-failed: context.queue: is required" || !list[0].LastDue.Equal(latest) {
		t.Fatalf("listed %+v; want the skip of %v with its reason", list, latest)
	}
	// A skip's record is appended with it, and only when it claims.
	skips, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "schedule.skip"})
	must(t, err, "query skips")
	if len(skips) != 1 {
		t.Fatalf("schedule.skip records = %d, want 1 (a claimed due time skips nothing; nil appends nothing)", len(skips))
	}
	runs, err := s.ListWorkflows(ctx, "acme", workflow.ListFilter{Limit: 10})
	must(t, err, "list workflows")
	for _, r := range runs {
		finish(t, s, r.Owner, r)
	}
	busy, err = s.Busy(ctx, sch.ID)
	must(t, err, "busy after finishing")
	if busy {
		t.Fatal("Busy = true with every workflow finished")
	}
}
