package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/webhook"
)

// AddToolRefresh stores r, assigning r.N; a pending r supersedes the
// tool's earlier pending refreshes; with t (an applied r) it also replaces
// the tool and its operations, while the tool is at r.BaseRevision.
func (db *DB) AddToolRefresh(ctx context.Context, r *tool.Refresh, t *tool.Tool, ops []tool.Operation, rec *audit.Record) error {
	kept := ops
	if r.Status != tool.RefreshPending {
		kept = nil
	}
	var toolRow []any
	if t != nil {
		var err error
		if toolRow, err = sqlrow.ToolValues(t, sqlrow.FormatTime); err != nil {
			return err
		}
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		if t != nil {
			if err := replaceTool(ctx, tx, t, toolRow, ops, r.BaseRevision); err != nil {
				return err
			}
		} else if err := toolExists(ctx, tx, r.Tenant, r.ToolID); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(n), 0) + 1 FROM tool_refreshes WHERE tenant = ? AND tool_id = ?`,
			r.Tenant, r.ToolID).Scan(&r.N); err != nil {
			return fmt.Errorf("number refresh: %w", err)
		}
		row, err := sqlrow.RefreshValues(r, kept, sqlrow.FormatTime, "")
		if err != nil {
			return err
		}
		if r.Status == tool.RefreshPending {
			if _, err := tx.ExecContext(ctx, `UPDATE tool_refreshes SET status = 'superseded', operations = '[]'
				WHERE tenant = ? AND tool_id = ? AND status = 'pending'`, r.Tenant, r.ToolID); err != nil {
				return fmt.Errorf("supersede refreshes: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tool_refreshes (`+sqlrow.RefreshColumns+`, operations)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, row...); isUnique(err) {
			return problem.New(problem.Conflict, "another refresh of tool %s was stored at the same time: refresh again", r.ToolID)
		} else if err != nil {
			return fmt.Errorf("insert refresh: %w", err)
		}
		if r.Drifted() {
			if err := queueWebhookEvent(ctx, tx, webhook.Drifted(r)); err != nil {
				return err
			}
		}
		return appendAudit(ctx, tx, rec)
	})
}

// ToolRefreshes lists a tool's refreshes, newest first.
func (db *DB) ToolRefreshes(ctx context.Context, tenant, toolID string) ([]*tool.Refresh, error) {
	var rs []*tool.Refresh
	err := db.read(ctx, func(tx dbtx) error {
		if err := toolExists(ctx, tx, tenant, toolID); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.RefreshColumns+` FROM tool_refreshes
			WHERE tenant = ? AND tool_id = ? ORDER BY n DESC`, tenant, toolID)
		if err != nil {
			return fmt.Errorf("list refreshes: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			r, err := sqlrow.ScanRefresh(rows)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		return rows.Err()
	})
	return rs, err
}

// ToolRefresh returns refresh n with its kept operations, or problem.NotFound.
func (db *DB) ToolRefresh(ctx context.Context, tenant, toolID string, n int) (*tool.Refresh, []tool.Operation, error) {
	var (
		r   *tool.Refresh
		ops []tool.Operation
	)
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		r, ops, err = sqlrow.ScanRefreshOperations(tx.QueryRowContext(ctx, `SELECT `+sqlrow.RefreshColumns+`, operations
			FROM tool_refreshes WHERE tenant = ? AND tool_id = ? AND n = ?`, tenant, toolID, n))
		if sqlrow.IsNoRows(err) {
			if err := toolExists(ctx, tx, tenant, toolID); err != nil {
				return err
			}
			return sqlrow.RefreshNotFound(toolID, n)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return r, ops, nil
}

// ApplyToolRefresh replaces the tool by t and ops and marks refresh n
// applied; problem.Conflict when n is no longer pending or the tool left
// its base revision.
func (db *DB) ApplyToolRefresh(ctx context.Context, t *tool.Tool, n int, ops []tool.Operation, rec *audit.Record) error {
	row, err := sqlrow.ToolValues(t, sqlrow.FormatTime)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		var base int
		err := tx.QueryRowContext(ctx, `UPDATE tool_refreshes SET status = 'applied', tool_revision = ?, applied_at = ?, operations = '[]'
			WHERE tenant = ? AND tool_id = ? AND n = ? AND status = 'pending' RETURNING base_revision`,
			t.Revision, sqlrow.FormatTime(t.UpdatedAt), t.Tenant, t.ID, n).Scan(&base)
		if err == sql.ErrNoRows {
			return problem.New(problem.Conflict, "revision %d of tool %s is no longer pending", n, t.ID)
		}
		if err != nil {
			return fmt.Errorf("apply refresh: %w", err)
		}
		if err := replaceTool(ctx, tx, t, row, ops, base); err != nil {
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
}
