package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/workflow"
)

// RequestCancel marks a running workflow for cancellation and returns it;
// a waiting one is handed to owner, its pending approval cancelled; a
// finished one is returned as it is.
func (db *DB) RequestCancel(ctx context.Context, tenant, id, owner string, leaseUntil time.Time) (*workflow.Workflow, bool, error) {
	var (
		w     *workflow.Workflow
		taken bool
	)
	err := db.write(ctx, func(tx dbtx) error {
		var err error
		taken = false
		w, err = sqlrow.ScanWorkflow(tx.QueryRowContext(ctx, `UPDATE workflows SET cancel_requested = 1
			WHERE tenant = ? AND id = ? AND status = 'running' RETURNING `+sqlrow.WorkflowColumns, tenant, id))
		if err != sql.ErrNoRows {
			return err
		}
		w, err = sqlrow.ScanWorkflow(tx.QueryRowContext(ctx, `UPDATE workflows
			SET status = 'running', cancel_requested = 1, owner = ?, lease_until = ?
			WHERE tenant = ? AND id = ? AND status = 'waiting' RETURNING `+sqlrow.WorkflowColumns,
			owner, sqlrow.FormatTime(leaseUntil), tenant, id))
		if err == nil {
			taken = true
			if _, err := tx.ExecContext(ctx, `UPDATE workflow_approvals SET status = 'cancelled'
				WHERE workflow_id = ? AND status = 'pending'`, id); err != nil {
				return fmt.Errorf("cancel approval: %w", err)
			}
			return nil
		}
		if err != sql.ErrNoRows {
			return err
		}
		w, err = sqlrow.ScanWorkflow(tx.QueryRowContext(ctx, `SELECT `+sqlrow.WorkflowColumns+` FROM workflows
			WHERE tenant = ? AND id = ?`, tenant, id))
		if err == sql.ErrNoRows {
			return workflowNotFound(id)
		}
		return err
	})
	return w, taken, err
}

// RenewLease extends owner's lease on those of ids it still holds.
func (db *DB) RenewLease(ctx context.Context, owner string, ids []string, until time.Time) (workflow.LeaseStatus, error) {
	if len(ids) == 0 {
		return workflow.LeaseStatus{}, nil
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return workflow.LeaseStatus{}, fmt.Errorf("encode workflow ids: %w", err)
	}
	held := map[string]bool{} // id → cancel requested
	finished := map[string]bool{}
	err = db.write(ctx, func(tx dbtx) error {
		clear(held)
		clear(finished)
		rows, err := tx.QueryContext(ctx, `UPDATE workflows SET lease_until = ?
			WHERE id IN (SELECT value FROM json_each(?)) AND status = 'running' AND owner = ?
			RETURNING id, cancel_requested`, sqlrow.FormatTime(until), string(idsJSON), owner)
		if err != nil {
			return fmt.Errorf("renew leases: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var cancel bool
			if err := rows.Scan(&id, &cancel); err != nil {
				return fmt.Errorf("renew leases: %w", err)
			}
			held[id] = cancel
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("renew leases: %w", err)
		}
		rows, err = tx.QueryContext(ctx, `SELECT id FROM workflows
			WHERE id IN (SELECT value FROM json_each(?)) AND status <> 'running'`, string(idsJSON))
		if err != nil {
			return fmt.Errorf("find finished workflows: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return fmt.Errorf("find finished workflows: %w", err)
			}
			finished[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return workflow.LeaseStatus{}, err
	}
	return leaseStatus(ids, held, finished), nil
}

// leaseStatus sorts ids, in their order, into lost and cancel-requested.
func leaseStatus(ids []string, held, finished map[string]bool) workflow.LeaseStatus {
	var st workflow.LeaseStatus
	for _, id := range ids {
		cancel, ok := held[id]
		switch {
		case ok && cancel:
			st.CancelRequested = append(st.CancelRequested, id)
		case !ok && !finished[id]:
			st.Lost = append(st.Lost, id)
		}
	}
	return st
}

// ReleaseLease gives up owner's lease on a running workflow at once.
func (db *DB) ReleaseLease(ctx context.Context, owner, workflowID string) error {
	return db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE workflows SET owner = '', lease_until = ?
			WHERE id = ? AND owner = ? AND status = 'running'`, noLease, workflowID, owner); err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		return nil
	})
}

// ClaimExpired gives owner, until until, up to limit running workflows whose
// lease lapsed before now, and returns them by id. The single writer makes
// the claim atomic.
func (db *DB) ClaimExpired(ctx context.Context, owner string, now, until time.Time, limit int) ([]*workflow.Workflow, error) {
	if limit <= 0 {
		return nil, nil
	}
	var wfs []*workflow.Workflow
	err := db.write(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE workflows SET owner = ?, lease_until = ?
			WHERE id IN (SELECT id FROM workflows WHERE status = 'running' AND lease_until < ?
				ORDER BY lease_until LIMIT ?)
			RETURNING `+sqlrow.WorkflowColumns, owner, sqlrow.FormatTime(until), fmtTimeCeil(now), limit)
		if err != nil {
			return fmt.Errorf("claim workflows: %w", err)
		}
		wfs, err = collectWorkflows(rows)
		return err
	})
	slices.SortFunc(wfs, func(a, b *workflow.Workflow) int { return strings.Compare(a.ID, b.ID) })
	return wfs, err
}
