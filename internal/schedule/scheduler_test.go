package schedule_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// gate is a fake tool API whose calls answer at once, or, while held,
// wait until released.
type gate struct {
	mu      sync.Mutex
	calls   int
	release chan struct{} // nil: answer at once
}

func (g *gate) Call(ctx context.Context, _ tool.CallRequest) (tool.CallResult, error) {
	g.mu.Lock()
	g.calls++
	rel := g.release
	g.mu.Unlock()
	if rel != nil {
		select {
		case <-rel:
		case <-ctx.Done():
			return tool.CallResult{}, ctx.Err()
		}
	}
	return tool.CallResult{Status: 200, Body: json.RawMessage(`{"ok": true}`)}, nil
}

func (g *gate) hold() {
	g.mu.Lock()
	g.release = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) open() {
	g.mu.Lock()
	close(g.release)
	g.release = nil
	g.mu.Unlock()
}

// clock is a test clock shared by replicas.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// start is a due time of "@every 1m": a whole minute.
var start = time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)

// replica is one server's store connection, runner and scheduler.
type replica struct {
	db     *postgres.DB
	runner *workflow.Runner
	sched  *schedule.Scheduler
}

func newReplica(t *testing.T, url, owner string, api workflow.ToolCaller, c *clock) *replica {
	t.Helper()
	db, err := postgres.Open(t.Context(), url, postgres.WithWriters(1), postgres.WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: owner, Lease: time.Minute})
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &replica{db: db, runner: r, sched: &schedule.Scheduler{Store: db, Now: c.now,
		Invoker: &workflow.Invoker{Runner: r, Workflows: db, Now: c.now}}}
}

// setup returns a new database with a tool and an agent calling it once,
// and a schedule of that agent every minute from start.
func setup(t *testing.T, overlap string) (url string, sch *schedule.Schedule) {
	t.Helper()
	url = postgres.NewTestDatabase(t)
	db, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, now := t.Context(), time.Now()
	lt := &tool.Tool{ID: "tool_01JDGATE00000000000000000", Tenant: "acme", Name: "gate", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, IdempotencySupport: true,
		Revision: 1, OperationCount: 1, IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: "http://gate.test"}
	ops := []tool.Operation{{ID: "check", Kind: tool.Read, HTTP: &tool.HTTPBinding{Method: "GET", Path: "/c"}}}
	if err := db.CreateTool(ctx, lt, ops, nil); err != nil {
		t.Fatal(err)
	}
	def := json.RawMessage(`{"tools": ["gate"], "steps": [{"action": "check", "call": "gate.check", "save_as": "r"}], "outcome": "'checked'"}`)
	if err := db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "sweep", Definition: def, Tools: []string{"gate"}, DeployedAt: now}, false, nil); err != nil {
		t.Fatal(err)
	}
	sch = &schedule.Schedule{ID: ids.NewAt(ids.Schedule, start), Tenant: "acme", Agent: "sweep", Cron: "@every 1m",
		Timezone: "UTC", Goal: "sweep the queue", Context: json.RawMessage(`{"queue": "billing"}`), Overlap: overlap,
		Creator:   workflow.Caller{Sub: "alice", ClientID: "cli_alice", Scopes: []string{"agents:invoke", "tool:gate"}},
		CreatedAt: start.Add(-time.Second), UpdatedAt: start.Add(-time.Second)}
	if err := db.CreateSchedule(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	return url, sch
}

// runs returns the workflows the schedule started by due time, waiting for
// each to finish.
func runs(t *testing.T, r *replica) []*workflow.Workflow {
	t.Helper()
	wfs, err := r.db.ListWorkflows(t.Context(), "acme", workflow.ListFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, wf := range wfs {
		if wfs[i], err = r.runner.Wait(t.Context(), "acme", wf.ID); err != nil {
			t.Fatal(err)
		}
	}
	return wfs
}

func TestEachDueTimeStartsOneWorkflowAcrossReplicas(t *testing.T) {
	url, sch := setup(t, schedule.OverlapAllow)
	api, c := &gate{}, &clock{}
	a, b := newReplica(t, url, "replica-a", api, c), newReplica(t, url, "replica-b", api, c)
	for i := range 10 {
		due := start.Add(time.Duration(i) * time.Minute)
		c.set(due.Add(time.Duration(i) * time.Second)) // a tick somewhat after the due time
		switch i {
		case 4: // a stops mid-way...
			// ...once the runs it started have ended: a run still going at
			// its shutdown would be left for a resume these replicas,
			// running no resume loop, never make.
			runs(t, a)
			if err := a.runner.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			a.db.Close()
			a = nil
		case 7: // ...and a new process takes its place
			a = newReplica(t, url, "replica-a2", api, c)
		}
		var wg sync.WaitGroup
		for _, r := range []*replica{a, b, b} { // b twice: two passes of one replica race too
			if r == nil {
				continue
			}
			wg.Go(func() {
				if err := r.sched.RunOnce(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	wfs := runs(t, b)
	if len(wfs) != 10 {
		t.Fatalf("%d workflows for 10 due times, want 10", len(wfs))
	}
	for _, wf := range wfs {
		if wf.Status != workflow.Completed || wf.Caller.Sub != "alice" || wf.Caller.ClientID != "cli_alice" {
			t.Errorf("workflow %s: status %s, caller %+v; want completed as alice", wf.ID, wf.Status, wf.Caller)
		}
		if id, err := b.db.ScheduleOf(t.Context(), wf.ID); err != nil || id != sch.ID {
			t.Errorf("ScheduleOf(%s) = %q, %v; want %s", wf.ID, id, err, sch.ID)
		}
	}
	recs, err := b.db.QueryAudit(t.Context(), "acme", audit.Filter{Action: "schedule.run", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 || recs[0].Actor.Sub != "alice" || recs[0].Resource.ID != sch.ID || recs[0].WorkflowID == "" {
		t.Errorf("%d schedule.run records (first %+v), want 10 naming the schedule and its creator", len(recs), recs[0])
	}
	got, err := b.db.Schedule(t.Context(), "acme", sch.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := start.Add(9 * time.Minute); !got.LastDue.Equal(want) {
		t.Errorf("last due time = %v, want %v", got.LastDue, want)
	}
}

// lastSkip returns the schedule's latest skipped due time and its reason.
func lastSkip(t *testing.T, r *replica, id string) *schedule.Skip {
	t.Helper()
	got, err := r.db.Schedule(t.Context(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return got.LastSkip
}

func TestOverlapSkipStartsNothingWhileThePreviousRunRuns(t *testing.T) {
	url, sch := setup(t, schedule.OverlapSkip)
	api, c := &gate{}, &clock{}
	r := newReplica(t, url, "replica-a", api, c)
	api.hold()
	c.set(start)
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The first run holds at its tool call: the next two due times skip.
	for i := 1; i <= 2; i++ {
		c.set(start.Add(time.Duration(i) * time.Minute))
		if err := r.sched.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if s := lastSkip(t, r, sch.ID); s == nil || !s.DueAt.Equal(start.Add(2*time.Minute)) || s.Reason != schedule.ReasonOverlap {
		t.Errorf("last skip %+v, want %v: %s", s, start.Add(2*time.Minute), schedule.ReasonOverlap)
	}
	if recs, err := r.db.QueryAudit(t.Context(), "acme", audit.Filter{Action: "schedule.skip", Outcome: audit.Success}); err != nil || len(recs) != 2 {
		t.Errorf("schedule.skip records %d (%v), want one for each of the two due times", len(recs), err)
	}
	api.open()
	if n := len(runs(t, r)); n != 1 {
		t.Fatalf("%d workflows while the first ran, want 1", n)
	}
	// Skipped due times are not made up once it has finished; the next runs.
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 1 {
		t.Fatalf("%d workflows after it finished, within the skipped due time; want 1", n)
	}
	c.set(start.Add(3 * time.Minute))
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 2 {
		t.Fatalf("%d workflows after the next due time, want 2", n)
	}
}

func TestAfterAnOutageOnlyTheLatestMissedTimeRuns(t *testing.T) {
	url, sch := setup(t, schedule.OverlapAllow)
	api, c := &gate{}, &clock{}
	r := newReplica(t, url, "replica-a", api, c)
	c.set(start)
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Down for an hour and a half: 90 due times missed.
	c.set(start.Add(90*time.Minute + 20*time.Second))
	for range 3 {
		if err := r.sched.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(runs(t, r)); n != 2 {
		t.Fatalf("%d workflows, want 2: the first due time and the latest missed one", n)
	}
	got, err := r.db.Schedule(t.Context(), "acme", sch.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := start.Add(90 * time.Minute); !got.LastDue.Equal(want) {
		t.Errorf("last due time = %v, want %v", got.LastDue, want)
	}
}

func TestPausedSchedulesDoNotRunTriggerDoesAndResumeSkipsWhatWasMissed(t *testing.T) {
	url, sch := setup(t, schedule.OverlapSkip)
	api, c := &gate{}, &clock{}
	r := newReplica(t, url, "replica-a", api, c)
	sch.Paused = true
	if err := r.db.UpdateSchedule(t.Context(), sch, nil); err != nil {
		t.Fatal(err)
	}
	c.set(start.Add(5 * time.Minute))
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 0 {
		t.Fatalf("a paused schedule started %d workflows", n)
	}
	wf, err := r.sched.Trigger(t.Context(), sch)
	if err != nil {
		t.Fatal(err)
	}
	if wf.ScheduleID != sch.ID {
		t.Errorf("triggered workflow's schedule_id = %q", wf.ScheduleID)
	}
	if n := len(runs(t, r)); n != 1 {
		t.Fatalf("%d workflows after a trigger, want 1", n)
	}
	// Resuming skips what was missed while paused; the next due time runs.
	svc := &schedule.Service{Store: r.db, Versions: r.db, Scheduler: r.sched, Now: c.now}
	if _, err := svc.SetPaused(t.Context(), "acme", sch.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 1 {
		t.Fatalf("%d workflows right after resuming, want 1", n)
	}
	if s := lastSkip(t, r, sch.ID); s == nil || !s.DueAt.Equal(start.Add(5*time.Minute)) || s.Reason != schedule.ReasonPaused {
		t.Errorf("last skip %+v, want %v: %s", s, start.Add(5*time.Minute), schedule.ReasonPaused)
	}
	c.set(start.Add(6 * time.Minute))
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 2 {
		t.Fatalf("%d workflows at the next due time, want 2", n)
	}
}

// TestAChangedScheduleStartsNoRunForATimeBeforeTheChange: a schedule
// replaced (PUT) after a due time passed does not start a run for it; the
// next due time after the change runs.
func TestAChangedScheduleStartsNoRunForATimeBeforeTheChange(t *testing.T) {
	url, sch := setup(t, schedule.OverlapAllow)
	api, c := &gate{}, &clock{}
	r := newReplica(t, url, "replica-a", api, c)
	c.set(start)
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Changed 90 minutes later, while no replica was looking.
	got, err := r.db.Schedule(t.Context(), "acme", sch.ID)
	if err != nil {
		t.Fatal(err)
	}
	got.UpdatedAt = start.Add(90*time.Minute + 10*time.Second)
	if err := r.db.UpdateSchedule(t.Context(), got, nil); err != nil {
		t.Fatal(err)
	}
	c.set(start.Add(90*time.Minute + 20*time.Second))
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 1 {
		t.Fatalf("%d workflows, want 1: the time due before the change is not run", n)
	}
	c.set(start.Add(91*time.Minute + 5*time.Second))
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 2 {
		t.Fatalf("%d workflows, want 2: the first due time after the change runs", n)
	}
}

func TestARunIsKeyedByItsScheduleAndDueTime(t *testing.T) {
	url, sch := setup(t, schedule.OverlapAllow)
	c := &clock{}
	r := newReplica(t, url, "replica-a", &gate{}, c)
	c.set(start.Add(time.Second))
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	wfs := runs(t, r)
	if len(wfs) != 1 {
		t.Fatalf("%d workflows, want 1", len(wfs))
	}
	key := "schedule:" + sch.ID + ":" + start.Format(time.RFC3339)
	got, err := r.db.WorkflowByKey(t.Context(), "acme", key)
	if err != nil || got.ID != wfs[0].ID {
		t.Errorf("the workflow of key %s = %v, %v; want %s", key, got, err, wfs[0].ID)
	}
	// A manual trigger has no due time and no key: each starts a workflow.
	for range 2 {
		if _, err := r.sched.Trigger(t.Context(), sch); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(runs(t, r)); n != 3 {
		t.Errorf("%d workflows after two triggers, want 3", n)
	}
}

// TestADueTimeWhoseInvocationIsRefusedSaysWhy: the agent's default
// version comes to require an input the schedule's context lacks; the
// due time starts nothing, and the schedule shows it skipped with the
// refusal's words and field.
func TestADueTimeWhoseInvocationIsRefusedSaysWhy(t *testing.T) {
	url, sch := setup(t, schedule.OverlapAllow)
	api, c := &gate{}, &clock{}
	r := newReplica(t, url, "replica-a", api, c)
	def := json.RawMessage(`{"tools": ["gate"], "inputs": {"type": "object", "required": ["region"]},
		"steps": [{"action": "check", "call": "gate.check", "save_as": "r"}], "outcome": "'checked'"}`)
	if err := r.db.DeployVersion(t.Context(), &agent.Version{Tenant: "acme", Name: "sweep", Definition: def, Tools: []string{"gate"},
		DeployedAt: time.Now()}, true, nil); err != nil {
		t.Fatal(err)
	}
	c.set(start)
	if err := r.sched.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runs(t, r)); n != 0 {
		t.Fatalf("%d workflows of a refused context, want none", n)
	}
	s := lastSkip(t, r, sch.ID)
	if s == nil || !s.DueAt.Equal(start) || !strings.HasPrefix(s.Reason, "validation-failed: ") || !strings.Contains(s.Reason, "context") ||
		!strings.Contains(s.Reason, "region") {
		t.Fatalf("last skip %+v; want %v, refused naming the missing input region", s, start)
	}
	recs, err := r.db.QueryAudit(t.Context(), "acme", audit.Filter{Action: "schedule.skip"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Actor != schedule.SchedulerActor || recs[0].Outcome != audit.Error || recs[0].Resource.ID != sch.ID ||
		string(recs[0].Details) != `{"code":"validation-failed","due_at":"`+start.UTC().Format(time.RFC3339)+`","fields":["context.region"]}` {
		t.Errorf("schedule.skip records %+v; want one by the scheduler, outcome error, with the due time, the code and the field", recs)
	}
}
