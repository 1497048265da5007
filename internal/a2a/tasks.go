package a2a

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// stateOf is the task state of a workflow (SPEC §4 "A2A" mapping).
func stateOf(wf *workflow.Workflow) wire.TaskState {
	switch wf.Status {
	case workflow.Running:
		return wire.TaskStateWorking
	case workflow.Waiting:
		return wire.TaskStateInputRequired
	}
	switch wf.Outcome {
	case workflow.OutcomeDenied:
		return wire.TaskStateRejected
	case workflow.OutcomeCancelled:
		return wire.TaskStateCanceled
	case workflow.OutcomeFailed, workflow.OutcomeTimedOut, workflow.OutcomeLimitExceeded:
		return wire.TaskStateFailed
	}
	if wf.Status == workflow.Completed {
		return wire.TaskStateCompleted
	}
	return wire.TaskStateFailed
}

// statusOfState maps a ListTasks status filter to a workflow status
// and, for REJECTED, an outcome.
var statusOfState = map[wire.TaskState][2]string{
	wire.TaskStateWorking:       {workflow.Running, ""},
	wire.TaskStateInputRequired: {workflow.Waiting, ""},
	wire.TaskStateCompleted:     {workflow.Completed, ""},
	wire.TaskStateFailed:        {workflow.Failed, ""},
	wire.TaskStateCanceled:      {workflow.Cancelled, ""},
	wire.TaskStateRejected:      {"", workflow.OutcomeDenied},
}

// agentMessage is a message from the agent holding one text part.
func agentMessage(taskID, text string) *wire.Message {
	return &wire.Message{MessageID: taskID + "-status", TaskID: taskID, ContextID: taskID, Role: wire.RoleAgent,
		Parts: []wire.Part{{Text: &text}}}
}

// taskOf is the task of a workflow; reason is why a waiting one waits.
func taskOf(wf *workflow.Workflow, reason string, now time.Time) wire.Task {
	t := wire.Task{ID: wf.ID, ContextID: wf.ID, Status: wire.TaskStatus{State: stateOf(wf)},
		Metadata: map[string]any{"agent": wf.Agent, "agentVersion": wf.AgentVersion, "status": wf.Status}}
	ts := now
	if wf.Done() {
		ts = wf.FinishedAt
		t.Metadata["outcome"] = wf.Outcome
	}
	t.Status.Timestamp = ts.UTC().Format(time.RFC3339Nano)
	switch {
	case wf.Status == workflow.Waiting && reason != "":
		t.Status.Message = agentMessage(wf.ID, reason)
	case wf.Done() && len(wf.Error) > 0:
		var doc problem.Document
		if json.Unmarshal(wf.Error, &doc) == nil && doc.Detail != "" {
			t.Status.Message = agentMessage(wf.ID, doc.Detail)
		}
	}
	if len(wf.Output) > 0 && string(wf.Output) != "null" {
		t.Artifacts = []wire.Artifact{outputArtifact(wf.Output)}
	}
	return t
}

// outputArtifact is the agent's output as a data artifact.
func outputArtifact(out json.RawMessage) wire.Artifact {
	return wire.Artifact{ArtifactID: "output", Name: "output", Parts: []wire.Part{{Data: out, MediaType: "application/json"}}}
}

// readTask is the task of a workflow, with what taskOf needs besides it:
// the reason of the approval a waiting workflow waits at.
func (s *Server) readTask(ctx context.Context, wf *workflow.Workflow) (wire.Task, error) {
	reason := ""
	if wf.Status == workflow.Waiting {
		steps, err := s.d.Workflows.Steps(ctx, wf.ID, 0)
		if err != nil {
			return wire.Task{}, err
		}
		for _, st := range steps {
			if st.Kind == agent.KindApprove && st.Status == agent.StatusWaitingApproval {
				reason = st.Reason
			}
		}
	}
	return taskOf(wf, reason, s.d.Now()), nil
}

// task is a workflow of the caller's tenant started by this agent.
func (c *call) task(id string) (*workflow.Workflow, error) {
	if id == "" {
		return nil, problem.Field("id", "is required: the task id")
	}
	wf, err := c.s.d.Workflows.Workflow(c.r.Context(), frontdoor.Principal(c.r).Tenant, id)
	if err == nil && wf.Agent != c.agent {
		err = problem.New(problem.NotFound, "no task %s of agent %s", id, c.agent)
	}
	if problem.Is(err, problem.NotFound) {
		return nil, problem.New(problem.NotFound, "no task %s of agent %s", id, c.agent)
	}
	if err != nil {
		return nil, err
	}
	frontdoor.InfoFrom(c.r.Context()).WorkflowID = wf.ID
	return wf, nil
}

// sendMessage answers SendMessage: the task once it has ended or waits

// getTask answers GetTask.
func (c *call) getTask(id string) (any, error) {
	wf, err := c.task(id)
	if err != nil {
		return nil, err
	}
	return c.s.readTask(c.r.Context(), wf)
}

// cancelTask answers CancelTask: the task once its workflow has stopped
// (at most cancelWait), or as it is then.
func (c *call) cancelTask(id string) (any, error) {
	wf, err := c.task(id)
	if err != nil {
		return nil, err
	}
	if wf.Done() {
		return nil, TaskNotCancelable.New("task %s has already ended (%s)", id, stateOf(wf))
	}
	if wf, err = c.s.d.Runner.Cancel(c.r.Context(), wf.Tenant, id); err != nil {
		return nil, err
	}
	if !wf.Done() {
		ctx, cancel := context.WithTimeout(c.r.Context(), cancelWait)
		defer cancel()
		if done, _, err := c.s.d.Runner.Finished(ctx, wf.Tenant, id); err == nil {
			wf = done
		}
	}
	return c.s.readTask(c.r.Context(), wf)
}

// listTasks answers ListTasks: the agent's tasks, newest first; the page
// token is the cursor of /v1/workflows, and totalSize counts the tasks
// matching the request on every page.
func (c *call) listTasks(req wire.ListTasksRequest) (any, error) {
	f := workflow.ListFilter{Agent: c.agent, Before: req.PageToken}
	size := ""
	if req.PageSize != nil {
		size = strconv.Itoa(int(*req.PageSize))
	}
	limit, err := page.ParseSize("pageSize", size)
	if err != nil {
		return nil, err
	}
	f.Limit = limit
	if req.Status != "" && req.Status != wire.TaskStateUnspecified {
		st, ok := statusOfState[req.Status]
		if !ok {
			return nil, problem.Field("status", "must be a TaskState this agent uses: TASK_STATE_WORKING, TASK_STATE_INPUT_REQUIRED, TASK_STATE_COMPLETED, TASK_STATE_FAILED, TASK_STATE_CANCELED or TASK_STATE_REJECTED")
		}
		f.Status, f.Outcome = st[0], st[1]
	}
	if req.StatusTimestampAfter != "" {
		if f.Since, err = time.Parse(time.RFC3339Nano, req.StatusTimestampAfter); err != nil {
			return nil, problem.Field("statusTimestampAfter", "must be an RFC 3339 time")
		}
	}
	var wfs []*workflow.Workflow
	total := 0
	if req.ContextID != "" {
		// A task's context is the task itself.
		wf, err := c.task(req.ContextID)
		if err != nil && !problem.Is(err, problem.NotFound) {
			return nil, err
		}
		if wf != nil {
			wfs, total = append(wfs, wf), 1
		}
	} else {
		tenant := frontdoor.Principal(c.r).Tenant
		if wfs, err = c.s.d.Workflows.ListWorkflows(c.r.Context(), tenant, f); err != nil {
			return nil, err
		}
		if total, err = c.s.d.Workflows.CountWorkflows(c.r.Context(), tenant, f); err != nil {
			return nil, err
		}
	}
	out := wire.ListTasksResponse{Tasks: make([]wire.Task, 0, len(wfs)), PageSize: f.Limit, TotalSize: total}
	for _, wf := range wfs {
		t, err := c.s.readTask(c.r.Context(), wf)
		if err != nil {
			return nil, err
		}
		if req.IncludeArtifacts == nil || !*req.IncludeArtifacts {
			t.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, t)
	}
	if req.ContextID == "" && len(wfs) == f.Limit {
		out.NextPageToken = wfs[len(wfs)-1].ID
	}
	return out, nil
}
