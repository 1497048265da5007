package httpapi

import (
	"net/http"
	"strconv"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// approvalView is an approval as the API shows it.
type approvalView struct {
	WorkflowID    string  `json:"workflow_id"`
	Agent         string  `json:"agent"`
	AgentVersion  string  `json:"agent_version"`
	Step          int     `json:"step"`
	Action        string  `json:"action"`
	Reason        string  `json:"reason"`
	ApproverScope *string `json:"approver_scope"`
	AllowSelf     bool    `json:"allow_self"`
	Status        string  `json:"status"`
	Invoker       string  `json:"invoker"`
	RequestedAt   string  `json:"requested_at"`
	Deadline      string  `json:"deadline"`
	OnTimeout     string  `json:"on_timeout"`
	DecidedBy     *string `json:"decided_by"`
	DecidedAt     *string `json:"decided_at"`
	Comment       *string `json:"comment"`
	TimedOut      bool    `json:"timed_out"`
	// Kind is "approval" or "budget_exhausted"; Budget is a spent
	// budget's (null on any other approval).
	Kind   string        `json:"kind"`
	Budget *agent.Budget `json:"budget"`
}

func viewApproval(a *workflow.Approval) approvalView {
	v := approvalView{
		WorkflowID: a.WorkflowID, Agent: a.Agent, AgentVersion: a.AgentVersion, Step: a.Step, Action: a.Action,
		Reason: a.Reason, AllowSelf: a.AllowSelf, Status: a.Status, Invoker: a.Invoker,
		RequestedAt: a.RequestedAt.UTC().Format(timeFormat), Deadline: a.Deadline.UTC().Format(timeFormat),
		OnTimeout: a.OnTimeout, TimedOut: a.TimedOut, Kind: a.Kind(), Budget: a.Budget,
	}
	if a.ApproverScope != "" {
		v.ApproverScope = &a.ApproverScope
	}
	if a.Decided() {
		at := a.DecidedAt.UTC().Format(timeFormat)
		v.DecidedBy, v.DecidedAt, v.Comment = &a.DecidedBy, &at, &a.Comment
	}
	return v
}

func (s *Server) handleListApprovals(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := workflow.ApprovalFilter{Status: q.Get("status"), Agent: q.Get("agent"), After: q.Get("cursor")}
	var errs []problem.FieldError
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		errs = append(errs, problem.As(err).Errors...)
	}
	f.Limit = limit
	switch f.Status {
	case "", workflow.ApprovalPending, "decided":
	default:
		errs = append(errs, problem.FieldError{Field: "status", Message: `must be "pending" or "decided"`})
	}
	if _, _, ok := workflow.ParseApprovalCursor(f.After); f.After != "" && !ok {
		errs = append(errs, problem.FieldError{Field: "cursor", Message: "is not a cursor this list returned"})
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	as, err := s.deps.Workflows.Approvals(r.Context(), frontdoor.Principal(r).Tenant, f)
	if err != nil {
		return err
	}
	list := struct {
		Approvals  []approvalView `json:"approvals"`
		NextCursor *string        `json:"next_cursor"`
	}{Approvals: make([]approvalView, 0, len(as))}
	for _, a := range as {
		list.Approvals = append(list.Approvals, viewApproval(a))
	}
	if len(as) == f.Limit {
		c := workflow.ApprovalCursor(as[len(as)-1])
		list.NextCursor = &c
	}
	return frontdoor.WriteJSON(w, http.StatusOK, list)
}

// decideRequest is the body of POST /v1/workflows/{id}/approvals/{step}.
type decideRequest struct {
	Decision string `json:"decision"`
	Comment  string `json:"comment,omitempty"`
	// Budget, approving a budget's approval, grants that much more.
	Budget *int64 `json:"budget,omitempty"`
}

func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) error {
	var req decideRequest
	if err := frontdoor.DecodeJSON(r, &req); err != nil {
		return err
	}
	p := frontdoor.Principal(r)
	info := frontdoor.InfoFrom(r.Context())
	info.ResourceID = r.PathValue("id")
	dr := workflow.DecideRequest{
		Tenant: p.Tenant, WorkflowID: r.PathValue("id"), Decision: req.Decision, Comment: req.Comment, Budget: req.Budget,
		Approver:  workflow.Caller{Sub: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes},
		RequestID: info.RequestID, TraceID: info.TraceID,
	}
	// {step} is the waiting event's number, or the step's action.
	ref := r.PathValue("step")
	if n, err := strconv.Atoi(ref); err == nil {
		if n < 1 {
			return problem.Field("step", "must be the number of the step waiting for a decision, or its action")
		}
		dr.Step = n
	} else {
		dr.Action = ref
	}
	a, err := s.deps.Runner.Decide(r.Context(), dr)
	if err != nil {
		return err
	}
	info.WorkflowID = a.WorkflowID
	return frontdoor.WriteJSON(w, http.StatusOK, viewApproval(a))
}
