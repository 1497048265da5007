package mcp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// MCP Tasks: an agent tool's call answered with a task, the call's
// workflow, which the client polls (docs/mcp.md#tasks). The SDK has no
// tasks, so Handle answers their messages itself, in two forms:
//
//   - the Tasks extension (io.modelcontextprotocol/tasks, SEP-2663), for a
//     request whose _meta client capabilities name it: tools/call answers
//     resultType "task"; tasks/get (the result inline), tasks/update,
//     tasks/cancel;
//   - the experimental tasks of revision 2025-11-25, for a tools/call with
//     params.task: tasks/get, tasks/result, tasks/list, tasks/cancel.
const (
	// extTasks is the Tasks extension's identifier.
	extTasks = "io.modelcontextprotocol/tasks"
	// metaClientCapabilities is the _meta key of a request's capabilities.
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// metaRelatedTask is the _meta key of a result's task (2025-11-25).
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	// taskPollInterval is the polling interval a task suggests.
	taskPollInterval = 500 * time.Millisecond
	// taskPage is the size of a tasks/list page.
	taskPage = 50
	// maxTaskID bounds a task id (a workflow id) a message may name.
	maxTaskID = 255
)

// JSON-RPC error codes of task messages.
const (
	codeInvalidParams = -32602
	codeInternal      = -32603
	// codeForbidden: the token lacks the scope the message needs.
	codeForbidden = -32003
)

// rpcError is a JSON-RPC error.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func rpcErr(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// taskParams are the parameters a task message may carry.
type taskParams struct {
	TaskID string `json:"taskId"`
	Cursor string `json:"cursor"`
}

// wantsTask reports whether a tools/call asks for a task, and in which
// form: ext, the extension's.
func (m *rpcRequest) wantsTask() (want, ext bool) {
	if hasExtension(m.Params.Meta) {
		return true, true
	}
	return m.Params.Task != nil, false
}

// hasExtension reports whether a request's _meta declares the Tasks
// extension among its client capabilities.
func hasExtension(meta map[string]any) bool {
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[extTasks]
	return ok
}

// serveTasks answers a message of the tasks a client polls: a tools/call
// of an agent tool that asks for a task, and tasks/*. It reports false for
// every other message, which the SDK answers.
func (s *Server) serveTasks(w http.ResponseWriter, r *http.Request, m *rpcRequest) bool {
	if !validID(m.ID) {
		return false // a notification, or an id the SDK refuses
	}
	if m.Method == "tools/call" && strings.HasPrefix(m.Params.Name, agentTool) {
		want, ext := m.wantsTask()
		if !want {
			return false
		}
		res, rerr, ok := s.startTask(r, m, ext)
		if !ok {
			return false
		}
		writeRPC(w, m.ID, res, rerr)
		return true
	}
	if !strings.HasPrefix(m.Method, "tasks/") {
		return false
	}
	info := frontdoor.InfoFrom(r.Context())
	info.AddDetail("mcp_method", m.Method)
	ext := hasExtension(m.Params.Meta)
	var p taskParams
	var res any
	var rerr *rpcError
	if len(m.RawParams) > 0 && json.Unmarshal(m.RawParams, &p) != nil {
		writeRPC(w, m.ID, nil, rpcErr(codeInvalidParams, "params must be an object whose taskId and cursor are strings"))
		return true
	}
	switch m.Method {
	case "tasks/get":
		res, rerr = s.getTask(r, p.TaskID, ext)
	case "tasks/result":
		res, rerr = s.taskResult(r, p.TaskID)
	case "tasks/list":
		res, rerr = s.listTasks(r, p.Cursor)
	case "tasks/cancel":
		res, rerr = s.cancelTask(r, p.TaskID, ext)
	case "tasks/update":
		res, rerr = s.updateTask(r, p.TaskID)
	default:
		rerr = rpcErr(-32601, "method %q not found: the task methods are tasks/get, tasks/result, tasks/list, tasks/cancel and tasks/update", m.Method)
	}
	writeRPC(w, m.ID, res, rerr)
	return true
}

// startTask starts the workflow of an agent tool's call and answers with
// its task. It reports false when the agent has no default version, which
// the SDK answers as an unknown tool. A refusal (scope, arguments, key) is
// the tool error the call would have answered, in the extension's form, or
// a JSON-RPC error in 2025-11-25's, which has a task or an error only.
func (s *Server) startTask(r *http.Request, m *rpcRequest, ext bool) (any, *rpcError, bool) {
	name := strings.TrimPrefix(m.Params.Name, agentTool)
	tenant := frontdoor.Principal(r).Tenant
	if _, err := s.svc.Agents.AgentVersion(r.Context(), tenant, name, ""); err != nil {
		return nil, nil, false
	}
	info := frontdoor.InfoFrom(r.Context())
	info.AddDetail("mcp_method", "tools/call")
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: m.Params.Name, Arguments: m.Params.Arguments, Meta: m.Params.Meta}}
	ctx, span := startSpan(r.Context(), req)
	defer span.End()
	refuse := func(res *sdk.CallToolResult, code int) (any, *rpcError, bool) {
		if ext {
			return res, nil, true
		}
		return nil, rpcErr(code, "%s", resultText(res)), true
	}
	sr, refusal := agentStart(r, req, name)
	if refusal != nil {
		code := codeInvalidParams
		if frontdoor.Principal(r).Require(auth.ScopeAgentsInvoke) != nil {
			code = codeForbidden
		}
		return refuse(refusal, code)
	}
	started, err := s.start(ctx, r, req, sr)
	if err != nil {
		return refuse(toolError("%s", problemText(err)), codeInvalidParams)
	}
	wf := started.Workflow
	info.WorkflowID = wf.ID
	info.AddDetail("task_id", wf.ID)
	t := taskOf(wf, nil)
	var view map[string]any
	if ext {
		view = t.ext()
		view["resultType"] = "task"
	} else {
		view = map[string]any{"task": t.legacy()}
	}
	if started.Repeat {
		view["_meta"] = map[string]any{replayedMeta: true}
	}
	return view, nil, true
}

// validID reports whether a JSON-RPC request's id is a string or a number.
func validID(id json.RawMessage) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// getTask answers tasks/get: the workflow as a task, with the call's result
// inline once it has finished, in the extension's form.
func (s *Server) getTask(r *http.Request, id string, ext bool) (any, *rpcError) {
	wf, steps, rerr := s.readTask(r, id, auth.ScopeWorkflowsRead)
	if rerr != nil {
		return nil, rerr
	}
	t := taskOf(wf, steps)
	if !ext {
		return t.legacy(), nil
	}
	view := t.ext()
	view["resultType"] = "complete"
	switch t.Status {
	case "completed":
		res, err := s.toolResult(r, wf, steps)
		if err != nil {
			return nil, rpcErr(codeInternal, "%s", problemText(err))
		}
		view["result"] = res
	case "input_required":
		view["inputRequests"] = s.inputRequests(wf, steps)
	}
	return view, nil
}

// taskResult answers tasks/result (2025-11-25): the call's result once the
// workflow has finished, waiting for it (an approval included) as long as
// the request may last.
func (s *Server) taskResult(r *http.Request, id string) (any, *rpcError) {
	wf, _, rerr := s.readTask(r, id, auth.ScopeWorkflowsRead)
	if rerr != nil {
		return nil, rerr
	}
	if !wf.Done() {
		if wf, rerr = s.waitTask(r, id); rerr != nil {
			return nil, rerr
		}
	}
	steps, err := s.svc.Workflows.Steps(r.Context(), wf.ID, 0)
	if err != nil {
		return nil, rpcErr(codeInternal, "%s", problemText(err))
	}
	res, err := s.toolResult(r, wf, steps)
	if err != nil {
		return nil, rpcErr(codeInternal, "%s", problemText(err))
	}
	if res.Meta == nil {
		res.Meta = sdk.Meta{}
	}
	res.Meta[metaRelatedTask] = map[string]any{"taskId": wf.ID}
	return res, nil
}

// waitTask waits for a workflow's end.
func (s *Server) waitTask(r *http.Request, id string) (*workflow.Workflow, *rpcError) {
	wf, err := s.svc.Runner.Wait(r.Context(), frontdoor.Principal(r).Tenant, id)
	if err != nil {
		return nil, rpcErr(codeInternal, "waiting for the task: %s", problemText(err))
	}
	return wf, nil
}

// listTasks answers tasks/list (2025-11-25): the tenant's workflows, newest
// first, a page at a time; the cursor is the last task of the page before.
func (s *Server) listTasks(r *http.Request, cursor string) (any, *rpcError) {
	if err := frontdoor.Principal(r).Require(auth.ScopeWorkflowsRead); err != nil {
		return nil, forbidden("tasks/list", auth.ScopeWorkflowsRead)
	}
	wfs, err := s.svc.Workflows.ListWorkflows(r.Context(), frontdoor.Principal(r).Tenant, workflow.ListFilter{Limit: taskPage, Before: cursor})
	if err != nil {
		return nil, rpcErr(codeInvalidParams, "cursor: %s", problemText(err))
	}
	tasks := make([]map[string]any, 0, len(wfs))
	for _, wf := range wfs {
		tasks = append(tasks, taskOf(wf, nil).legacy())
	}
	out := map[string]any{"tasks": tasks}
	if len(wfs) == taskPage {
		out["nextCursor"] = wfs[len(wfs)-1].ID
	}
	return out, nil
}

// cancelTask answers tasks/cancel: it cancels the workflow, as POST
// /v1/workflows/{id}/cancel does. The extension acknowledges with an empty
// result; 2025-11-25 refuses a finished task and answers with the task.
func (s *Server) cancelTask(r *http.Request, id string, ext bool) (any, *rpcError) {
	wf, _, rerr := s.readTask(r, id, auth.ScopeAgentsInvoke)
	if rerr != nil {
		return nil, rerr
	}
	if wf.Done() {
		if ext {
			return map[string]any{"resultType": "complete"}, nil
		}
		return nil, rpcErr(codeInvalidParams, "task %s has finished (%s): only a working or input_required task can be cancelled", id, taskStatus(wf))
	}
	frontdoor.InfoFrom(r.Context()).AddDetail("cancel", true)
	wf, err := s.svc.Runner.Cancel(r.Context(), frontdoor.Principal(r).Tenant, id)
	if err != nil {
		return nil, rpcErr(codeInternal, "%s", problemText(err))
	}
	if ext {
		return map[string]any{"resultType": "complete"}, nil
	}
	return taskOf(wf, nil).legacy(), nil
}

// updateTask answers tasks/update: its input responses are acknowledged
// and ignored, since an approval is decided through the approvals API (the
// URL its input request names), not by the client.
func (s *Server) updateTask(r *http.Request, id string) (any, *rpcError) {
	if _, _, rerr := s.readTask(r, id, auth.ScopeWorkflowsRead); rerr != nil {
		return nil, rerr
	}
	return map[string]any{"resultType": "complete"}, nil
}

// readTask is the caller's tenant's workflow of a task, and its steps, for
// a message that needs scope.
func (s *Server) readTask(r *http.Request, id, scope string) (*workflow.Workflow, []workflow.Step, *rpcError) {
	info := frontdoor.InfoFrom(r.Context())
	method, _ := info.Details["mcp_method"].(string)
	if err := frontdoor.Principal(r).Require(scope); err != nil {
		return nil, nil, forbidden(method, scope)
	}
	if id == "" {
		return nil, nil, rpcErr(codeInvalidParams, "params.taskId is required: the taskId the tools/call answered")
	}
	if len(id) > maxTaskID {
		return nil, nil, rpcErr(codeInvalidParams, "params.taskId is at most %d characters: the taskId the tools/call answered", maxTaskID)
	}
	info.AddDetail("task_id", id)
	wf, err := s.svc.Workflows.Workflow(r.Context(), frontdoor.Principal(r).Tenant, id)
	if problem.Is(err, problem.NotFound) {
		return nil, nil, rpcErr(codeInvalidParams, "no task %q: a taskId is the workflow_id a tools/call answered, in this token's tenant", id)
	}
	if err != nil {
		return nil, nil, rpcErr(codeInternal, "%s", problemText(err))
	}
	info.WorkflowID = wf.ID
	steps, err := s.svc.Workflows.Steps(r.Context(), wf.ID, 0)
	if err != nil {
		return nil, nil, rpcErr(codeInternal, "%s", problemText(err))
	}
	return wf, steps, nil
}

func forbidden(method, scope string) *rpcError {
	return &rpcError{Code: codeForbidden, Message: fmt.Sprintf("%s needs the scope %s, which this token lacks", method, scope),
		Data: map[string]any{"scope": scope}}
}

// toolResult is what the plain call answers for a finished (or waiting)
// workflow.
func (s *Server) toolResult(r *http.Request, wf *workflow.Workflow, steps []workflow.Step) (*sdk.CallToolResult, error) {
	v, err := s.svc.View(r, wf, steps)
	if err != nil {
		return nil, err
	}
	return jsonResult(v, wf.Status == workflow.Failed)
}

// inputRequests are the approval a waiting workflow waits at, as a URL
// elicitation: the client shows the approver where to decide. Keys are the
// steps, never reused within a workflow.
func (s *Server) inputRequests(wf *workflow.Workflow, steps []workflow.Step) map[string]any {
	out := map[string]any{}
	if st, ok := waitingAt(steps); ok {
		n := strconv.Itoa(st.Step)
		out["approval-"+n] = map[string]any{"method": "elicitation/create", "params": map[string]any{
			"mode":          "url",
			"elicitationId": wf.ID + "/" + n,
			"url":           s.cfg.PublicURL + "/console/workflows/" + wf.ID,
			"message":       approvalMessage(wf.ID, st),
		}}
	}
	return out
}

// waitingAt is the step asking for the approval a waiting workflow waits
// at: the last that asked for one. A workflow waits at one at a time, and
// an earlier one may keep its asking step beside its decision's (an
// external agent's call, decided in a step of its own).
func waitingAt(steps []workflow.Step) (workflow.Step, bool) {
	for i := len(steps) - 1; i >= 0; i-- {
		if st := steps[i]; st.Kind == agent.KindApprove && st.Status == agent.StatusWaitingApproval {
			return st, true
		}
	}
	return workflow.Step{}, false
}

func approvalMessage(id string, st workflow.Step) string {
	msg := "Step " + strconv.Itoa(st.Step) + " (" + st.Action + ") waits for an approval"
	if st.Reason != "" {
		msg += ": " + st.Reason
	}
	return msg + ". An approver decides it in the console or with POST /v1/workflows/" + id + "/approvals/" + strconv.Itoa(st.Step) + "."
}

// task is a workflow as an MCP task.
type task struct {
	ID, Status, Message string
	Created, Updated    time.Time
}

// taskStatus is a workflow's status as a task's. A failed workflow's call
// answered a tool result (isError), not a JSON-RPC error: its task has
// completed, as the extension has it.
func taskStatus(wf *workflow.Workflow) string {
	switch wf.Status {
	case workflow.Waiting:
		return "input_required"
	case workflow.Completed, workflow.Failed:
		return "completed"
	case workflow.Cancelled:
		return "cancelled"
	}
	return "working"
}

// taskOf is a workflow's task; steps, when read, tell when it last changed
// and which approval it waits for.
func taskOf(wf *workflow.Workflow, steps []workflow.Step) task {
	t := task{ID: wf.ID, Status: taskStatus(wf), Created: wf.StartedAt, Updated: wf.StartedAt}
	for _, st := range steps {
		if st.StartedAt.After(t.Updated) {
			t.Updated = st.StartedAt
		}
	}
	if !wf.FinishedAt.IsZero() {
		t.Updated = wf.FinishedAt
	}
	switch wf.Status {
	case workflow.Waiting:
		t.Message = "the workflow waits for an approval"
		if st, ok := waitingAt(steps); ok {
			t.Message = approvalMessage(wf.ID, st)
		}
	case workflow.Completed:
		t.Message = "the workflow completed with the outcome " + wf.Outcome
	case workflow.Failed:
		t.Message = "the workflow failed (outcome " + wf.Outcome + "); the result says why"
	case workflow.Cancelled:
		t.Message = "the workflow was cancelled"
	default:
		t.Message = "the workflow is running"
	}
	return t
}

// legacy is the task in the form of revision 2025-11-25. Its ttl is null:
// a workflow is kept as the retention policy says, not per task.
func (t task) legacy() map[string]any {
	return map[string]any{"taskId": t.ID, "status": t.Status, "statusMessage": t.Message,
		"createdAt": stamp(t.Created), "lastUpdatedAt": stamp(t.Updated), "ttl": nil,
		"pollInterval": taskPollInterval.Milliseconds()}
}

// ext is the task in the extension's form.
func (t task) ext() map[string]any {
	return map[string]any{"taskId": t.ID, "status": t.Status, "statusMessage": t.Message,
		"createdAt": stamp(t.Created), "lastUpdatedAt": stamp(t.Updated), "ttlMs": nil,
		"pollIntervalMs": taskPollInterval.Milliseconds()}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// writeRPC writes a JSON-RPC response of a message Handle answered itself.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rerr *rpcError) {
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if rerr != nil {
		resp["error"] = rerr
	} else {
		resp["result"] = result
	}
	_ = frontdoor.WriteJSON(w, http.StatusOK, resp)
}

// resultText is a tool result's text.
func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
