package sqlite

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestGoalsIndexedOnceABatch creates workflows at once, so the writer
// batches them, among them creations refused after their row was
// inserted (a schedule's due time taken twice: rolled back to their
// savepoints, their rowids taken again by later rows). Each stored goal is
// found once, the refused ones not at all, FTS5's own integrity check
// passes, and so it does after the workflows are finished and deleted.
func TestGoalsIndexedOnceABatch(t *testing.T) {
	t.Parallel()
	db := NewTestDB(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	sch := &schedule.Schedule{ID: ids.New(ids.Schedule), Tenant: "acme", Agent: "triage@1", Cron: "*/5 * * * *", Timezone: "UTC",
		Goal: "sweep", Overlap: schedule.OverlapSkip, CreatedAt: now, UpdatedAt: now}
	if err := db.CreateSchedule(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	const stored, refused = 120, 40
	newWorkflow := func(goal string) *workflow.Workflow {
		return &workflow.Workflow{ID: ids.New(ids.Workflow), Tenant: "acme", Agent: "triage", AgentVersion: "1",
			Status: workflow.Running, Goal: goal, Context: json.RawMessage(`{}`), Caller: workflow.Caller{Sub: "user-1", Tenant: "acme"},
			StartedAt: now, Deadline: now.Add(time.Hour), Owner: "replica-a", LeaseUntil: now.Add(time.Minute)}
	}
	var wg sync.WaitGroup
	errs := make([]error, stored+refused)
	all := make([]*workflow.Workflow, stored+refused)
	for i := range all {
		w := newWorkflow(fmt.Sprintf("reconcile ledger-%03d of the month", i))
		if i >= stored {
			// The same due time of one schedule: refused after the insert.
			w.Goal = fmt.Sprintf("refused sweep-%03d", i)
			w.ScheduleID, w.ScheduledFor = sch.ID, now.Add(time.Hour)
		}
		all[i] = w
		wg.Go(func() { errs[i] = db.CreateWorkflow(ctx, w, nil) })
	}
	wg.Wait()
	var scheduled int
	for i, err := range errs {
		switch {
		case i < stored && err != nil:
			t.Fatalf("create %s: %v", all[i].ID, err)
		case i >= stored && err == nil:
			scheduled++
		case i >= stored && !problem.Is(err, problem.Conflict):
			t.Fatalf("create %s for a taken due time: %v, want a conflict", all[i].ID, err)
		}
	}
	if scheduled != 1 {
		t.Fatalf("%d workflows stored for one due time, want 1", scheduled)
	}
	integrity := func(when string) {
		t.Helper()
		if _, err := db.wconn.ExecContext(ctx, `INSERT INTO workflow_goals (workflow_goals) VALUES ('integrity-check')`); err != nil {
			t.Fatalf("goal index %s: %v", when, err)
		}
	}
	integrity("after the burst")
	found := func(words ...string) int {
		t.Helper()
		list, err := db.ListWorkflows(ctx, "acme", workflow.ListFilter{Words: words, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	if n := found("ledger"); n != stored {
		t.Errorf("q=ledger found %d workflows, want %d", n, stored)
	}
	if n := found("ledger-007"); n != 1 {
		t.Errorf("q=ledger-007 found %d workflows, want 1", n)
	}
	if n := found("refused", "sweep"); n != 1 {
		t.Errorf("q=refused sweep found %d workflows, want the 1 stored", n)
	}
	// Finished and deleted: their goals leave the index with them.
	for _, w := range all[:stored/2] {
		w.Status, w.Outcome = workflow.Completed, "answered"
		if err := db.FinishWorkflow(ctx, "replica-a", w, nil); err != nil {
			t.Fatal(err)
		}
		rec := &audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "user-1"}, Action: "workflow.delete",
			Resource: audit.Resource{Type: "workflow", ID: w.ID}, Outcome: audit.Success}
		if _, err := db.DeleteWorkflow(ctx, "acme", w.ID, rec); err != nil {
			t.Fatal(err)
		}
	}
	integrity("after deletes")
	if n := found("ledger"); n != stored-stored/2 {
		t.Errorf("q=ledger found %d workflows after deletes, want %d", n, stored-stored/2)
	}
	// New rows may take the deleted ones' rowids.
	for i := range 10 {
		if err := db.CreateWorkflow(ctx, newWorkflow(fmt.Sprintf("audit payroll-%d", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	integrity("after rowids are taken again")
	if n := found("payroll"); n != 10 {
		t.Errorf("q=payroll found %d workflows, want 10", n)
	}
}
