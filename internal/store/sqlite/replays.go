package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/webhook"
)

var _ replay.Store = (*DB)(nil)

// CreateReplay stores r and appends rec in the same transaction; r.CreatedAt
// is set when zero and brought to the precision it is stored at.
func (db *DB) CreateReplay(ctx context.Context, r *replay.Replay, rec *audit.Record) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = db.now()
	}
	r.CreatedAt = micro(r.CreatedAt)
	creator, data, err := r.Encode()
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO replays (`+sqlrow.ReplayColumns+`, status, replay_workflow_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Tenant, r.WorkflowID, r.Target, sqlrow.FormatTime(r.CreatedAt), creator, data, replayStatus(r), r.ReplayWorkflowID)
		if isUnique(err) {
			return problem.New(problem.Conflict, "replay %s already exists", r.ID)
		}
		if err != nil {
			return fmt.Errorf("insert replay: %w", err)
		}
		if r.Status != replay.StatusRunning {
			if err := queueWebhookEvent(ctx, tx, webhook.ReplayDone(r)); err != nil { // webhooks.go: the outbox
				return err
			}
		}
		return appendAudit(ctx, tx, rec)
	})
}

// replayStatus is r's status as stored: completed when unset.
func replayStatus(r *replay.Replay) string {
	if r.Status == "" {
		return replay.StatusCompleted
	}
	return r.Status
}

// CompleteReplay stores the end of a running replay and queues its
// replay.completed event; false when it was no longer running.
func (db *DB) CompleteReplay(ctx context.Context, r *replay.Replay) (bool, error) {
	_, data, err := r.Encode()
	if err != nil {
		return false, err
	}
	done := false
	err = db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE replays SET data = ?, status = ?, replay_workflow_id = ?
			WHERE id = ? AND status = 'running'`, data, replayStatus(r), r.ReplayWorkflowID, r.ID)
		if err != nil {
			return fmt.Errorf("complete replay: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("complete replay: %w", err)
		}
		if done = n == 1; !done {
			return nil
		}
		return queueWebhookEvent(ctx, tx, webhook.ReplayDone(r))
	})
	return done, err
}

// ReplayOfWorkflow returns the replay whose new workflow is workflowID.
func (db *DB) ReplayOfWorkflow(ctx context.Context, workflowID string) (*replay.Replay, error) {
	var r *replay.Replay
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		r, err = sqlrow.ScanReplay(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE replay_workflow_id = ? AND replay_workflow_id <> '' LIMIT 1`, workflowID))
		if err == sql.ErrNoRows {
			return problem.New(problem.NotFound, "no replay ran workflow %q", workflowID)
		}
		return err
	})
	return r, err
}

// RunningReplays returns up to limit running replays, oldest first.
func (db *DB) RunningReplays(ctx context.Context, limit int) ([]*replay.Replay, error) {
	var rs []*replay.Replay
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE status = 'running' ORDER BY id LIMIT ?`, limit)
		if err != nil {
			return fmt.Errorf("list running replays: %w", err)
		}
		rs, err = scanReplays(rows)
		return err
	})
	return rs, err
}

// Replay returns a replay of the tenant, or problem.NotFound.
func (db *DB) Replay(ctx context.Context, tenant, id string) (*replay.Replay, error) {
	var r *replay.Replay
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		r, err = sqlrow.ScanReplay(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE tenant = ? AND id = ?`, tenant, id))
		if err == sql.ErrNoRows {
			return replay.NotFound(id)
		}
		return err
	})
	return r, err
}

// ReplayByID returns a replay of any tenant, or problem.NotFound.
func (db *DB) ReplayByID(ctx context.Context, id string) (*replay.Replay, error) {
	var r *replay.Replay
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		r, err = sqlrow.ScanReplay(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays WHERE id = ?`, id))
		if err == sql.ErrNoRows {
			return replay.NotFound(id)
		}
		return err
	})
	return r, err
}

// ListReplays returns the tenant's replays matching f, newest first.
func (db *DB) ListReplays(ctx context.Context, tenant string, f replay.ListFilter) ([]*replay.Replay, error) {
	where := []string{"tenant = ?"}
	args := []any{tenant}
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.WorkflowID != "" {
		add("workflow_id = ?", f.WorkflowID)
	}
	if f.Target != "" {
		add("target = ?", f.Target)
	}
	if f.Before != "" {
		add("id < ?", f.Before)
	}
	var rs []*replay.Replay
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, append(args, page.Size(f.Limit))...)
		if err != nil {
			return fmt.Errorf("list replays: %w", err)
		}
		rs, err = scanReplays(rows)
		return err
	})
	return rs, err
}

// scanReplays reads every row of sqlrow.ReplayColumns.
func scanReplays(rows *sql.Rows) ([]*replay.Replay, error) {
	defer rows.Close()
	var rs []*replay.Replay
	for rows.Next() {
		r, err := sqlrow.ScanReplay(rows)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read replays: %w", err)
	}
	return rs, nil
}
