package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/workflow"
)

var _ schedule.Store = (*DB)(nil)

// claimScheduled queues, in a workflow's creation, the run of the
// schedule that started it: the claim of its due time, which fails the
// creation when another workflow claimed it first.
func claimScheduled(tx *wtx, w *workflow.Workflow) {
	if w.ScheduleID == "" {
		return
	}
	var due *time.Time
	if !w.ScheduledFor.IsZero() {
		d := micro(w.ScheduledFor)
		due = &d
	}
	tx.Queue(func(err error) error {
		if isUnique(err) {
			return problem.New(problem.Conflict, "schedule %s already started a workflow for %s", w.ScheduleID, w.ScheduledFor.UTC().Format(time.RFC3339))
		}
		return wrapErr("claim due time")(err)
	}, `INSERT INTO schedule_runs (schedule_id, due_at, workflow_id, created_at) VALUES ($1, $2, $3, $4)`,
		w.ScheduleID, due, w.ID, micro(w.StartedAt))
}

// CreateSchedule stores a new schedule.
func (db *DB) CreateSchedule(ctx context.Context, s *schedule.Schedule, rec *audit.Record) error {
	creator, err := json.Marshal(s.Creator)
	if err != nil {
		return err
	}
	s.CreatedAt, s.UpdatedAt = micro(s.CreatedAt), micro(s.UpdatedAt)
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tx.Queue(func(err error) error {
			if isUnique(err) {
				return problem.New(problem.Conflict, "schedule %s already exists", s.ID)
			}
			return wrapErr("insert schedule")(err)
		}, `INSERT INTO schedules (id, tenant, agent, cron, timezone, goal, context, max_tool_calls, overlap,
			paused, creator, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			s.ID, s.Tenant, s.Agent, s.Cron, s.Timezone, s.Goal, string(s.Context), s.MaxToolCalls, s.Overlap,
			s.Paused, string(creator), s.CreatedAt, s.UpdatedAt)
		tx.Audit(rec)
		return nil
	})
}

// Schedule returns a schedule of the tenant, or problem.NotFound.
func (db *DB) Schedule(ctx context.Context, tenant, id string) (*schedule.Schedule, error) {
	var s *schedule.Schedule
	err := db.read(ctx, func(q querier) error {
		var err error
		s, err = sqlrow.ScanSchedule(q.QueryRow(ctx, `SELECT `+sqlrow.ScheduleColumns+` FROM schedules s WHERE s.tenant = $1 AND s.id = $2`, tenant, id))
		if sqlrow.IsNoRows(err) {
			return schedule.NotFound(id)
		}
		return err
	})
	return s, err
}

// ListSchedules returns the tenant's schedules, oldest first.
func (db *DB) ListSchedules(ctx context.Context, tenant string) ([]*schedule.Schedule, error) {
	return db.schedules(ctx, `SELECT `+sqlrow.ScheduleColumns+` FROM schedules s WHERE s.tenant = $1 ORDER BY s.id`, tenant)
}

// ActiveSchedules returns every tenant's schedules that are not paused.
func (db *DB) ActiveSchedules(ctx context.Context) ([]*schedule.Schedule, error) {
	return db.schedules(ctx, `SELECT `+sqlrow.ScheduleColumns+` FROM schedules s WHERE NOT s.paused ORDER BY s.id`)
}

func (db *DB) schedules(ctx context.Context, sql string, args ...any) ([]*schedule.Schedule, error) {
	var out []*schedule.Schedule
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("list schedules: %w", err)
		}
		out, err = collect(rows, sqlrow.ScanSchedule)
		return err
	})
	return out, err
}

// UpdateSchedule replaces a schedule's settings.
func (db *DB) UpdateSchedule(ctx context.Context, s *schedule.Schedule, rec *audit.Record) error {
	s.UpdatedAt = micro(s.UpdatedAt)
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE schedules SET agent = $3, cron = $4, timezone = $5, goal = $6, context = $7,
			max_tool_calls = $8, overlap = $9, paused = $10, paused_reason = $11, updated_at = $12 WHERE tenant = $1 AND id = $2`,
			s.Tenant, s.ID, s.Agent, s.Cron, s.Timezone, s.Goal, string(s.Context), s.MaxToolCalls, s.Overlap,
			s.Paused, s.PausedReason, s.UpdatedAt)
		if err != nil {
			return fmt.Errorf("update schedule: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return schedule.NotFound(s.ID)
		}
		tx.Audit(rec)
		return nil
	})
}

// PauseSchedule pauses a running schedule for reason, appending rec;
// false (and no record) when it was paused already or is gone.
func (db *DB) PauseSchedule(ctx context.Context, id, reason string, at time.Time, rec *audit.Record) (bool, error) {
	db.prepareAudit(rec)
	var paused bool
	err := db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE schedules SET paused = true, paused_reason = $2, updated_at = $3 WHERE id = $1 AND NOT paused`,
			id, reason, micro(at))
		if err != nil {
			return fmt.Errorf("pause schedule: %w", err)
		}
		if paused = tag.RowsAffected() == 1; paused {
			tx.Audit(rec)
		}
		return nil
	})
	return paused, err
}

// DeleteSchedule deletes a schedule and its runs.
func (db *DB) DeleteSchedule(ctx context.Context, tenant, id string, rec *audit.Record) error {
	return db.deleteWithChildren(ctx, "schedules", "schedule_runs", "schedule_id", tenant, id, rec, schedule.NotFound(id))
}

// deleteWithChildren deletes the tenant's row id of table (schedules,
// webhooks) and the rows of child whose column names it, appending rec;
// notFound answers when the tenant has no such row.
func (db *DB) deleteWithChildren(ctx context.Context, table, child, column, tenant, id string, rec *audit.Record, notFound error) error {
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE tenant = $1 AND id = $2`, tenant, id)
		if err != nil {
			return fmt.Errorf("delete from %s: %w", table, err)
		}
		if tag.RowsAffected() == 0 {
			return notFound
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+child+` WHERE `+column+` = $1`, id); err != nil {
			return fmt.Errorf("delete from %s: %w", child, err)
		}
		tx.Audit(rec)
		return nil
	})
}

// SkipDue claims a due time without a workflow, for reason, appending
// rec when it does.
func (db *DB) SkipDue(ctx context.Context, scheduleID string, due time.Time, reason string, rec *audit.Record) (bool, error) {
	db.prepareAudit(rec)
	var claimed bool
	err := db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO schedule_runs (schedule_id, due_at, workflow_id, created_at, reason)
			VALUES ($1, $2, '', $3, $4) ON CONFLICT (schedule_id, due_at) DO NOTHING`, scheduleID, micro(due), db.now(), reason)
		if err != nil {
			return fmt.Errorf("skip due time: %w", err)
		}
		if claimed = tag.RowsAffected() == 1; claimed {
			tx.Audit(rec)
		}
		return nil
	})
	return claimed, err
}

// Busy reports whether a workflow the schedule started is running or waiting.
func (db *DB) Busy(ctx context.Context, scheduleID string) (bool, error) {
	var busy bool
	err := db.read(ctx, func(q querier) error {
		return q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schedule_runs r JOIN workflows w ON w.id = r.workflow_id
			WHERE r.schedule_id = $1 AND w.status IN ('running', 'waiting'))`, scheduleID).Scan(&busy)
	})
	return busy, err
}

// ScheduleOf returns the id of the schedule that started a workflow.
func (db *DB) ScheduleOf(ctx context.Context, workflowID string) (string, error) {
	var id string
	err := db.read(ctx, func(q querier) error {
		err := q.QueryRow(ctx, `SELECT schedule_id FROM schedule_runs WHERE workflow_id = $1 AND workflow_id <> ''`, workflowID).Scan(&id)
		if sqlrow.IsNoRows(err) {
			return nil
		}
		return err
	})
	return id, err
}
