package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/workflow"
)

// RequestCancel marks a running workflow for cancellation and returns it;
// a waiting one is handed to owner, its pending approval cancelled (the
// workflow's row locked first, as DecideApproval does); a finished one is
// returned as it is.
func (db *DB) RequestCancel(ctx context.Context, tenant, id, owner string, leaseUntil time.Time) (*workflow.Workflow, bool, error) {
	var (
		w     *workflow.Workflow
		taken bool
	)
	err := db.write(ctx, func(tx *wtx) error {
		var err error
		taken = false
		w, err = sqlrow.ScanWorkflow(tx.QueryRow(ctx, `SELECT `+sqlrow.WorkflowColumns+` FROM workflows
			WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return workflowNotFound(id)
		}
		if err != nil {
			return err
		}
		switch w.Status {
		case workflow.Running:
			w.CancelRequested = true
			_, err = tx.Exec(ctx, `UPDATE workflows SET cancel_requested = true WHERE id = $1`, id)
			tx.notify(changeCancelled, id) // its owner stops it at once
		case workflow.Waiting:
			taken = true
			w.Status, w.CancelRequested, w.Owner, w.LeaseUntil = workflow.Running, true, owner, micro(leaseUntil)
			if _, err = tx.Exec(ctx, `UPDATE workflows SET status = 'running', cancel_requested = true, owner = $2,
				lease_until = $3 WHERE id = $1`, id, owner, w.LeaseUntil); err == nil {
				_, err = tx.Exec(ctx, `UPDATE workflow_approvals SET status = 'cancelled'
					WHERE workflow_id = $1 AND status = 'pending'`, id)
			}
		}
		if err != nil {
			return fmt.Errorf("request cancel: %w", err)
		}
		return nil
	})
	return w, taken, err
}

// RenewLease extends owner's lease on those of ids it still holds, in one
// statement. A workflow whose row a write of this replica holds at that
// moment (its end being stored) is skipped rather than waited for: a
// renewal taking many rows in no fixed order while a batch of writes takes
// some of them in another order would deadlock. A skipped workflow still
// owned here counts as held; its lease is extended by the next renewal.
func (db *DB) RenewLease(ctx context.Context, owner string, ids []string, until time.Time) (workflow.LeaseStatus, error) {
	if len(ids) == 0 {
		return workflow.LeaseStatus{}, nil
	}
	rows, err := db.pool.Query(ctx, `WITH renewed AS (
			UPDATE workflows SET lease_until = $3
			WHERE id IN (SELECT id FROM workflows WHERE id = ANY($1) AND status = 'running' AND owner = $2
				FOR NO KEY UPDATE SKIP LOCKED)
			RETURNING id, cancel_requested)
		SELECT w.id, w.status <> 'running', r.id IS NOT NULL OR (w.status = 'running' AND w.owner = $2),
			coalesce(r.cancel_requested, w.cancel_requested)
		FROM workflows w LEFT JOIN renewed r ON r.id = w.id
		WHERE w.id = ANY($1)`, ids, owner, micro(until))
	if err != nil {
		return workflow.LeaseStatus{}, fmt.Errorf("renew leases: %w", unavailable(err))
	}
	held := map[string]bool{} // id → cancel requested
	finished := map[string]bool{}
	var (
		id                      string
		done, renewed, canceled bool
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &done, &renewed, &canceled}, func() error {
		switch {
		case renewed:
			held[id] = canceled
		case done:
			finished[id] = true
		}
		return nil
	})
	if err != nil {
		return workflow.LeaseStatus{}, fmt.Errorf("renew leases: %w", err)
	}
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
	return st, nil
}

// ReleaseLease gives up owner's lease on a running workflow at once.
func (db *DB) ReleaseLease(ctx context.Context, owner, workflowID string) error {
	// Other replicas are told, so one takes the workflow over at once.
	if _, err := db.pool.Exec(ctx, `WITH released AS (UPDATE workflows SET owner = '', lease_until = $3
			WHERE id = $1 AND owner = $2 AND status = 'running' RETURNING 1)
		SELECT pg_notify('`+changesChannel+`', $4) FROM released`,
		workflowID, owner, time.Time{}, db.origin+" "+changeReleased); err != nil {
		return fmt.Errorf("release lease: %w", unavailable(err))
	}
	return nil
}

// ClaimExpired gives owner, until until, up to limit running workflows whose
// lease lapsed before now, and returns them by id. Rows another replica is
// claiming (or writing) are skipped, so no two claims take one workflow.
func (db *DB) ClaimExpired(ctx context.Context, owner string, now, until time.Time, limit int) ([]*workflow.Workflow, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := db.pool.Query(ctx, `UPDATE workflows SET owner = $1, lease_until = $2
		WHERE id IN (SELECT id FROM workflows WHERE status = 'running' AND lease_until < $3
			ORDER BY lease_until LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING `+sqlrow.WorkflowColumns, owner, micro(until), microCeil(now), limit)
	if err != nil {
		return nil, fmt.Errorf("claim workflows: %w", unavailable(err))
	}
	wfs, err := collectWorkflows(rows)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(wfs, func(a, b *workflow.Workflow) int { return strings.Compare(a.ID, b.ID) })
	return wfs, nil
}
