package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

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
	return db.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(ctx, `INSERT INTO replays (`+sqlrow.ReplayColumns+`, status, replay_workflow_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			r.ID, r.Tenant, r.WorkflowID, r.Target, r.CreatedAt, creator, data, replayStatus(r), r.ReplayWorkflowID)
		if isUnique(err) {
			return problem.New(problem.Conflict, "replay %s already exists", r.ID)
		}
		if err != nil {
			return fmt.Errorf("insert replay: %w", err)
		}
		tx.Audit(rec)
		if r.Status != replay.StatusRunning {
			queueWebhookEvent(tx, webhook.ReplayDone(r)) // webhooks.go: the outbox
		}
		return nil
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
	err = db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE replays SET data = $1, status = $2, replay_workflow_id = $3
			WHERE id = $4 AND status = 'running'`, data, replayStatus(r), r.ReplayWorkflowID, r.ID)
		if err != nil {
			return fmt.Errorf("complete replay: %w", err)
		}
		if done = tag.RowsAffected() == 1; done {
			queueWebhookEvent(tx, webhook.ReplayDone(r))
		}
		return nil
	})
	return done, err
}

// ReplayOfWorkflow returns the replay whose new workflow is workflowID.
func (db *DB) ReplayOfWorkflow(ctx context.Context, workflowID string) (*replay.Replay, error) {
	var r *replay.Replay
	err := db.read(ctx, func(q querier) error {
		var err error
		r, err = sqlrow.ScanReplay(q.QueryRow(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE replay_workflow_id = $1 AND replay_workflow_id <> '' LIMIT 1`, workflowID))
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.New(problem.NotFound, "no replay ran workflow %q", workflowID)
		}
		return err
	})
	return r, err
}

// RunningReplays returns up to limit running replays, oldest first.
func (db *DB) RunningReplays(ctx context.Context, limit int) ([]*replay.Replay, error) {
	var rs []*replay.Replay
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE status = 'running' ORDER BY id LIMIT $1`, limit)
		if err != nil {
			return fmt.Errorf("list running replays: %w", err)
		}
		rs, err = collect(rows, sqlrow.ScanReplay)
		if err != nil {
			return fmt.Errorf("read running replays: %w", err)
		}
		return nil
	})
	return rs, err
}

// Replay returns a replay of the tenant, or problem.NotFound.
func (db *DB) Replay(ctx context.Context, tenant, id string) (*replay.Replay, error) {
	var r *replay.Replay
	err := db.read(ctx, func(q querier) error {
		var err error
		r, err = sqlrow.ScanReplay(q.QueryRow(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE tenant = $1 AND id = $2`, tenant, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return replay.NotFound(id)
		}
		return err
	})
	return r, err
}

// ReplayByID returns a replay of any tenant, or problem.NotFound.
func (db *DB) ReplayByID(ctx context.Context, id string) (*replay.Replay, error) {
	var r *replay.Replay
	err := db.read(ctx, func(q querier) error {
		var err error
		r, err = sqlrow.ScanReplay(q.QueryRow(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays WHERE id = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return replay.NotFound(id)
		}
		return err
	})
	return r, err
}

// ListReplays returns the tenant's replays matching f, newest first.
func (db *DB) ListReplays(ctx context.Context, tenant string, f replay.ListFilter) ([]*replay.Replay, error) {
	where := []string{"tenant = $1"}
	args := []any{tenant}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.WorkflowID != "" {
		add("workflow_id = $%d", f.WorkflowID)
	}
	if f.Target != "" {
		add("target = $%d", f.Target)
	}
	if f.Before != "" {
		add("id < $%d", f.Before)
	}
	args = append(args, page.Size(f.Limit))
	var rs []*replay.Replay
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+sqlrow.ReplayColumns+` FROM replays
			WHERE `+strings.Join(where, " AND ")+fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args)), args...)
		if err != nil {
			return fmt.Errorf("list replays: %w", err)
		}
		rs, err = collect(rows, sqlrow.ScanReplay)
		if err != nil {
			return fmt.Errorf("read replays: %w", err)
		}
		return nil
	})
	return rs, err
}
