package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// SuspendWorkflow stores the last steps and the pending approval a, and
// sets the workflow waiting without a lease, provided owner holds it.
func (db *DB) SuspendWorkflow(ctx context.Context, owner string, a *workflow.Approval, last ...workflow.StepWrite) error {
	db.prepareSteps(last)
	a.RequestedAt, a.Deadline = micro(a.RequestedAt), micro(a.Deadline)
	budget, err := sqlrow.ApprovalBudget(a)
	if err != nil {
		return err
	}
	return db.write(ctx, func(tx *wtx) error {
		appendSteps(tx, owner, last)
		tag, err := tx.Exec(ctx, `UPDATE workflows SET status = 'waiting', owner = '', lease_until = $3
			WHERE id = $1 AND status = 'running' AND owner = $2`, a.WorkflowID, owner, time.Time{})
		if err != nil {
			return fmt.Errorf("suspend workflow: %w", err)
		}
		if err := leaseHeld(tag, a.WorkflowID, "suspend workflow"); err != nil {
			return err
		}
		tx.notify(changeChanged, a.WorkflowID) // its followers see it waiting
		_, err = tx.Exec(ctx, `INSERT INTO workflow_approvals (`+sqlrow.ApprovalColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, '', NULL, '', false, $16)`,
			a.WorkflowID, a.Step, a.Tenant, a.Agent, a.AgentVersion, a.Action, a.Reason, a.ApproverScope,
			a.AllowSelf, a.OnTimeout, a.Invoker, a.RequestedAt, a.Deadline, a.Remaining.Milliseconds(), workflow.ApprovalPending, budget)
		if err != nil {
			return fmt.Errorf("insert approval: %w", err)
		}
		queueWebhookEvent(tx, webhook.Waiting(a)) // webhooks.go: the outbox
		return nil
	})
}

// DecideApproval records d on a pending approval and hands its waiting
// workflow to owner. The workflow's row is locked first, then the
// approval's, as every writer of both takes them: of two replicas deciding
// at once, the second sees the first's decision and gets a conflict.
func (db *DB) DecideApproval(ctx context.Context, d workflow.Decision, owner string, leaseUntil time.Time,
	rec *audit.Record) (*workflow.Workflow, *workflow.Approval, error) {
	d.At = micro(d.At)
	db.prepareAudit(rec)
	var (
		wf *workflow.Workflow
		a  *workflow.Approval
	)
	err := db.write(ctx, func(tx *wtx) error {
		var err error
		wf, err = sqlrow.ScanWorkflow(tx.QueryRow(ctx, `SELECT `+sqlrow.WorkflowColumns+` FROM workflows
			WHERE tenant = $1 AND id = $2 FOR UPDATE`, d.Tenant, d.WorkflowID))
		if sqlrow.IsNoRows(err) {
			return workflowNotFound(d.WorkflowID)
		}
		if err != nil {
			return err
		}
		a, err = sqlrow.ScanApproval(tx.QueryRow(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
			WHERE workflow_id = $1 AND step = $2 FOR UPDATE`, d.WorkflowID, d.Step))
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
		if _, err := tx.Exec(ctx, `UPDATE workflows SET status = 'running', owner = $2, lease_until = $3, deadline = $4
			WHERE id = $1`, wf.ID, owner, wf.LeaseUntil, wf.Deadline); err != nil {
			return fmt.Errorf("resume workflow: %w", err)
		}
		a.Apply(d)
		budget, err := sqlrow.ApprovalBudget(a)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE workflow_approvals SET status = $3, decided_by = $4, decided_at = $5,
				comment = $6, timed_out = $7, budget = $8
			WHERE workflow_id = $1 AND step = $2`, a.WorkflowID, a.Step, a.Status, a.DecidedBy, a.DecidedAt,
			a.Comment, a.TimedOut, budget); err != nil {
			return fmt.Errorf("record decision: %w", err)
		}
		tx.Audit(rec)
		queueWebhookEvent(tx, webhook.Decided(a)) // webhooks.go: the outbox
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return wf, a, nil
}

// Approvals lists the tenant's approvals, newest workflow first.
func (db *DB) Approvals(ctx context.Context, tenant string, f workflow.ApprovalFilter) ([]*workflow.Approval, error) {
	where := []string{"tenant = $1"}
	args := []any{tenant}
	add := func(cond string, vs ...any) {
		for i := range vs {
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)+i+1), 1)
		}
		where, args = append(where, cond), append(args, vs...)
	}
	switch f.Status {
	case workflow.ApprovalPending:
		add("status = 'pending'")
	case "decided":
		add("status <> 'pending'")
	}
	if f.Agent != "" {
		add("agent = ?", f.Agent)
	}
	if id, step, ok := workflow.ParseApprovalCursor(f.After); ok {
		add("(workflow_id, step) < (?, ?)", id, step)
	}
	rows, err := db.pool.Query(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
		WHERE `+strings.Join(where, " AND ")+` ORDER BY workflow_id DESC, step DESC LIMIT `+strconv.Itoa(page.Size(f.Limit)), args...)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", unavailable(err))
	}
	return collectApprovals(rows)
}

// WorkflowApprovals returns a workflow's approvals by step.
func (db *DB) WorkflowApprovals(ctx context.Context, workflowID string) ([]*workflow.Approval, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
		WHERE workflow_id = $1 ORDER BY step`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("query approvals: %w", unavailable(err))
	}
	return collectApprovals(rows)
}

// DueApprovals returns pending approvals whose deadline is not after now.
func (db *DB) DueApprovals(ctx context.Context, now time.Time, limit int) ([]*workflow.Approval, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+sqlrow.ApprovalColumns+` FROM workflow_approvals
		WHERE status = 'pending' AND deadline <= $1 ORDER BY deadline LIMIT $2`, micro(now), limit)
	if err != nil {
		return nil, fmt.Errorf("query due approvals: %w", unavailable(err))
	}
	return collectApprovals(rows)
}

func collectApprovals(rows pgx.Rows) ([]*workflow.Approval, error) {
	out, err := collect(rows, sqlrow.ScanApproval)
	if err != nil {
		return nil, fmt.Errorf("read approvals: %w", err)
	}
	return out, nil
}
