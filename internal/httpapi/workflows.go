package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/workflow"
)

// workflowSummary is a workflow as lists show it.
type workflowSummary struct {
	WorkflowID   string          `json:"workflow_id"`
	Agent        string          `json:"agent"`
	AgentVersion string          `json:"agent_version"`
	Goal         string          `json:"goal"`
	Status       string          `json:"status"`
	Outcome      *string         `json:"outcome"`
	DurationMS   int64           `json:"duration_ms"`
	StartedAt    string          `json:"started_at"`
	FinishedAt   *string         `json:"finished_at"`
	Output       json.RawMessage `json:"output"`
}

// summarize shows wf; a running one's duration is measured up to now.
func summarize(wf *workflow.Workflow, now time.Time) workflowSummary {
	v := workflowSummary{
		WorkflowID: wf.ID, Agent: wf.Agent, AgentVersion: wf.AgentVersion, Goal: wf.Goal, Status: wf.Status,
		DurationMS: wf.DurationMS(now), StartedAt: wf.StartedAt.UTC().Format(timeFormat), Output: wf.Output,
	}
	if wf.Done() {
		v.Outcome = &wf.Outcome
		f := wf.FinishedAt.UTC().Format(timeFormat)
		v.FinishedAt = &f
	}
	if len(v.Output) == 0 {
		v.Output = json.RawMessage("null")
	}
	return v
}

// workflowView is a workflow as invoke, cancel and GET /v1/workflows/{id} show it.
type workflowView struct {
	workflowSummary
	Steps []any           `json:"steps"`
	Error json.RawMessage `json:"error,omitempty"`
	// Usage sums the workflow's completions (absent when it made none).
	Usage *usageView `json:"usage,omitempty"`
	// Completions, for GET /v1/workflows/{id} only.
	Completions []completionView `json:"completions,omitempty"`
	// Detail, for GET /v1/workflows/{id} only.
	Context      json.RawMessage `json:"context,omitempty"`
	Caller       *callerView     `json:"caller,omitempty"`
	MaxToolCalls int             `json:"max_tool_calls,omitempty"`
	MaxLLMTokens int64           `json:"max_llm_tokens,omitempty"`
	OnExhausted  string          `json:"on_exhausted,omitempty"`
	ReplayOf     string          `json:"replay_of,omitempty"`
	// Faults are those a real replay injected (docs/change-safety.md).
	Faults []fault.Fault `json:"faults,omitempty"`
	// ScheduleID names the schedule that started the workflow.
	ScheduleID string `json:"schedule_id,omitempty"`
	// Rollout is the rollout arm the workflow ran (docs/change-safety.md).
	Rollout *workflow.RolloutArm `json:"rollout,omitempty"`
}

type callerView struct {
	Sub      string `json:"sub"`
	ClientID string `json:"client_id,omitempty"`
}

// stepDetail is a step with its tool call, for GET /v1/workflows/{id}.
type stepDetail struct {
	workflow.Step
	// Hidden says the tool's bodies are withheld: the caller lacks tool:<name>.
	Hidden bool `json:"bodies_hidden,omitempty"`
}

// storedView is the view of wf with its steps read from the store.
func (s *Server) storedView(r *http.Request, wf *workflow.Workflow, detail, completions bool) (workflowView, error) {
	steps, err := s.deps.Workflows.Steps(r.Context(), wf.ID, 0)
	if err != nil {
		return workflowView{}, err
	}
	return s.workflowView(r, wf, steps, detail, completions)
}

// workflowView is wf's view with steps: in detail (each step's bodies, the
// caller, the limits) or not, and with its completions' records (each
// request and answer) or its usage alone.
func (s *Server) workflowView(r *http.Request, wf *workflow.Workflow, steps []workflow.Step, detail, completions bool) (workflowView, error) {
	v := workflowView{workflowSummary: summarize(wf, s.deps.Now()), Error: wf.Error, Steps: make([]any, 0, len(steps)),
		Rollout: wf.Rollout}
	p := frontdoor.Principal(r)
	for _, st := range steps {
		if !detail {
			v.Steps = append(v.Steps, workflow.StepView(wf.Agent, st))
			continue
		}
		d := stepDetail{Step: st}
		if workflow.BodiesHidden(p, st) {
			d.Args, d.Result, d.Request, d.Hidden = nil, nil, nil, true
		}
		v.Steps = append(v.Steps, d)
	}
	if detail {
		v.Context, v.MaxToolCalls, v.MaxLLMTokens, v.ReplayOf, v.Faults = wf.Context, wf.MaxToolCalls, wf.MaxLLMTokens, wf.ReplayOf, wf.Faults
		v.OnExhausted = wf.OnExhausted
		v.Caller = &callerView{Sub: wf.Caller.Sub, ClientID: wf.Caller.ClientID}
	}
	if !completions {
		// The usage alone: the completions' records (their conversations)
		// are not read, nor their sums when the execution that ended the
		// workflow here counted them.
		var t workflow.CompletionTotals
		if wf.Usage != nil {
			t = *wf.Usage
		} else {
			var err error
			if t, err = s.deps.Workflows.WorkflowUsage(r.Context(), wf.ID); err != nil {
				return v, err
			}
		}
		if t.Completions > 0 {
			v.Usage = usageOf(t)
		}
		return v, nil
	}
	comps, err := s.deps.Workflows.WorkflowCompletions(r.Context(), wf.ID)
	if err != nil {
		return v, err
	}
	if len(comps) > 0 {
		v.Usage = workflowUsage(comps)
		v.Completions = completionViews(p, comps, steps)
	}
	return v, nil
}

func (s *Server) handleGetWorkflow(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.deps.Workflows.Workflow(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	// completions=false leaves out the completions' records: a long
	// run's are large, each request holding the conversation so far.
	completions := true
	switch q := r.URL.Query().Get("completions"); q {
	case "", "true":
	case "false":
		completions = false
	default:
		return problem.Field("completions", "must be true or false, not %q", q)
	}
	v, err := s.storedView(r, wf, true, completions)
	if err != nil {
		return err
	}
	if v.ScheduleID, err = s.scheduleOf(r, wf.ID); err != nil { // schedules.go
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, v)
}

func (s *Server) handleListWorkflows(w http.ResponseWriter, r *http.Request) error {
	f, err := workflow.ParseListFilter(r.URL.Query())
	if err != nil {
		return err
	}
	wfs, err := s.deps.Workflows.ListWorkflows(r.Context(), frontdoor.Principal(r).Tenant, f)
	if err != nil {
		return err
	}
	list := struct {
		Workflows  []workflowSummary `json:"workflows"`
		NextCursor *string           `json:"next_cursor"`
	}{Workflows: make([]workflowSummary, 0, len(wfs))}
	now := s.deps.Now()
	for _, wf := range wfs {
		list.Workflows = append(list.Workflows, summarize(wf, now))
	}
	if len(wfs) == f.Limit {
		c := wfs[len(wfs)-1].ID
		list.NextCursor = &c
	}
	return frontdoor.WriteJSON(w, http.StatusOK, list)
}

func (s *Server) handleWorkflowEvents(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	id := r.PathValue("id")
	if _, err := s.deps.Workflows.Workflow(r.Context(), tenant, id); err != nil {
		return err
	}
	after := 0
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return problem.Field("Last-Event-ID", "must be an event id this stream sent")
		}
		after = n
	}
	release, err := s.streams.acquire(tenant)
	if err != nil {
		return err
	}
	defer release()
	w.Header().Set("Workflow-Id", id)
	return s.stream(w, r, tenant, id, after)
}

func (s *Server) handleCancelWorkflow(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.deps.Runner.Cancel(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	v, err := s.storedView(r, wf, false, false)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, v)
}

// handleDeleteWorkflow deletes one finished workflow now, with everything
// recorded of it; the record and the answer carry the counts.
func (s *Server) handleDeleteWorkflow(w http.ResponseWriter, r *http.Request) error {
	if s.deps.Retention == nil {
		return problem.New(problem.Unavailable, "workflow deletion is not enabled on this server")
	}
	id := r.PathValue("id")
	rec := s.record(r, http.StatusOK)
	c, err := s.deps.Retention.Delete(r.Context(), frontdoor.Principal(r).Tenant, id, rec)
	if err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, id
	return frontdoor.WriteJSON(w, http.StatusOK, deletedWorkflow{ID: id, Deleted: true, Counts: c})
}

type deletedWorkflow struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
	retention.Counts
}
