package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// SuspendWorkflow stores the last steps and the pending approval a, and
// sets the workflow waiting without a lease, provided owner holds it.
func (db *DB) SuspendWorkflow(ctx context.Context, owner string, a *workflow.Approval, last ...workflow.StepWrite) error {
	lastRows := db.prepareSteps(owner, last)
	a.RequestedAt, a.Deadline = micro(a.RequestedAt), micro(a.Deadline)
	budget, err := sqlrow.ApprovalBudget(a)
	if err != nil {
		return err
	}
	return db.write(ctx, func(tx dbtx) error {
		if err := appendSteps(ctx, tx, last, lastRows); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE workflows SET status = 'waiting', owner = '', lease_until = ?
			WHERE id = ? AND status = 'running' AND owner = ?`, noLease, a.WorkflowID, owner)
		if err := leaseHeld(res, err, a.WorkflowID, "suspend workflow"); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO workflow_approvals (`+sqlrow.ApprovalColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', '', 0, ?)`,
			a.WorkflowID, a.Step, a.Tenant, a.Agent, a.AgentVersion, a.Action, a.Reason, a.ApproverScope,
			a.AllowSelf, a.OnTimeout, a.Invoker, sqlrow.FormatTime(a.RequestedAt), sqlrow.FormatTime(a.Deadline),
			a.Remaining.Milliseconds(), workflow.ApprovalPending, budget)
		if err != nil {
			return fmt.Errorf("insert approval: %w", err)
		}
		return queueWebhookEvent(ctx, tx, webhook.Waiting(a)) // webhooks.go: the outbox
	})
}

// DecideApproval records d on a pending approval and hands its waiting
// workflow to owner; the single writer makes the decision once.
func (db *DB) DecideApproval(ctx context.Context, d workflow.Decision, owner string, leaseUntil time.Time,
	rec *audit.Record) (*workflow.Workflow, *workflow.Approval, error) {
	d.At = micro(d.At)
	db.prepareAudit(rec)
	var (
		wf *workflow.Workflow
		a  *workflow.Approval
	)
	err := db.write(ctx, func(tx dbtx) error {
		var err error
		wf, err = sqlrow.ScanWorkflow(tx.QueryRowContext(ctx, `SELECT `+sqlrow.WorkflowColumns+` FROM workflows
			WHERE tenant = ? AND id = ?`, d.Tenant, d.WorkflowID))
		if sqlrow.IsNoRows(err) {
			return workflowNotFound(d.WorkflowID)
		}
		if err != nil {
			return err
		}
		a, err = sqlrow.ScanApproval(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
			WHERE workflow_id = ? AND step = ?`, d.WorkflowID, d.Step))
		if sqlrow.IsNoRows(err) {
			return workflow.ConflictOn(wf, nil, d.Step)
		}
		if err != nil {
			return err
		}
		if a.Status != workflow.ApprovalPending || wf.Status != workflow.Waiting {
			return workflow.ConflictOn(wf, a, d.Step)
		}
		wf.Status, wf.Owner, wf.LeaseUntil = workflow.Running, owner, micro(leaseUntil)
		wf.Deadline = micro(d.At.Add(a.Remaining))
		if _, err := tx.ExecContext(ctx, `UPDATE workflows SET status = 'running', owner = ?, lease_until = ?, deadline = ?
			WHERE id = ?`, owner, sqlrow.FormatTime(wf.LeaseUntil), sqlrow.FormatTime(wf.Deadline), wf.ID); err != nil {
			return fmt.Errorf("resume workflow: %w", err)
		}
		a.Apply(d)
		budget, err := sqlrow.ApprovalBudget(a)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE workflow_approvals SET status = ?, decided_by = ?, decided_at = ?,
				comment = ?, timed_out = ?, budget = ?
			WHERE workflow_id = ? AND step = ?`, a.Status, a.DecidedBy, sqlrow.FormatTime(a.DecidedAt), a.Comment, a.TimedOut,
			budget, a.WorkflowID, a.Step); err != nil {
			return fmt.Errorf("record decision: %w", err)
		}
		if err := queueWebhookEvent(ctx, tx, webhook.Decided(a)); err != nil { // webhooks.go: the outbox
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
	if err != nil {
		return nil, nil, err
	}
	return wf, a, nil
}

// Approvals lists the tenant's approvals, newest workflow first.
func (db *DB) Approvals(ctx context.Context, tenant string, f workflow.ApprovalFilter) ([]*workflow.Approval, error) {
	where := []string{"tenant = ?"}
	args := []any{tenant}
	switch f.Status {
	case workflow.ApprovalPending:
		where = append(where, "status = 'pending'")
	case "decided":
		where = append(where, "status <> 'pending'")
	}
	if f.Agent != "" {
		where, args = append(where, "agent = ?"), append(args, f.Agent)
	}
	if id, step, ok := workflow.ParseApprovalCursor(f.After); ok {
		where, args = append(where, "(workflow_id, step) < (?, ?)"), append(args, id, step)
	}
	var out []*workflow.Approval
	err := db.query(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
			WHERE `+strings.Join(where, " AND ")+` ORDER BY workflow_id DESC, step DESC LIMIT ?`,
			append(args, page.Size(f.Limit))...)
		if err != nil {
			return fmt.Errorf("list approvals: %w", err)
		}
		out, err = collectApprovals(rows)
		return err
	})
	return out, err
}

// WorkflowApprovals returns a workflow's approvals by step.
func (db *DB) WorkflowApprovals(ctx context.Context, workflowID string) ([]*workflow.Approval, error) {
	var out []*workflow.Approval
	err := db.query(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
			WHERE workflow_id = ? ORDER BY step`, workflowID)
		if err != nil {
			return fmt.Errorf("query approvals: %w", err)
		}
		out, err = collectApprovals(rows)
		return err
	})
	return out, err
}

// DueApprovals returns pending approvals whose deadline is not after now.
func (db *DB) DueApprovals(ctx context.Context, now time.Time, limit int) ([]*workflow.Approval, error) {
	var out []*workflow.Approval
	err := db.query(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
			WHERE status = 'pending' AND deadline <= ? ORDER BY deadline LIMIT ?`, sqlrow.FormatTime(now), limit)
		if err != nil {
			return fmt.Errorf("query due approvals: %w", err)
		}
		out, err = collectApprovals(rows)
		return err
	})
	return out, err
}

func collectApprovals(rows *sql.Rows) ([]*workflow.Approval, error) {
	defer rows.Close()
	var out []*workflow.Approval
	for rows.Next() {
		a, err := sqlrow.ScanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read approvals: %w", err)
	}
	return out, nil
}
