package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/workflow"
)

// finishedWorkflow stores a workflow of tenant with one step, finished at at.
func finishedWorkflow(t *testing.T, db *DB, tenant string, at time.Time) {
	t.Helper()
	ctx := t.Context()
	const owner = "replica-a"
	w := &workflow.Workflow{
		ID: ids.New(ids.Workflow), Tenant: tenant, Agent: "triage", AgentVersion: "1",
		Status: workflow.Running, Goal: "goal", Context: json.RawMessage(`{}`),
		Caller:       workflow.Caller{Sub: "user-1", Tenant: tenant, Scopes: []string{"agents:invoke"}},
		MaxToolCalls: 10, StartedAt: at.Add(-time.Second), Deadline: at.Add(time.Minute),
		Owner: owner, LeaseUntil: time.Now().Add(time.Hour),
	}
	if err := db.CreateWorkflow(ctx, w, nil); err != nil {
		t.Fatalf("create workflow: %v", err)
	}
	step := &workflow.Step{WorkflowID: w.ID, Seq: 1, Step: 1, Action: "fetch", Kind: "call", Status: "ok",
		Tool: "pets", Operation: "listPets", Args: json.RawMessage(`{}`), StartedAt: at.Add(-time.Second), Sent: true}
	if err := db.AppendSteps(ctx, owner, workflow.StepWrite{Step: step}); err != nil {
		t.Fatalf("append step: %v", err)
	}
	w.Status, w.Outcome, w.FinishedAt = workflow.Completed, "routed", at
	if err := db.FinishWorkflow(ctx, owner, w, nil); err != nil {
		t.Fatalf("finish workflow: %v", err)
	}
}

// TestRetentionBatchesRunBesideTheWriters: a sweep batch and an audit trim
// are transactions of their own. While one waits on a row another
// transaction holds, the store's one writer goes on committing the
// requests' writes, the same tenant's audit records included (the chain's
// head is taken only at the batch's commit); once let go, the batch
// commits, and the chain verifies.
func TestRetentionBatchesRunBesideTheWriters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// lock is the statement that holds a row of tenant $1 the batch
		// deletes.
		lock  string
		batch func(ctx context.Context, db *DB) (int64, error)
	}{
		{
			name: "sweep",
			lock: `SELECT 1 FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
				WHERE w.tenant = $1 FOR UPDATE OF s`,
			batch: func(ctx context.Context, db *DB) (int64, error) {
				rec := func(tenant string, c retention.Counts) *audit.Record {
					return &audit.Record{Tenant: tenant, Actor: retention.SystemActor, Action: retention.ActionSweep,
						Resource: audit.Resource{Type: "workflow"}, Outcome: audit.Success, Details: audit.Details(c)}
				}
				got, err := db.SweepWorkflows(ctx, retention.Scope{Tenant: "acme", Before: time.Now()}, 10, rec)
				return got.Counts["acme"].Workflows, err
			},
		},
		{
			name: "audit trim",
			lock: `SELECT 1 FROM audit_records WHERE tenant = $1 AND seq = 1 FOR UPDATE`,
			batch: func(ctx context.Context, db *DB) (int64, error) {
				cp := func(tenant string, seq int64, hash string, n int64) *audit.Record {
					return &audit.Record{Tenant: tenant, Actor: retention.SystemActor, Action: audit.ActionCheckpoint,
						Resource: audit.Resource{Type: "audit"}, Outcome: audit.Success,
						Details: audit.Details(audit.Checkpoint{ThroughSeq: seq, ThroughHash: hash, Removed: n})}
				}
				got, err := db.TrimAudit(ctx, "acme", time.Now().Add(time.Hour), 2, cp)
				return got.Removed, err
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, err := Open(ctx, NewTestDatabase(t), WithWriters(1), WithMaxConns(4))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { db.Close() })
			for i := range 2 {
				if err := appendOne(ctx, db, "acme", i); err != nil {
					t.Fatal(err)
				}
			}
			finishedWorkflow(t, db, "acme", time.Now().Add(-time.Hour))

			holder, err := db.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(context.WithoutCancel(ctx))
			if _, err := holder.Exec(ctx, tc.lock, "acme"); err != nil {
				t.Fatalf("hold a row: %v", err)
			}
			type answer struct {
				n   int64
				err error
			}
			done := make(chan answer, 1)
			go func() {
				n, err := tc.batch(ctx, db)
				done <- answer{n, err}
			}()
			waitForLockWait(t, db)

			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := appendOne(wctx, db, "acme", 9); err != nil {
				t.Fatalf("a write while the batch waits: %v", err)
			}
			select {
			case a := <-done:
				t.Fatalf("the batch ended (%d, %v) while a row it deletes was held", a.n, a.err)
			default:
			}
			if err := holder.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			var a answer
			select {
			case a = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the batch did not end once the row was let go")
			}
			if a.err != nil || a.n == 0 {
				t.Fatalf("batch = %d, %v; want it to delete", a.n, a.err)
			}
			rep, err := audit.Verify(ctx, db, "acme")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK {
				t.Errorf("verify after the batch: %+v", rep)
			}
			var last string
			if err := db.pool.QueryRow(ctx, `SELECT action FROM audit_records WHERE tenant = 'acme' ORDER BY seq DESC LIMIT 1`).Scan(&last); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"sweep": retention.ActionSweep, "audit trim": audit.ActionCheckpoint}[tc.name]
			if diff := cmp.Diff(want, last); diff != "" {
				t.Errorf("last record of the chain (-want +got):\n%s", diff)
			}
		})
	}
}

// waitForLockWait waits until a session of db's database waits for a lock.
func waitForLockWait(t *testing.T, db *DB) {
	t.Helper()
	for range 500 {
		var n int
		err := db.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no session waits for the held row")
}
