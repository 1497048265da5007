package postgres

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

func pgTime(t time.Time) any { return micro(t) }

// CreateRollout stores a new active rollout; problem.Conflict when the
// agent has an active one (the rollouts_active index).
func (db *DB) CreateRollout(ctx context.Context, r *rollout.Rollout, rec *audit.Record, ev *webhook.Event) error {
	r.CreatedAt = micro(r.CreatedAt)
	row, err := sqlrow.RolloutValues(r, pgTime, nil)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tx.Queue(func(err error) error {
			if isUnique(err) {
				return problem.New(problem.Conflict, "agent %s has an active rollout already: end it first (DELETE /v1/agents/%s/rollout)", r.Agent, r.Agent)
			}
			return wrapErr("insert rollout")(err)
		}, `INSERT INTO rollouts (`+sqlrow.RolloutColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`, row...)
		queueWebhookEvent(tx, ev) // webhooks.go: the outbox
		tx.Audit(rec)
		return nil
	})
}

// Rollout returns one rollout of the tenant, or problem.NotFound.
func (db *DB) Rollout(ctx context.Context, tenant, id string) (*rollout.Rollout, error) {
	return db.oneRollout(ctx, `tenant = $1 AND id = $2`, "no rollout "+id, tenant, id)
}

// ActiveRollout returns the agent's active rollout, or problem.NotFound.
func (db *DB) ActiveRollout(ctx context.Context, tenant, agentName string) (*rollout.Rollout, error) {
	return db.oneRollout(ctx, `tenant = $1 AND agent = $2 AND state = 'active'`, "agent "+agentName+" has no active rollout", tenant, agentName)
}

// LatestRollout returns the agent's newest rollout, or problem.NotFound.
func (db *DB) LatestRollout(ctx context.Context, tenant, agentName string) (*rollout.Rollout, error) {
	return db.oneRollout(ctx, `tenant = $1 AND agent = $2 ORDER BY id DESC LIMIT 1`, "agent "+agentName+" has no rollout", tenant, agentName)
}

func (db *DB) oneRollout(ctx context.Context, where, missing string, args ...any) (*rollout.Rollout, error) {
	var r *rollout.Rollout
	err := db.read(ctx, func(q querier) error {
		var err error
		r, err = sqlrow.ScanRollout(q.QueryRow(ctx, `SELECT `+sqlrow.RolloutColumns+` FROM rollouts WHERE `+where, args...))
		return sqlrow.NotFound(err, "%s", missing)
	})
	return r, err
}

// EndRollout ends an active rollout in state; false when it was not active.
func (db *DB) EndRollout(ctx context.Context, tenant, id, state, failedCheck string, at time.Time, rec *audit.Record, ev *webhook.Event) (bool, error) {
	db.prepareAudit(rec)
	var ended bool
	err := db.write(ctx, func(tx *wtx) error {
		ended = false
		tag, err := tx.Exec(ctx, `UPDATE rollouts SET state = $3, failed_check = $4, ended_at = $5,
				percent = CASE WHEN $3 = 'rolled_back' THEN 0 ELSE percent END
			WHERE tenant = $1 AND id = $2 AND state = 'active'`, tenant, id, state, failedCheck, micro(at))
		if err != nil {
			return fmt.Errorf("end rollout: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		ended = true
		queueWebhookEvent(tx, ev)
		tx.Audit(rec)
		return nil
	})
	return ended, err
}

// RecordRolloutRun stores a run and its checks once per workflow.
func (db *DB) RecordRolloutRun(ctx context.Context, run *rollout.Run) (bool, error) {
	var stored bool
	err := db.write(ctx, func(tx *wtx) error {
		stored = false
		tag, err := tx.Exec(ctx, `INSERT INTO rollout_runs (tenant, rollout_id, workflow_id, arm, outcome, input_tokens,
				output_tokens, cost, currency, priced, finished_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`, sqlrow.RolloutRunValues(run, pgTime)...)
		if err != nil {
			return fmt.Errorf("insert rollout run: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		stored = true
		for _, c := range run.Checks {
			tx.Queue(wrapErr("insert rollout check"), `INSERT INTO rollout_checks (tenant, rollout_id, workflow_id, arm, name, result)
				VALUES ($1, $2, $3, $4, $5, $6)`, run.Tenant, run.RolloutID, run.WorkflowID, run.Arm, c.Name, c.Result())
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
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT arm, count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
				COALESCE(sum(cost), 0), count(*) FILTER (WHERE priced), min(NULLIF(currency, '')), max(NULLIF(currency, ''))
			FROM rollout_runs WHERE tenant = $1 AND rollout_id = $2 GROUP BY arm ORDER BY arm`, tenant, id)
		if err != nil {
			return fmt.Errorf("sum rollout runs: %w", err)
		}
		if totals, err = collect(rows, sqlrow.ScanArmTotals); err != nil {
			return err
		}
		rows, err = q.Query(ctx, `SELECT arm, name, result, count(*) FROM rollout_checks
			WHERE tenant = $1 AND rollout_id = $2 GROUP BY arm, name, result ORDER BY arm, name, result`, tenant, id)
		if err != nil {
			return fmt.Errorf("count rollout checks: %w", err)
		}
		counts, err = collect(rows, sqlrow.ScanCheckCount)
		return err
	})
	return totals, counts, err
}

// UncountedRolloutWorkflows returns finished workflows of active rollouts
// that the rollouts have not counted: from the active rollouts to each
// one's agent's workflows whose ids are no older than the rollout's id's
// time truncated to 2^20 ms (workflows_agent), never every finished
// workflow.
func (db *DB) UncountedRolloutWorkflows(ctx context.Context, finishedBefore time.Time, limit int) ([]*workflow.Workflow, error) {
	var wfs []*workflow.Workflow
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+sqlrow.WorkflowColumns+` FROM workflows WHERE (tenant, id) IN (
				SELECT w.tenant, w.id FROM rollouts r
				JOIN workflows w ON w.tenant = r.tenant AND w.agent = r.agent AND w.id >= 'wf_' || substr(r.id, 4, 6)
				WHERE r.state = 'active' AND w.started_at >= r.created_at AND w.rollout->>'id' = r.id AND w.status IN ('completed', 'failed', 'cancelled')
				  AND w.finished_at < $1
				  AND NOT EXISTS (SELECT 1 FROM rollout_runs rr WHERE rr.tenant = w.tenant AND rr.rollout_id = r.id AND rr.workflow_id = w.id)
				ORDER BY w.id LIMIT $2)
			ORDER BY id`, micro(finishedBefore), limit)
		if err != nil {
			return fmt.Errorf("list uncounted rollout workflows: %w", err)
		}
		wfs, err = collectWorkflows(rows)
		return err
	})
	return wfs, err
}
