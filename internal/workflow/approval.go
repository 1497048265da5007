package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	// ApprovalCancelled is a pending approval whose workflow was cancelled.
	ApprovalCancelled = "cancelled"
)

// ServiceActor decides an approval whose timeout passed.
const ServiceActor = "agentplane"

// MaxComment bounds a decision's comment, in characters.
const MaxComment = 2000

// Approval is an approve step a workflow waits at, or waited at.
type Approval struct {
	WorkflowID    string `json:"workflow_id"`
	Tenant        string `json:"-"`
	Agent         string `json:"agent"`
	AgentVersion  string `json:"agent_version"`
	Step          int    `json:"step"`
	Action        string `json:"action"`
	Reason        string `json:"reason"`
	ApproverScope string `json:"approver_scope,omitempty"`
	AllowSelf     bool   `json:"allow_self"`
	// OnTimeout is agent.DecisionApprove or agent.DecisionDeny.
	OnTimeout string `json:"on_timeout"`
	// Invoker is the subject who invoked the workflow.
	Invoker     string    `json:"invoker"`
	RequestedAt time.Time `json:"requested_at"`
	// Deadline is when OnTimeout applies.
	Deadline  time.Time `json:"deadline"`
	Status    string    `json:"status"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Comment   string    `json:"comment,omitempty"`
	// TimedOut reports a decision the service made at the deadline.
	TimedOut bool `json:"timed_out,omitempty"`
	// Remaining is the run time the workflow had left when it paused; its
	// deadline is moved on by the time spent waiting.
	Remaining time.Duration `json:"-"`
	// Budget, on a budget's approval (action agent.ActionBudgetExhausted),
	// is the spent budget; once approved, its Grant is what was granted.
	Budget *agent.Budget `json:"budget,omitempty"`
}

// Kinds of approval, as the API shows them.
const (
	// KindApproval is an approve step's, or an external agent's call
	// matching an approvals rule.
	KindApproval = "approval"
	// KindBudgetExhausted is a spent budget's (limits.on_exhausted ask).
	KindBudgetExhausted = "budget_exhausted"
)

// Kind is the approval's kind: KindBudgetExhausted or KindApproval.
func (a *Approval) Kind() string {
	if a.Budget != nil {
		return KindBudgetExhausted
	}
	return KindApproval
}

// MarshalJSON writes the approval with its kind (the body of its
// webhook events).
func (a Approval) MarshalJSON() ([]byte, error) {
	type plain Approval
	return json.Marshal(struct {
		plain
		Kind string `json:"kind"`
	}{plain(a), a.Kind()})
}

// Apply records d on the approval: its status, who decided, when and why,
// and on a budget's approval, the grant an approval made.
func (a *Approval) Apply(d Decision) {
	a.Status, a.DecidedBy, a.DecidedAt, a.Comment, a.TimedOut = d.Status, d.By, d.At, d.Comment, d.TimedOut
	if a.Budget != nil && d.Budget > 0 {
		b := *a.Budget
		b.Grant = d.Budget
		a.Budget = &b
	}
}

// Decided reports whether a person or the timeout decided the approval.
func (a *Approval) Decided() bool {
	return a.Status == ApprovalApproved || a.Status == ApprovalDenied
}

// decisionRecord is a decision as the approve step's decision event holds it.
type decisionRecord struct {
	Decision  string    `json:"decision"`
	DecidedBy string    `json:"decided_by"`
	DecidedAt time.Time `json:"decided_at"`
	Comment   string    `json:"comment,omitempty"`
	TimedOut  bool      `json:"timed_out,omitempty"`
	// Limit and Budget, on a budget's approval, name the budget and what
	// approving it granted (agent.GrantOf reads it).
	Limit  string `json:"limit,omitempty"`
	Budget int64  `json:"budget,omitempty"`
}

// decision is the engine's view of a decided approval.
func (a *Approval) decision() agent.Decision {
	d := decisionRecord{Decision: agent.DecisionApprove, DecidedBy: a.DecidedBy, DecidedAt: a.DecidedAt.UTC(), Comment: a.Comment, TimedOut: a.TimedOut}
	status := agent.StatusApproved
	if a.Status == ApprovalDenied {
		d.Decision, status = agent.DecisionDeny, agent.StatusDenied
	}
	if a.Budget != nil {
		d.Limit = a.Budget.Limit
		if status == agent.StatusApproved {
			d.Budget = a.Budget.Grant
		}
	}
	b, _ := json.Marshal(d)
	return agent.Decision{Status: status, Result: b}
}

// Decision is a decision to record on a pending approval.
type Decision struct {
	Tenant     string
	WorkflowID string
	Step       int
	// Status is ApprovalApproved or ApprovalDenied.
	Status   string
	By       string
	Comment  string
	TimedOut bool
	At       time.Time
	// Budget, approving a budget's approval, is what it grants: the
	// decision's budget, else the approval's own Grant.
	Budget int64
}

// ApprovalFilter selects approvals of one tenant.
type ApprovalFilter struct {
	// Status is "pending", "decided" (approved, denied or cancelled) or "" for all.
	Status string
	Agent  string
	Limit  int
	// After is the cursor of the last approval of the previous page.
	After string
}

// ApprovalCursor is the paging cursor of an approval: newest workflow first,
// then the highest step.
func ApprovalCursor(a *Approval) string { return a.WorkflowID + "." + strconv.Itoa(a.Step) }

// ParseApprovalCursor splits a cursor of ApprovalCursor; ok is false for ""
// or a malformed one.
func ParseApprovalCursor(c string) (workflowID string, step int, ok bool) {
	i := strings.LastIndexByte(c, '.')
	if i <= 0 {
		return "", 0, false
	}
	step, err := strconv.Atoi(c[i+1:])
	if err != nil || step < 1 {
		return "", 0, false
	}
	return c[:i], step, true
}

// ApprovalStore keeps approvals and the waiting workflows they hold.
type ApprovalStore interface {
	// SuspendWorkflow stores the last steps (the waiting_approval step
	// last among them) with their records and the pending approval a, sets
	// the workflow waiting and drops owner's lease, in one transaction.
	SuspendWorkflow(ctx context.Context, owner string, a *Approval, last ...StepWrite) error
	// DecideApproval records d on a pending approval, appends rec, and hands
	// the workflow, running again with its deadline moved on by the time it
	// waited, to owner until leaseUntil. An approval that is not pending, or
	// whose workflow is not waiting, is a problem.Conflict; none at that
	// step of the tenant's workflow is a problem.Conflict too (the workflow
	// is not waiting there), unless the workflow does not exist (NotFound).
	DecideApproval(ctx context.Context, d Decision, owner string, leaseUntil time.Time, rec *audit.Record) (*Workflow, *Approval, error)
	// Approvals lists the tenant's approvals, newest workflow first.
	Approvals(ctx context.Context, tenant string, f ApprovalFilter) ([]*Approval, error)
	// WorkflowApprovals returns a workflow's approvals by step.
	WorkflowApprovals(ctx context.Context, workflowID string) ([]*Approval, error)
	// DueApprovals returns up to limit pending approvals, of any tenant,
	// whose deadline is not after now, the oldest deadline first.
	DueApprovals(ctx context.Context, now time.Time, limit int) ([]*Approval, error)
}

// DecideRequest is a person's decision on an approval.
type DecideRequest struct {
	Tenant     string
	WorkflowID string
	// Step is the number of the waiting_approval event; 0 with Action
	// names the step by its action instead (the one waiting).
	Step   int
	Action string
	// Decision is agent.DecisionApprove or agent.DecisionDeny.
	Decision string
	Comment  string
	// Budget, approving a budget's approval, grants that much more
	// (1..agent.MaxBudgetGrant) instead of the same budget again.
	Budget    *int64
	Approver  Caller
	RequestID string
	TraceID   string
}

// Decide records a person's decision and resumes the workflow here. The
// approver needs the step's approver_scope when it sets one, and may not be
// the invoker unless the step allows it (403 insufficient-scope); a second
// decision, or one on a workflow not waiting at that step, is a 409.
func (r *Runner) Decide(ctx context.Context, req DecideRequest) (*Approval, error) {
	var errs []problem.FieldError
	if req.Decision != agent.DecisionApprove && req.Decision != agent.DecisionDeny {
		errs = append(errs, problem.FieldError{Field: "decision", Message: `must be "approve" or "deny"`})
	}
	if utf8.RuneCountInString(req.Comment) > MaxComment {
		errs = append(errs, problem.FieldError{Field: "comment", Message: fmt.Sprintf("must be at most %d characters", MaxComment)})
	}
	if b := req.Budget; b != nil {
		switch {
		case req.Decision == agent.DecisionDeny:
			errs = append(errs, problem.FieldError{Field: "budget", Message: `is granted by an "approve" decision only: leave it out to deny`})
		case *b < 1 || *b > agent.MaxBudgetGrant:
			errs = append(errs, problem.FieldError{Field: "budget", Message: fmt.Sprintf(
				"must be from 1 to %d (10^8); leave it out to grant the same budget again", agent.MaxBudgetGrant)})
		}
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	wf, err := r.opts.Store.Workflow(ctx, req.Tenant, req.WorkflowID)
	if err != nil {
		return nil, err
	}
	as, err := r.opts.Store.WorkflowApprovals(ctx, wf.ID)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(as, func(a *Approval) bool {
		if req.Step == 0 {
			return a.Action == req.Action && a.Status == ApprovalPending
		}
		return a.Step == req.Step
	})
	if i < 0 {
		if req.Step == 0 {
			return nil, problem.New(problem.Conflict, "workflow %s is %s, not waiting for a decision at a step named %q: GET /v1/approvals?status=pending lists what waits",
				wf.ID, wf.Status, req.Action)
		}
		return nil, notWaitingAt(wf, req.Step)
	}
	a := as[i]
	if a.Status != ApprovalPending {
		return nil, alreadyDecided(a)
	}
	if a.ApproverScope != "" && !slices.Contains(req.Approver.Scopes, a.ApproverScope) {
		return nil, &problem.Error{Code: problem.InsufficientScope, Scope: a.ApproverScope,
			Detail: fmt.Sprintf("step %d (%s) may be decided only by a token with the scope %s", a.Step, a.Action, a.ApproverScope)}
	}
	if req.Approver.Sub == a.Invoker && !a.AllowSelf {
		return nil, &problem.Error{Code: problem.InsufficientScope,
			Detail: fmt.Sprintf("%s invoked this workflow and may not decide its own approval: another person must (the step does not set allow_self)", a.Invoker)}
	}
	if req.Budget != nil && a.Budget == nil {
		return nil, problem.Validation(problem.FieldError{Field: "budget", Message: fmt.Sprintf(
			"step %d (%s) is not a budget's approval (kind %s): leave budget out", a.Step, a.Action, a.Kind())})
	}
	status := ApprovalApproved
	if req.Decision == agent.DecisionDeny {
		status = ApprovalDenied
	}
	d := Decision{Tenant: req.Tenant, WorkflowID: wf.ID, Step: a.Step, Status: status, By: req.Approver.Sub,
		Comment: req.Comment, At: r.opts.Now().UTC()}
	d.Budget = grantOf(a, d.Status, req.Budget)
	rec := r.approvalRecord(wf, a, d, audit.Actor{Sub: req.Approver.Sub, ClientID: req.Approver.ClientID}, req.RequestID, req.TraceID)
	return r.decide(ctx, d, rec)
}

// decide records a decision and resumes its workflow here.
func (r *Runner) decide(ctx context.Context, d Decision, rec *audit.Record) (*Approval, error) {
	wf, a, err := r.opts.Store.DecideApproval(ctx, d, r.opts.Owner, r.opts.Now().Add(r.opts.Lease), rec)
	if err != nil {
		return nil, err
	}
	if r.handOver(a) {
		return a, nil // an external agent's call held here goes on
	}
	err = guard(func() error { return r.resume(context.WithoutCancel(ctx), wf) })
	if errors.Is(err, errRunning) && r.resumeAfter(wf) {
		return a, nil // an external agent's attempt set aside is ending here
	}
	if p := panicked(err); p != nil {
		r.crashed(context.WithoutCancel(ctx), wf, nil, p)
	} else if err != nil {
		// Held under a lease: when it lapses, a replica resumes it.
		r.opts.Logger.Warn("resume workflow after its approval; trying again once its lease lapses", "workflow_id", wf.ID, "err", err)
	}
	return a, nil
}

// grantOf is what a decision with status grants on a: the budget the
// decision names, else the approval's own grant; 0 on any other approval
// or a denial.
func grantOf(a *Approval, status string, budget *int64) int64 {
	if a.Budget == nil || status != ApprovalApproved {
		return 0
	}
	if budget != nil {
		return *budget
	}
	return a.Budget.Grant
}

// approvalRecord is the audit record of a decision.
func (r *Runner) approvalRecord(wf *Workflow, a *Approval, d Decision, actor audit.Actor, requestID, traceID string) *audit.Record {
	details := map[string]any{
		"step": a.Step, "action": a.Action, "decision": d.Status, "timed_out": d.TimedOut, "comment": d.Comment,
	}
	if a.Budget != nil {
		details["kind"], details["limit"], details["budget"] = KindBudgetExhausted, a.Budget.Limit, d.Budget
	}
	rec := r.auditRecord(wf, "workflow.approval", audit.Success, details)
	rec.Actor, rec.RequestID, rec.TraceID = actor, requestID, traceID
	return rec
}

func notWaitingAt(wf *Workflow, step int) error {
	return problem.New(problem.Conflict, "workflow %s is %s, not waiting for a decision at step %d: GET /v1/approvals?status=pending lists what waits",
		wf.ID, wf.Status, step)
}

func alreadyDecided(a *Approval) error {
	if a.Status == ApprovalCancelled {
		return problem.New(problem.Conflict, "the approval at step %d of workflow %s was cancelled with its workflow", a.Step, a.WorkflowID)
	}
	return problem.New(problem.Conflict, "the approval at step %d of workflow %s was already decided: %s by %s at %s",
		a.Step, a.WorkflowID, a.Status, a.DecidedBy, a.DecidedAt.UTC().Format(time.RFC3339))
}

// ConflictOn is the conflict a store reports for a decision it cannot
// record: no approval at that step, or one no longer pending.
func ConflictOn(wf *Workflow, a *Approval, step int) error {
	if a == nil {
		return notWaitingAt(wf, step)
	}
	return alreadyDecided(a)
}

// expireApprovals applies the on_timeout decision of approvals past their
// deadline, by the service; the store's conditional write makes each
// decision once, whichever replica sees it first.
func (r *Runner) expireApprovals(ctx context.Context) {
	now := r.opts.Now().UTC()
	due, err := r.opts.Store.DueApprovals(ctx, now, 32)
	if err != nil {
		r.opts.Logger.Warn("find approvals past their timeout", "err", err)
		return
	}
	for _, a := range due {
		status := ApprovalDenied
		if a.OnTimeout == agent.DecisionApprove {
			status = ApprovalApproved
		}
		d := Decision{Tenant: a.Tenant, WorkflowID: a.WorkflowID, Step: a.Step, Status: status, By: ServiceActor, TimedOut: true, At: now}
		d.Budget = grantOf(a, status, nil)
		wf := &Workflow{ID: a.WorkflowID, Tenant: a.Tenant}
		rec := r.approvalRecord(wf, a, d, audit.Actor{Sub: ServiceActor}, "", "")
		_, err := r.decide(ctx, d, rec)
		switch {
		case err == nil:
			r.opts.Logger.Info("approval timed out", "workflow_id", a.WorkflowID, "step", a.Step, "decision", status)
		case problem.Is(err, problem.Conflict):
			// Decided meanwhile, by a person or another replica.
		default:
			r.opts.Logger.Warn("apply an approval's timeout", "workflow_id", a.WorkflowID, "err", err)
		}
	}
}

// asked is an approval the current execution asked for and has no decision on.
type asked struct {
	step int
	req  agent.ApprovalRequest
}

// Approve implements agent.Approver: a decision recorded in the store is
// served; otherwise the execution pauses (see suspend).
func (e *recorder) Approve(_ context.Context, step int, req agent.ApprovalRequest) (agent.Decision, error) {
	if a := e.h.approvals[step]; a != nil {
		switch {
		case a.Decided():
			return a.decision(), nil
		case a.Status == ApprovalCancelled:
			return agent.Decision{}, fmt.Errorf("the approval at step %d was cancelled", step)
		}
	}
	req.Reason = e.maskText(req.Reason)
	e.asked = &asked{step: step, req: req}
	return agent.Decision{Status: agent.StatusWaitingApproval}, nil
}

// suspend stores a paused execution: its waiting step, the pending
// approval, and the workflow waiting without a lease; then hands the
// waiting workflow to local waiters, as finish does an ended one.
func (r *Runner) suspend(ctx context.Context, wf *Workflow, steps []Step, last []StepWrite, q *asked) {
	now := r.opts.Now().UTC()
	a := &Approval{
		WorkflowID: wf.ID, Tenant: wf.Tenant, Agent: wf.Agent, AgentVersion: wf.AgentVersion, Step: q.step,
		Action: q.req.Action, Reason: q.req.Reason, ApproverScope: q.req.ApproverScope, AllowSelf: q.req.AllowSelf,
		OnTimeout: q.req.OnTimeout, Invoker: wf.Caller.Sub, RequestedAt: now, Deadline: now.Add(q.req.Timeout),
		Status: ApprovalPending, Remaining: max(wf.Deadline.Sub(now), 0), Budget: q.req.Budget,
	}
	if err := r.opts.Store.SuspendWorkflow(ctx, r.opts.Owner, a, last...); err != nil {
		r.opts.Logger.Error("waiting workflow not stored; leaving the workflow to be resumed", "workflow_id", wf.ID, "err", err)
		return
	}
	for _, sw := range last {
		steps = append(steps, *sw.Step)
	}
	wf.Status, wf.Owner, wf.LeaseUntil = Waiting, "", time.Time{}
	r.mu.Lock()
	delete(r.running, wf.ID)
	r.mu.Unlock()
	waiting := *wf
	r.hub.finish(wf.ID, &ending{wf: &waiting, steps: steps})
}
