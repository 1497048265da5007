package sqlrow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/workflow"
)

// WorkflowColumns are the workflows table's columns, in the order of
// ScanWorkflow.
const WorkflowColumns = `id, tenant, agent, agent_version, status, outcome, goal, context, caller,
	max_tool_calls, output, error, replay_of, request_id, trace_id, started_at, finished_at, deadline,
	cancel_requested, owner, lease_until, tool_revisions, max_llm_tokens, faults, on_exhausted, rollout`

// StepColumns are the workflow_steps table's columns, in the order of
// ScanStep.
const StepColumns = `workflow_id, seq, step, action, kind, status, tool, operation, args, score, queue,
	outcome, result, error, request, http_status, attempts, started_at, duration_ms, sent, reason,
	model, input_tokens, output_tokens, finish_reason, error_code, attempt, journal, injected`

// ScanWorkflow scans a row of WorkflowColumns; a missing row's error is
// returned as it is.
func ScanWorkflow(s Scanner) (*workflow.Workflow, error) {
	var w workflow.Workflow
	err := s.Scan(&w.ID, &w.Tenant, &w.Agent, &w.AgentVersion, &w.Status, &w.Outcome, &w.Goal, Raw(&w.Context),
		JSON(&w.Caller, "workflow caller"), &w.MaxToolCalls, Raw(&w.Output), Raw(&w.Error), &w.ReplayOf,
		&w.RequestID, &w.TraceID, Time(&w.StartedAt), TimeOrZero(&w.FinishedAt), Time(&w.Deadline),
		&w.CancelRequested, &w.Owner, Time(&w.LeaseUntil), JSON(&w.ToolRevisions, "workflow tool revisions"),
		&w.MaxLLMTokens, JSON(&w.Faults, "workflow faults"), &w.OnExhausted,
		JSON(&w.Rollout, "workflow rollout"))
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan workflow: %w", err)
	}
	return &w, nil
}

// ScanStep scans a row of StepColumns.
func ScanStep(s Scanner) (workflow.Step, error) {
	var (
		st      workflow.Step
		in, out *int64
	)
	err := s.Scan(&st.WorkflowID, &st.Seq, &st.Step, &st.Action, &st.Kind, &st.Status, &st.Tool, &st.Operation,
		Raw(&st.Args), &st.Score, &st.Queue, &st.Outcome, Raw(&st.Result), &st.Error, Raw(&st.Request),
		&st.HTTPStatus, &st.Attempts, Time(&st.StartedAt), &st.DurationMS, &st.Sent, &st.Reason, &st.Model,
		&in, &out, &st.FinishReason, &st.ErrorCode, &st.Attempt, &st.Journal, JSON(&st.Injected, "step injected fault"))
	if err != nil {
		return st, fmt.Errorf("scan step: %w", err)
	}
	if in != nil || out != nil {
		st.Usage = &agent.Usage{InputTokens: deref(in), OutputTokens: deref(out)}
	}
	return st, nil
}

// FaultsValue is a workflow's faults column: NULL without faults.
func FaultsValue(w *workflow.Workflow) (any, error) {
	if len(w.Faults) == 0 {
		return nil, nil
	}
	return EncodeJSON(w.Faults, "workflow faults")
}

// RolloutValue is a workflow's rollout column: NULL unless a rollout
// chose its arm.
func RolloutValue(w *workflow.Workflow) any {
	if w.Rollout == nil {
		return nil
	}
	b, _ := json.Marshal(w.Rollout) // two strings: it cannot fail
	return string(b)
}

// InjectedValue is a step's injected column: NULL unless a fault answered
// its call.
func InjectedValue(s *workflow.Step) any {
	if s.Injected == nil {
		return nil
	}
	b, _ := json.Marshal(s.Injected) // ints and a string: it cannot fail
	return string(b)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// ApprovalColumns are the workflow_approvals table's columns, in the order
// of ScanApproval.
const ApprovalColumns = `workflow_id, step, tenant, agent, agent_version, action, reason, approver_scope,
	allow_self, on_timeout, invoker, requested_at, deadline, remaining_ms, status, decided_by, decided_at,
	comment, timed_out, budget`

// ScanApproval scans a row of ApprovalColumns; a missing row's error is
// returned as it is.
func ScanApproval(s Scanner) (*workflow.Approval, error) {
	var (
		a         workflow.Approval
		remaining int64
	)
	err := s.Scan(&a.WorkflowID, &a.Step, &a.Tenant, &a.Agent, &a.AgentVersion, &a.Action, &a.Reason, &a.ApproverScope,
		&a.AllowSelf, &a.OnTimeout, &a.Invoker, Time(&a.RequestedAt), Time(&a.Deadline), &remaining, &a.Status,
		&a.DecidedBy, TimeOrZero(&a.DecidedAt), &a.Comment, &a.TimedOut, JSON(&a.Budget, "approval budget"))
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan approval: %w", err)
	}
	a.Remaining = time.Duration(remaining) * time.Millisecond
	return &a, nil
}

// IntentColumns are the workflow_intents table's columns, in the order of
// ScanIntent.
const IntentColumns = `workflow_id, step, tool, operation, call_digest, at`

// ScanIntent scans a row of IntentColumns.
func ScanIntent(s Scanner) (workflow.Intent, error) {
	var in workflow.Intent
	if err := s.Scan(&in.WorkflowID, &in.Step, &in.Tool, &in.Operation, &in.Call, Time(&in.At)); err != nil {
		return in, fmt.Errorf("scan intent: %w", err)
	}
	return in, nil
}

// ApprovalBudget is the budget column of an approval: NULL unless it is a
// budget's.
func ApprovalBudget(a *workflow.Approval) (any, error) {
	if a.Budget == nil {
		return nil, nil
	}
	return EncodeJSON(a.Budget, "approval budget")
}

// WorkflowIDSince bounds the ids of workflows started at or after since: a
// workflow's id is made at most moments before its start, so a minute
// earlier leaves none out.
func WorkflowIDSince(since time.Time) string { return ids.Floor(ids.Workflow, since.Add(-time.Minute)) }
