package sqlite

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

// claimScheduled stores, in a workflow's creation, the run of the schedule
// that started it: the claim of its due time, which fails the creation
// when another workflow claimed it first.
func claimScheduled(ctx context.Context, tx dbtx, w *workflow.Workflow) error {
	if w.ScheduleID == "" {
		return nil
	}
	var due any
	if !w.ScheduledFor.IsZero() {
		due = sqlrow.FormatTime(w.ScheduledFor)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO schedule_runs (schedule_id, due_at, workflow_id, created_at) VALUES (?, ?, ?, ?)`,
		w.ScheduleID, due, w.ID, sqlrow.FormatTime(w.StartedAt))
	if isUnique(err) {
		return problem.New(problem.Conflict, "schedule %s already started a workflow for %s", w.ScheduleID, w.ScheduledFor.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return fmt.Errorf("claim due time: %w", err)
	}
	return nil
}

// CreateSchedule stores a new schedule.
func (db *DB) CreateSchedule(ctx context.Context, s *schedule.Schedule, rec *audit.Record) error {
	creator, err := json.Marshal(s.Creator)
	if err != nil {
		return err
	}
	s.CreatedAt, s.UpdatedAt = micro(s.CreatedAt), micro(s.UpdatedAt)
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO schedules (id, tenant, agent, cron, timezone, goal, context,
			max_tool_calls, overlap, paused, creator, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			s.ID, s.Tenant, s.Agent, s.Cron, s.Timezone, s.Goal, string(s.Context), s.MaxToolCalls, s.Overlap,
			s.Paused, string(creator), sqlrow.FormatTime(s.CreatedAt), sqlrow.FormatTime(s.UpdatedAt))
		if isUnique(err) {
			return problem.New(problem.Conflict, "schedule %s already exists", s.ID)
		}
		if err != nil {
			return fmt.Errorf("insert schedule: %w", err)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Schedule returns a schedule of the tenant, or problem.NotFound.
func (db *DB) Schedule(ctx context.Context, tenant, id string) (*schedule.Schedule, error) {
	var s *schedule.Schedule
	err := db.query(ctx, func(q dbtx) error {
		var err error
		s, err = sqlrow.ScanSchedule(q.QueryRowContext(ctx, `SELECT `+sqlrow.ScheduleColumns+` FROM schedules s WHERE s.tenant = ? AND s.id = ?`, tenant, id))
		if sqlrow.IsNoRows(err) {
			return schedule.NotFound(id)
		}
		return err
	})
	return s, err
}

// ListSchedules returns the tenant's schedules, oldest first.
func (db *DB) ListSchedules(ctx context.Context, tenant string) ([]*schedule.Schedule, error) {
	return db.schedules(ctx, `SELECT `+sqlrow.ScheduleColumns+` FROM schedules s WHERE s.tenant = ? ORDER BY s.id`, tenant)
}

// ActiveSchedules returns every tenant's schedules that are not paused.
func (db *DB) ActiveSchedules(ctx context.Context) ([]*schedule.Schedule, error) {
	return db.schedules(ctx, `SELECT `+sqlrow.ScheduleColumns+` FROM schedules s WHERE NOT s.paused ORDER BY s.id`)
}

func (db *DB) schedules(ctx context.Context, query string, args ...any) ([]*schedule.Schedule, error) {
	var out []*schedule.Schedule
	err := db.read(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, query, args...)
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
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET agent = ?, cron = ?, timezone = ?, goal = ?, context = ?,
			max_tool_calls = ?, overlap = ?, paused = ?, paused_reason = ?, updated_at = ? WHERE tenant = ? AND id = ?`,
			s.Agent, s.Cron, s.Timezone, s.Goal, string(s.Context), s.MaxToolCalls, s.Overlap, s.Paused,
			s.PausedReason, sqlrow.FormatTime(s.UpdatedAt), s.Tenant, s.ID)
		if err != nil {
			return fmt.Errorf("update schedule: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return schedule.NotFound(s.ID)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// PauseSchedule pauses a running schedule for reason, appending rec;
// false (and no record) when it was paused already or is gone.
func (db *DB) PauseSchedule(ctx context.Context, id, reason string, at time.Time, rec *audit.Record) (bool, error) {
	db.prepareAudit(rec)
	var paused bool
	err := db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET paused = 1, paused_reason = ?, updated_at = ? WHERE id = ? AND NOT paused`,
			reason, sqlrow.FormatTime(micro(at)), id)
		if err != nil {
			return fmt.Errorf("pause schedule: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		paused = true
		return appendAudit(ctx, tx, rec)
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
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE tenant = ? AND id = ?`, tenant, id)
		if err != nil {
			return fmt.Errorf("delete from %s: %w", table, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+child+` WHERE `+column+` = ?`, id); err != nil {
			return fmt.Errorf("delete from %s: %w", child, err)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// SkipDue claims a due time without a workflow, for reason, appending
// rec when it does.
func (db *DB) SkipDue(ctx context.Context, scheduleID string, due time.Time, reason string, rec *audit.Record) (bool, error) {
	db.prepareAudit(rec)
	var claimed bool
	err := db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO schedule_runs (schedule_id, due_at, workflow_id, created_at, reason)
			VALUES (?, ?, '', ?, ?) ON CONFLICT (schedule_id, due_at) DO NOTHING`, scheduleID, sqlrow.FormatTime(due), sqlrow.FormatTime(db.now()), reason)
		if err != nil {
			return fmt.Errorf("skip due time: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			claimed = true
			return appendAudit(ctx, tx, rec)
		}
		return nil
	})
	return claimed, err
}

// Busy reports whether a workflow the schedule started is running or waiting.
func (db *DB) Busy(ctx context.Context, scheduleID string) (bool, error) {
	var busy bool
	err := db.query(ctx, func(q dbtx) error {
		return q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schedule_runs r JOIN workflows w ON w.id = r.workflow_id
			WHERE r.schedule_id = ? AND w.status IN ('running', 'waiting'))`, scheduleID).Scan(&busy)
	})
	return busy, err
}

// ScheduleOf returns the id of the schedule that started a workflow.
func (db *DB) ScheduleOf(ctx context.Context, workflowID string) (string, error) {
	var id string
	err := db.query(ctx, func(q dbtx) error {
		err := q.QueryRowContext(ctx, `SELECT schedule_id FROM schedule_runs WHERE workflow_id = ? AND workflow_id <> ''`, workflowID).Scan(&id)
		if sqlrow.IsNoRows(err) {
			return nil
		}
		return err
	})
	return id, err
}
