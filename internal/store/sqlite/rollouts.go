package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

var _ rollout.Store = (*DB)(nil)

// CreateRollout stores a new active rollout; problem.Conflict when the
// agent has an active one (the rollouts_active index).
func (db *DB) CreateRollout(ctx context.Context, r *rollout.Rollout, rec *audit.Record, ev *webhook.Event) error {
	r.CreatedAt = micro(r.CreatedAt)
	row, err := sqlrow.RolloutValues(r, sqlrow.FormatTime, "")
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO rollouts (`+sqlrow.RolloutColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, row...)
		if isUnique(err) {
			return problem.New(problem.Conflict, "agent %s has an active rollout already: end it first (DELETE /v1/agents/%s/rollout)", r.Agent, r.Agent)
		}
		if err != nil {
			return fmt.Errorf("insert rollout: %w", err)
		}
		if err := queueWebhookEvent(ctx, tx, ev); err != nil { // webhooks.go: the outbox
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Rollout returns one rollout of the tenant, or problem.NotFound.
func (db *DB) Rollout(ctx context.Context, tenant, id string) (*rollout.Rollout, error) {
	return db.oneRollout(ctx, `tenant = ? AND id = ?`, "no rollout "+id, tenant, id)
}

// ActiveRollout returns the agent's active rollout, or problem.NotFound.
func (db *DB) ActiveRollout(ctx context.Context, tenant, agentName string) (*rollout.Rollout, error) {
	return db.oneRollout(ctx, `tenant = ? AND agent = ? AND state = 'active'`, "agent "+agentName+" has no active rollout", tenant, agentName)
}

// LatestRollout returns the agent's newest rollout, or problem.NotFound.
func (db *DB) LatestRollout(ctx context.Context, tenant, agentName string) (*rollout.Rollout, error) {
	return db.oneRollout(ctx, `tenant = ? AND agent = ? ORDER BY id DESC LIMIT 1`, "agent "+agentName+" has no rollout", tenant, agentName)
}

func (db *DB) oneRollout(ctx context.Context, where, missing string, args ...any) (*rollout.Rollout, error) {
	var r *rollout.Rollout
	err := db.query(ctx, func(q dbtx) error {
		var err error
		r, err = sqlrow.ScanRollout(q.QueryRowContext(ctx, `SELECT `+sqlrow.RolloutColumns+` FROM rollouts WHERE `+where, args...))
		return sqlrow.NotFound(err, "%s", missing)
	})
	return r, err
}

// EndRollout ends an active rollout in state; false when it was not active.
func (db *DB) EndRollout(ctx context.Context, tenant, id, state, failedCheck string, at time.Time, rec *audit.Record, ev *webhook.Event) (bool, error) {
	db.prepareAudit(rec)
	var ended bool
	err := db.write(ctx, func(tx dbtx) error {
		ended = false
		res, err := tx.ExecContext(ctx, `UPDATE rollouts SET state = ?, failed_check = ?, ended_at = ?,
				percent = CASE WHEN ? = 'rolled_back' THEN 0 ELSE percent END
			WHERE tenant = ? AND id = ? AND state = 'active'`, state, failedCheck, fmtTime(at), state, tenant, id)
		if err != nil {
			return fmt.Errorf("end rollout: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		ended = true
		if err := queueWebhookEvent(ctx, tx, ev); err != nil {
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
	return ended, err
}

// RecordRolloutRun stores a run and its checks once per workflow.
func (db *DB) RecordRolloutRun(ctx context.Context, run *rollout.Run) (bool, error) {
	var stored bool
	err := db.write(ctx, func(tx dbtx) error {
		stored = false
		res, err := tx.ExecContext(ctx, `INSERT INTO rollout_runs (tenant, rollout_id, workflow_id, arm, outcome, input_tokens,
				output_tokens, cost, currency, priced, finished_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, sqlrow.RolloutRunValues(run, sqlrow.FormatTime)...)
		if err != nil {
			return fmt.Errorf("insert rollout run: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		stored = true
		for _, c := range run.Checks {
			if _, err := tx.ExecContext(ctx, `INSERT INTO rollout_checks (tenant, rollout_id, workflow_id, arm, name, result)
				VALUES (?, ?, ?, ?, ?, ?)`, run.Tenant, run.RolloutID, run.WorkflowID, run.Arm, c.Name, c.Result()); err != nil {
				return fmt.Errorf("insert rollout check: %w", err)
			}
		}
		return nil
	})
	return stored, err
}

// RolloutTotals sums a rollout's runs and counts its checks by arm.
func (db *DB) RolloutTotals(ctx context.Context, tenant, id string) ([]rollout.ArmTotals, []rollout.CheckCount, error) {
	var (
		totals []rollout.ArmTotals
		counts []rollout.CheckCount
	)
	err := db.read(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, `SELECT arm, count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
				COALESCE(sum(cost), 0.0), sum(CASE WHEN priced THEN 1 ELSE 0 END), min(NULLIF(currency, '')), max(NULLIF(currency, ''))
			FROM rollout_runs WHERE tenant = ? AND rollout_id = ? GROUP BY arm ORDER BY arm`, tenant, id)
		if err != nil {
			return fmt.Errorf("sum rollout runs: %w", err)
		}
		if totals, err = collect(rows, sqlrow.ScanArmTotals); err != nil {
			return err
		}
		rows, err = q.QueryContext(ctx, `SELECT arm, name, result, count(*) FROM rollout_checks
			WHERE tenant = ? AND rollout_id = ? GROUP BY arm, name, result ORDER BY arm, name, result`, tenant, id)
		if err != nil {
			return fmt.Errorf("count rollout checks: %w", err)
		}
		counts, err = collect(rows, sqlrow.ScanCheckCount)
		return err
	})
	return totals, counts, err
}

// uncountedRolloutWorkflows lists what UncountedRolloutWorkflows returns.
// It walks from the active rollouts (rollouts_active) to each one's
// agent's workflows started since it (workflows_agent, from the rollout
// id's time truncated to 2^20 ms, about 17 minutes, so that a workflow
// whose id was made just before the rollout is not left out): with no
// active rollout it reads nothing, and never every finished workflow.
const uncountedRolloutWorkflows = `SELECT ` + sqlrow.WorkflowColumns + ` FROM workflows WHERE (tenant, id) IN (
		SELECT w.tenant, w.id FROM rollouts r
		CROSS JOIN workflows w ON w.tenant = r.tenant AND w.agent = r.agent AND w.id >= 'wf_' || substr(r.id, 4, 6)
		WHERE r.state = 'active' AND w.started_at >= r.created_at AND json_extract(w.rollout, '$.id') = r.id
		  AND w.status IN ('completed', 'failed', 'cancelled') AND w.finished_at != '' AND w.finished_at < ?
		  AND NOT EXISTS (SELECT 1 FROM rollout_runs rr WHERE rr.tenant = w.tenant AND rr.rollout_id = r.id AND rr.workflow_id = w.id)
		ORDER BY w.id LIMIT ?)
	ORDER BY id`

// UncountedRolloutWorkflows returns finished workflows of active rollouts
// that the rollouts have not counted.
func (db *DB) UncountedRolloutWorkflows(ctx context.Context, finishedBefore time.Time, limit int) ([]*workflow.Workflow, error) {
	var wfs []*workflow.Workflow
	err := db.read(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, uncountedRolloutWorkflows, fmtTime(finishedBefore), limit)
		if err != nil {
			return fmt.Errorf("list uncounted rollout workflows: %w", err)
		}
		wfs, err = collectWorkflows(rows)
		return err
	})
	return wfs, err
}
