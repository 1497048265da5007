package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Each agent's default version is an A2A agent at /a2a/{agent} (SPEC §4
// "A2A", docs/a2a.md): protocol 1.0, written from the protocol's published
// specification (a2a.proto), over the JSON-RPC binding (POST /a2a/{agent})
// and the HTTP+JSON binding (/a2a/{agent}/message:send and the rest). A
// task is a workflow, started, read, followed and cancelled by the code
// that serves invoke and /v1/workflows.

const (
	a2aVersion = "1.0"
	// a2aCancelWait bounds how long CancelTask waits for a running
	// workflow to stop at its next step before it answers.
	a2aCancelWait = 10 * time.Second
)

// a2aPart is a Part: exactly one of text, raw, url and data.
type a2aPart struct {
	Text      *string         `json:"text,omitempty"`
	Raw       *string         `json:"raw,omitempty"`
	URL       *string         `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

type a2aMessage struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []a2aPart      `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

type a2aSendRequest struct {
	Tenant        string          `json:"tenant,omitempty"`
	Message       *a2aMessage     `json:"message"`
	Configuration *a2aSendConfig  `json:"configuration,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

type a2aSendConfig struct {
	AcceptedOutputModes []string        `json:"acceptedOutputModes,omitempty"`
	PushConfig          json.RawMessage `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength       *int32          `json:"historyLength,omitempty"`
	ReturnImmediately   bool            `json:"returnImmediately,omitempty"`
}

type a2aTaskRequest struct {
	Tenant        string          `json:"tenant,omitempty"`
	ID            string          `json:"id"`
	HistoryLength *int32          `json:"historyLength,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

type a2aListRequest struct {
	Tenant           string `json:"tenant,omitempty"`
	ContextID        string `json:"contextId,omitempty"`
	Status           string `json:"status,omitempty"`
	PageSize         *int32 `json:"pageSize,omitempty"`
	PageToken        string `json:"pageToken,omitempty"`
	HistoryLength    *int32 `json:"historyLength,omitempty"`
	IncludeArtifacts *bool  `json:"includeArtifacts,omitempty"`
	// StatusTimestampAfter is an RFC 3339 time.
	StatusTimestampAfter string `json:"statusTimestampAfter,omitempty"`
}

type a2aTask struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    a2aStatus      `json:"status"`
	Artifacts []a2aArtifact  `json:"artifacts,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type a2aStatus struct {
	State     string      `json:"state"`
	Message   *a2aMessage `json:"message,omitempty"`
	Timestamp string      `json:"timestamp,omitempty"`
}

type a2aArtifact struct {
	ArtifactID string    `json:"artifactId"`
	Name       string    `json:"name,omitempty"`
	Parts      []a2aPart `json:"parts"`
}

type a2aStatusUpdate struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    a2aStatus      `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type a2aArtifactUpdate struct {
	TaskID    string      `json:"taskId"`
	ContextID string      `json:"contextId"`
	Artifact  a2aArtifact `json:"artifact"`
	LastChunk bool        `json:"lastChunk"`
}

// a2aStreamResponse is a StreamResponse: one of its members.
type a2aStreamResponse struct {
	Task           *a2aTask           `json:"task,omitempty"`
	StatusUpdate   *a2aStatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *a2aArtifactUpdate `json:"artifactUpdate,omitempty"`
}

// Task states (a2a.proto TaskState).
const (
	a2aWorking       = "TASK_STATE_WORKING"
	a2aCompleted     = "TASK_STATE_COMPLETED"
	a2aFailed        = "TASK_STATE_FAILED"
	a2aCanceled      = "TASK_STATE_CANCELED"
	a2aInputRequired = "TASK_STATE_INPUT_REQUIRED"
	a2aRejected      = "TASK_STATE_REJECTED"
)

// a2aState is the task state of a workflow (SPEC §4 "A2A" mapping).
func a2aState(wf *workflow.Workflow) string {
	switch wf.Status {
	case workflow.Running:
		return a2aWorking
	case workflow.Waiting:
		return a2aInputRequired
	}
	switch wf.Outcome {
	case workflow.OutcomeDenied:
		return a2aRejected
	case workflow.OutcomeCancelled:
		return a2aCanceled
	case workflow.OutcomeFailed, workflow.OutcomeTimedOut, workflow.OutcomeLimitExceeded:
		return a2aFailed
	}
	if wf.Status == workflow.Completed {
		return a2aCompleted
	}
	return a2aFailed
}

// a2aStatesToStatus maps a ListTasks status filter to a workflow status
// and, for REJECTED, an outcome.
var a2aStatesToStatus = map[string][2]string{
	a2aWorking:       {workflow.Running, ""},
	a2aInputRequired: {workflow.Waiting, ""},
	a2aCompleted:     {workflow.Completed, ""},
	a2aFailed:        {workflow.Failed, ""},
	a2aCanceled:      {workflow.Cancelled, ""},
	a2aRejected:      {"", workflow.OutcomeDenied},
}

// agentMessage is a message from the agent holding one text part.
func agentMessage(taskID, text string) *a2aMessage {
	return &a2aMessage{MessageID: taskID + "-status", TaskID: taskID, ContextID: taskID, Role: "ROLE_AGENT",
		Parts: []a2aPart{{Text: &text}}}
}

// a2aTaskOf is the task of a workflow; reason is why a waiting one waits.
func a2aTaskOf(wf *workflow.Workflow, reason string, now time.Time) a2aTask {
	t := a2aTask{ID: wf.ID, ContextID: wf.ID, Status: a2aStatus{State: a2aState(wf)},
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
		t.Artifacts = []a2aArtifact{outputArtifact(wf.Output)}
	}
	return t
}

// outputArtifact is the agent's output as a data artifact.
func outputArtifact(out json.RawMessage) a2aArtifact {
	return a2aArtifact{ArtifactID: "output", Name: "output", Parts: []a2aPart{{Data: out, MediaType: "application/json"}}}
}

// a2aTask reads what a2aTaskOf needs besides the workflow: the reason of
// the approval a waiting workflow waits at.
func (s *Server) a2aTask(ctx context.Context, wf *workflow.Workflow) (a2aTask, error) {
	reason := ""
	if wf.Status == workflow.Waiting {
		steps, err := s.deps.Workflows.Steps(ctx, wf.ID, 0)
		if err != nil {
			return a2aTask{}, err
		}
		for _, st := range steps {
			if st.Kind == agent.KindApprove && st.Status == agent.StatusWaitingApproval {
				reason = st.Reason
			}
		}
	}
	return a2aTaskOf(wf, reason, s.deps.Now()), nil
}

// a2aCall is one A2A request, whichever binding brought it.
type a2aCall struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	agent string
	// event wraps each streamed StreamResponse for the binding.
	event func(v any) any
}

// checkA2AVersion refuses a request for a protocol version other than 1.0
// (header or query parameter A2A-Version; none means 1.0: this server
// speaks no other).
func checkA2AVersion(r *http.Request) error {
	v := r.Header.Get("A2A-Version")
	if v == "" {
		v = r.URL.Query().Get("A2A-Version")
	}
	switch strings.TrimSpace(v) {
	case "", "1", "1.0", "1.0.0":
		return nil
	}
	if len(v) > 20 {
		v = v[:20] + "…"
	}
	return problem.New(problem.A2AVersionNotSupported, "A2A-Version %q is not supported: this agent speaks A2A %s", v, a2aVersion)
}

// a2aAgent is the default version of the agent the request names, after
// checking the protocol version.
func (s *Server) a2aAgent(r *http.Request) (*agent.Version, error) {
	name := r.PathValue("agent")
	info := frontdoor.InfoFrom(r.Context())
	info.ResourceID = name
	if err := checkA2AVersion(r); err != nil {
		return nil, err
	}
	return s.deps.Agents.AgentVersion(r.Context(), frontdoor.Principal(r).Tenant, name, "")
}

// messageInput is the goal and context of a message: its text parts,
// joined by blank lines, and its one data part, which must be an object.
func messageInput(m *a2aMessage) (invokeRequest, error) {
	var req invokeRequest
	var texts []string
	for i, p := range m.Parts {
		field := fmt.Sprintf("message.parts[%d]", i)
		switch {
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case p.Data != nil:
			if req.Context != nil {
				return req, problem.Field(field, "is a second data part: send the context as one data part")
			}
			if err := json.Unmarshal(p.Data, &req.Context); err != nil || req.Context == nil {
				return req, problem.Field(field+".data", "must be a JSON object: it is the agent's context")
			}
		case p.Raw != nil, p.URL != nil:
			return req, problem.New(problem.A2AContentTypeNotSupported,
				"%s is a file part: this agent takes text parts (the goal) and one data part (the context)", field)
		default:
			return req, problem.Field(field, "has no content: give text or data")
		}
	}
	if len(texts) == 0 {
		return req, problem.Field("message.parts", "has no text part: the text is the agent's goal")
	}
	req.Goal = strings.Join(texts, "\n\n")
	return req, nil
}

// send starts the task of a message, or finds the one a message with the
// same id started (the message id is the idempotency key, as in invoke).
// stream reserves a stream before anything starts; release frees it.
func (c *a2aCall) send(req a2aSendRequest, stream bool) (wf *workflow.Workflow, release func(), err error) {
	release = func() {}
	m := req.Message
	switch {
	case m == nil:
		return nil, release, problem.Field("message", "is required")
	case m.MessageID == "":
		return nil, release, problem.Field("message.messageId", "is required: it is the message's idempotency key")
	case len(m.MessageID) > maxIdempotencyKey:
		return nil, release, problem.Field("message.messageId", "must be at most %d characters", maxIdempotencyKey)
	case m.Role != "" && m.Role != "ROLE_USER":
		return nil, release, problem.Field("message.role", "must be ROLE_USER")
	case req.Configuration != nil && len(req.Configuration.PushConfig) > 0 && string(req.Configuration.PushConfig) != "null":
		return nil, release, problem.New(problem.A2AUnsupportedOperation,
			"configuration.taskPushNotificationConfig is not taken: create the task's config with CreateTaskPushNotificationConfig once SendMessage (with returnImmediately) has answered its id")
	}
	in, err := messageInput(m)
	if err != nil {
		return nil, release, err
	}
	r := c.r
	p := frontdoor.Principal(r)
	canon, _ := json.Marshal(map[string]any{"goal": in.Goal, "context": in.Context, "taskId": m.TaskID})
	hash := workflow.Fingerprint(canon)
	key := workflow.IdempotencyKey(p.ID(), "/a2a/"+c.agent, m.MessageID)
	if stream {
		// Counted before anything starts, a repeat's stream too, as invoke's.
		if release, err = c.s.streams.acquire(p.Tenant); err != nil {
			return nil, func() {}, err
		}
	}
	fail := func(err error) (*workflow.Workflow, func(), error) {
		release()
		return nil, func() {}, err
	}
	if wf, err = c.s.invoker.Find(r.Context(), p.Tenant, key, hash, c.s.cfg.InvokeIdempotencyTTL); err != nil {
		return fail(messageReused(err))
	}
	info := frontdoor.InfoFrom(r.Context())
	if wf != nil {
		info.Details = map[string]any{"idempotent_replayed": true}
	} else {
		if m.TaskID != "" {
			return fail(c.continueTask(m.TaskID))
		}
		started, err := c.s.invoker.Start(r.Context(), invocation(r, c.agent, "", in, key, hash))
		if err != nil {
			return fail(messageReused(err))
		}
		wf = started.Workflow
	}
	info.WorkflowID = wf.ID
	c.w.Header().Set("Workflow-Id", wf.ID)
	return wf, release, nil
}

// messageReused says a reused idempotency key in A2A's terms: the message
// id is the key.
func messageReused(err error) error {
	if errors.Is(err, workflow.ErrKeyReused) {
		return problem.New(problem.IdempotencyKeyReused,
			"this messageId was sent with a different message; use a new messageId for a new message")
	}
	return err
}

// continueTask answers a message sent to an existing task: its decisions
// are an approver's, through the API, and an ended task takes no more.
func (c *a2aCall) continueTask(id string) error {
	wf, err := c.task(id)
	if err != nil {
		return err
	}
	if wf.Done() {
		return problem.New(problem.A2AUnsupportedOperation, "task %s has ended (%s): send a new message without taskId", id, a2aState(wf))
	}
	return problem.New(problem.A2AUnsupportedOperation,
		"task %s takes no further messages: an approver decides its approval through POST /v1/workflows/%s/approvals/{step}", id, id)
}

// task is a workflow of the caller's tenant started by this agent.
func (c *a2aCall) task(id string) (*workflow.Workflow, error) {
	if id == "" {
		return nil, problem.Field("id", "is required: the task id")
	}
	wf, err := c.s.deps.Workflows.Workflow(c.r.Context(), frontdoor.Principal(c.r).Tenant, id)
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
// for a decision, or at once with returnImmediately.
func (c *a2aCall) sendMessage(req a2aSendRequest) (any, error) {
	wf, _, err := c.send(req, false)
	if err != nil {
		return nil, err
	}
	if req.Configuration == nil || !req.Configuration.ReturnImmediately {
		if wf, _, err = c.s.deps.Runner.Finished(c.r.Context(), wf.Tenant, wf.ID); err != nil {
			return nil, err
		}
	}
	t, err := c.s.a2aTask(c.r.Context(), wf)
	if err != nil {
		return nil, err
	}
	return map[string]any{"task": t}, nil
}

// sendStreamingMessage answers SendStreamingMessage with the task's events.
func (c *a2aCall) sendStreamingMessage(req a2aSendRequest) error {
	wf, release, err := c.send(req, true)
	if err != nil {
		return err
	}
	defer release()
	return c.stream(wf, 0)
}

// subscribe answers SubscribeToTask; Last-Event-ID resumes a stream.
func (c *a2aCall) subscribe(id string) error {
	wf, err := c.task(id)
	if err != nil {
		return err
	}
	after := 0
	if v := c.r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return problem.Field("Last-Event-ID", "must be an event id this stream sent")
		}
		after = n
	} else if wf.Done() {
		return problem.New(problem.A2AUnsupportedOperation, "task %s has ended (%s): read it with GetTask", id, a2aState(wf))
	}
	release, err := c.s.streams.acquire(wf.Tenant)
	if err != nil {
		return err
	}
	defer release()
	return c.stream(wf, after)
}

// stream sends the task as it is, then a status update per workflow event
// after afterID (each step's, with the step in metadata), then the output
// artifact and the final status. Event ids are the workflow's own, so a
// client resumes with Last-Event-ID as on /v1/workflows/{id}/events.
func (c *a2aCall) stream(wf *workflow.Workflow, afterID int) error {
	sse, ctx := frontdoor.StartSSE(c.w, c.r, c.s.draining)
	defer sse.Close()
	send := func(id int, v a2aStreamResponse) error {
		b, err := frontdoor.Marshal(c.event(v))
		if err != nil {
			return err
		}
		return sse.Send(id, b[:len(b)-1])
	}
	t, err := c.s.a2aTask(ctx, wf)
	if err != nil {
		return err
	}
	if err := send(afterID, a2aStreamResponse{Task: &t}); err != nil {
		return nil
	}
	for ev, err := range c.s.deps.Runner.Follow(ctx, wf.Tenant, wf.ID, afterID) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("a2a stream of %s: %w", wf.ID, err)
		}
		var head struct {
			Event  string `json:"event"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Data, &head)
		now := c.s.deps.Now().UTC().Format(time.RFC3339Nano)
		if head.Event != "complete" {
			u := a2aStatusUpdate{TaskID: wf.ID, ContextID: wf.ID, Status: a2aStatus{State: a2aWorking, Timestamp: now},
				Metadata: map[string]any{"step": ev.Data}}
			if head.Status == agent.StatusWaitingApproval {
				u.Status.State = a2aInputRequired
				if head.Reason != "" {
					u.Status.Message = agentMessage(wf.ID, head.Reason)
				}
			}
			if err := send(ev.ID, a2aStreamResponse{StatusUpdate: &u}); err != nil {
				return nil
			}
			continue
		}
		end, err := c.s.deps.Workflows.Workflow(ctx, wf.Tenant, wf.ID)
		if err != nil {
			return fmt.Errorf("a2a stream of %s: %w", wf.ID, err)
		}
		final := a2aTaskOf(end, "", c.s.deps.Now())
		for _, a := range final.Artifacts {
			if err := send(ev.ID, a2aStreamResponse{ArtifactUpdate: &a2aArtifactUpdate{TaskID: wf.ID, ContextID: wf.ID, Artifact: a, LastChunk: true}}); err != nil {
				return nil
			}
		}
		u := a2aStatusUpdate{TaskID: wf.ID, ContextID: wf.ID, Status: final.Status, Metadata: final.Metadata}
		_ = send(ev.ID, a2aStreamResponse{StatusUpdate: &u})
		return nil
	}
	return nil
}

// getTask answers GetTask.
func (c *a2aCall) getTask(id string) (any, error) {
	wf, err := c.task(id)
	if err != nil {
		return nil, err
	}
	return c.s.a2aTask(c.r.Context(), wf)
}

// cancelTask answers CancelTask: the task once its workflow has stopped
// (at most a2aCancelWait), or as it is then.
func (c *a2aCall) cancelTask(id string) (any, error) {
	wf, err := c.task(id)
	if err != nil {
		return nil, err
	}
	if wf.Done() {
		return nil, problem.New(problem.A2ATaskNotCancelable, "task %s has already ended (%s)", id, a2aState(wf))
	}
	if wf, err = c.s.deps.Runner.Cancel(c.r.Context(), wf.Tenant, id); err != nil {
		return nil, err
	}
	if !wf.Done() {
		ctx, cancel := context.WithTimeout(c.r.Context(), a2aCancelWait)
		defer cancel()
		if done, _, err := c.s.deps.Runner.Finished(ctx, wf.Tenant, id); err == nil {
			wf = done
		}
	}
	return c.s.a2aTask(c.r.Context(), wf)
}

// listTasks answers ListTasks: the agent's tasks, newest first; the page
// token is the cursor of /v1/workflows, and totalSize counts the tasks
// matching the request on every page.
func (c *a2aCall) listTasks(req a2aListRequest) (any, error) {
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
	if req.Status != "" && req.Status != "TASK_STATE_UNSPECIFIED" {
		st, ok := a2aStatesToStatus[req.Status]
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
		if wfs, err = c.s.deps.Workflows.ListWorkflows(c.r.Context(), tenant, f); err != nil {
			return nil, err
		}
		if total, err = c.s.deps.Workflows.CountWorkflows(c.r.Context(), tenant, f); err != nil {
			return nil, err
		}
	}
	out := struct {
		Tasks         []a2aTask `json:"tasks"`
		NextPageToken string    `json:"nextPageToken"`
		PageSize      int       `json:"pageSize"`
		TotalSize     int       `json:"totalSize"`
	}{Tasks: make([]a2aTask, 0, len(wfs)), PageSize: f.Limit, TotalSize: total}
	for _, wf := range wfs {
		t, err := c.s.a2aTask(c.r.Context(), wf)
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

// errPushNotSupported answers the push-notification methods on a server
// without webhooks.
var errPushNotSupported = problem.New(problem.A2APushNotSupported, "this server does not send push notifications (capabilities.pushNotifications is false)")

// --- The agent card ---

type a2aCard struct {
	Name                 string           `json:"name"`
	Description          string           `json:"description"`
	SupportedInterfaces  []a2aInterface   `json:"supportedInterfaces"`
	Provider             *a2aProvider     `json:"provider,omitempty"`
	Version              string           `json:"version"`
	DocumentationURL     string           `json:"documentationUrl,omitempty"`
	Capabilities         a2aCapabilities  `json:"capabilities"`
	SecuritySchemes      map[string]any   `json:"securitySchemes,omitempty"`
	SecurityRequirements []map[string]any `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string         `json:"defaultInputModes"`
	DefaultOutputModes   []string         `json:"defaultOutputModes"`
	Skills               []a2aSkill       `json:"skills"`
}

type a2aInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

type a2aProvider struct {
	URL          string `json:"url"`
	Organization string `json:"organization"`
}

type a2aCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
}

type a2aSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// a2aCardOf is the card of an agent version.
func (s *Server) a2aCardOf(v *agent.Version, def agent.Definition) a2aCard {
	url := s.cfg.PublicURL + "/a2a/" + v.Name
	desc := v.Description
	if desc == "" {
		desc = def.Purpose
	}
	if desc == "" {
		desc = "The agentplane agent " + v.Name + ": send a goal as text, and its context as a data part."
	}
	scopes := map[string]string{auth.ScopeAgentsInvoke: "send messages to agents and follow their tasks"}
	scheme := map[string]any{"oauth2SecurityScheme": map[string]any{
		"description": "OAuth 2.0 client credentials; the token needs the scope agents:invoke",
		"flows": map[string]any{"clientCredentials": map[string]any{
			"tokenUrl": s.cfg.PublicURL + "/oauth/token", "scopes": scopes}}}}
	if s.deps.Issuer == nil && s.cfg.AuthorizationServer != "" {
		scheme = map[string]any{"openIdConnectSecurityScheme": map[string]any{
			"description":      "tokens of the external issuer, with the scope agents:invoke",
			"openIdConnectUrl": strings.TrimSuffix(s.cfg.AuthorizationServer, "/") + "/.well-known/openid-configuration"}}
	}
	in := []string{"text/plain", "application/json"}
	out := []string{"application/json", "text/plain"}
	return a2aCard{
		Name: v.Name, Description: desc, Version: v.Version,
		SupportedInterfaces: []a2aInterface{
			{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: a2aVersion},
			{URL: url, ProtocolBinding: "HTTP+JSON", ProtocolVersion: a2aVersion},
		},
		Provider:             &a2aProvider{URL: s.cfg.PublicURL, Organization: "agentplane"},
		Capabilities:         a2aCapabilities{Streaming: true, PushNotifications: s.deps.Webhooks != nil},
		SecuritySchemes:      map[string]any{"agentplane": scheme},
		SecurityRequirements: []map[string]any{{"schemes": map[string]any{"agentplane": map[string]any{"list": []string{auth.ScopeAgentsInvoke}}}}},
		DefaultInputModes:    in, DefaultOutputModes: out,
		Skills: []a2aSkill{{ID: v.Name, Name: v.Name, Description: desc, Tags: []string{"agentplane", "agent"},
			InputModes: in, OutputModes: out}},
	}
}

// handleA2ACard serves the agent card of an agent's default version: to a
// caller with a token of its tenant, or to anyone when the version was
// deployed with a2a.public_card (the tenant named by ?tenant=). A request
// without a token has no tenant of its own: its record goes to the
// _system chain (its resource the agent, its details the tenant asked
// for), so that nobody writes into a tenant's chain by naming it.
func (s *Server) handleA2ACard(w http.ResponseWriter, r *http.Request) error {
	info := frontdoor.InfoFrom(r.Context())
	name := r.PathValue("agent")
	info.ResourceID = name
	if _, ok := auth.BearerToken(r); ok {
		if err := s.admit(w, r, &route{scope: auth.ScopeAgentsInvoke}); err != nil {
			return err
		}
		return s.writeCard(w, r, frontdoor.Principal(r).Tenant, name, false)
	}
	tenant := r.URL.Query().Get("tenant")
	refused := problem.New(problem.Unauthenticated, "no bearer token: send Authorization: Bearer <access token> (this agent's card is not public)")
	if tenant == "" || len(tenant) > maxCardTenant {
		return refused
	}
	info.AddDetail("tenant", audit.Text(tenant))
	if err := s.writeCard(w, r, tenant, name, true); problem.Is(err, problem.AgentVersionNotFound) || problem.Is(err, problem.NotFound) {
		return refused
	} else {
		return err
	}
}

// maxCardTenant bounds the ?tenant= of an anonymous card request: a longer
// one names no tenant.
const maxCardTenant = 200

var errCardNotPublic = problem.New(problem.NotFound, "the card is not public")

func (s *Server) writeCard(w http.ResponseWriter, r *http.Request, tenant, name string, public bool) error {
	v, err := s.deps.Agents.AgentVersion(r.Context(), tenant, name, "")
	if err != nil {
		return err
	}
	var def agent.Definition
	if err := json.Unmarshal(v.Definition, &def); err != nil {
		return fmt.Errorf("definition of %s: %w", v.Ref(), err)
	}
	if public {
		if def.A2A == nil || !def.A2A.PublicCard {
			return errCardNotPublic
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
	} else {
		w.Header().Set("Cache-Control", "private, max-age=300")
	}
	w.Header().Set("ETag", strconv.Quote(v.Name+"@"+v.Version))
	return frontdoor.WriteJSON(w, http.StatusOK, s.a2aCardOf(v, def))
}

// --- The HTTP+JSON binding ---

// restErrorBody is the google.rpc.Status of an HTTP+JSON error, sent with
// the problem document's members (docs/a2a.md).
type restErrorBody struct {
	problem.Document
	Error restStatus `json:"error"`
}

type restStatus struct {
	Code    int              `json:"code"`
	Status  string           `json:"status"`
	Message string           `json:"message"`
	Details []map[string]any `json:"details,omitempty"`
}

// a2aErr is how a problem reads on the A2A bindings: the ErrorInfo reason
// of an A2A error ("" for others), the JSON-RPC code, the gRPC status name.
type a2aErr struct {
	reason string
	rpc    int
	grpc   string
}

var a2aErrs = map[problem.Code]a2aErr{
	problem.NotFound:                   {"TASK_NOT_FOUND", -32001, "NOT_FOUND"},
	problem.AgentVersionNotFound:       {"TASK_NOT_FOUND", -32001, "NOT_FOUND"},
	problem.A2ATaskNotCancelable:       {"TASK_NOT_CANCELABLE", -32002, "FAILED_PRECONDITION"},
	problem.A2APushNotSupported:        {"PUSH_NOTIFICATION_NOT_SUPPORTED", -32003, "FAILED_PRECONDITION"},
	problem.A2AUnsupportedOperation:    {"UNSUPPORTED_OPERATION", -32004, "FAILED_PRECONDITION"},
	problem.A2AContentTypeNotSupported: {"CONTENT_TYPE_NOT_SUPPORTED", -32005, "INVALID_ARGUMENT"},
	problem.A2AVersionNotSupported:     {"VERSION_NOT_SUPPORTED", -32009, "FAILED_PRECONDITION"},
	problem.MalformedRequest:           {"", -32602, "INVALID_ARGUMENT"},
	problem.ValidationFailed:           {"", -32602, "INVALID_ARGUMENT"},
	problem.URLNotAllowed:              {"", -32602, "INVALID_ARGUMENT"},
	problem.PayloadTooLarge:            {"", -32602, "INVALID_ARGUMENT"},
	problem.IdempotencyKeyReused:       {"", -32602, "INVALID_ARGUMENT"},
	problem.UnsupportedMediaType:       {"", -32602, "INVALID_ARGUMENT"},
	problem.Unauthenticated:            {"", -32600, "UNAUTHENTICATED"},
	problem.InsufficientScope:          {"", -32600, "PERMISSION_DENIED"},
	problem.RateLimited:                {"", -32600, "RESOURCE_EXHAUSTED"},
}

// a2aErrOf is the A2A reading of a problem.
func a2aErrOf(pe *problem.Error) a2aErr {
	if e, ok := a2aErrs[pe.Code]; ok {
		return e
	}
	if problem.Status(pe.Code) >= 500 {
		return a2aErr{"", -32603, "INTERNAL"}
	}
	return a2aErr{"", -32600, "FAILED_PRECONDITION"}
}

// adaptA2A answers an HTTP+JSON handler's error with a problem document
// that is also the binding's google.rpc.Status.
func (s *Server) adaptA2A(h frontdoor.HandlerFunc) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		err := h(w, r)
		if err == nil {
			return nil
		}
		if sw, ok := w.(interface{ Started() bool }); ok && sw.Started() {
			return err
		}
		pe := problem.As(err)
		info := frontdoor.InfoFrom(r.Context())
		info.Problem = pe
		doc := pe.Doc(r.URL.Path, info.RequestID, info.TraceID)
		ae := a2aErrOf(pe)
		st := restStatus{Code: doc.Status, Status: ae.grpc, Message: doc.Title + ": " + doc.Detail}
		if ae.reason != "" {
			st.Details = []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": ae.reason, "domain": "a2a-protocol.org"}}
		}
		if pe.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(frontdoor.CeilSeconds(pe.RetryAfter.Seconds())))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Cache-Control", "no-store")
		b, _ := frontdoor.Marshal(restErrorBody{Document: doc, Error: st})
		w.WriteHeader(doc.Status)
		_, _ = w.Write(b)
		return nil
	}
}

// restCall is the call of an HTTP+JSON request, its agent checked.
func (s *Server) restCall(w http.ResponseWriter, r *http.Request) (*a2aCall, error) {
	v, err := s.a2aAgent(r)
	if err != nil {
		return nil, err
	}
	return &a2aCall{s: s, w: w, r: r, agent: v.Name, event: func(v any) any { return v }}, nil
}

func (s *Server) handleA2ASend(stream bool) frontdoor.HandlerFunc {
	return s.adaptA2A(func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.restCall(w, r)
		if err != nil {
			return err
		}
		var req a2aSendRequest
		if err := frontdoor.DecodeJSON(r, &req); err != nil {
			return err
		}
		if stream {
			return c.sendStreamingMessage(req)
		}
		res, err := c.sendMessage(req)
		if err != nil {
			return err
		}
		return frontdoor.WriteJSON(w, http.StatusOK, res)
	})
}

// taskVerb splits the {task} segment "id:verb".
func taskVerb(seg string) (id, verb string) {
	id, verb, _ = strings.Cut(seg, ":")
	return id, verb
}

// handleA2ATask serves tasks/{id} (GetTask), tasks/{id}:cancel (CancelTask,
// POST) and tasks/{id}:subscribe (SubscribeToTask, POST or GET).
func (s *Server) handleA2ATask(w http.ResponseWriter, r *http.Request) error {
	c, err := s.restCall(w, r)
	if err != nil {
		return err
	}
	id, verb := taskVerb(r.PathValue("task"))
	var res any
	switch {
	case verb == "subscribe":
		return c.subscribe(id)
	case verb == "" && r.Method == http.MethodGet:
		res, err = c.getTask(id)
	case verb == "cancel" && r.Method == http.MethodPost:
		res, err = c.cancelTask(id)
	default:
		return problem.New(problem.NotFound, "no task method %q for %s: GET tasks/{id}, POST tasks/{id}:cancel, tasks/{id}:subscribe", verb, r.Method)
	}
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, res)
}

func (s *Server) handleA2AListTasks(w http.ResponseWriter, r *http.Request) error {
	c, err := s.restCall(w, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	req := a2aListRequest{ContextID: q.Get("contextId"), Status: q.Get("status"), PageToken: q.Get("pageToken"),
		StatusTimestampAfter: q.Get("statusTimestampAfter")}
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return problem.Field("pageSize", "must be an integer")
		}
		n32 := int32(n)
		req.PageSize = &n32
	}
	if v := q.Get("includeArtifacts"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return problem.Field("includeArtifacts", "must be true or false")
		}
		req.IncludeArtifacts = &b
	}
	res, err := c.listTasks(req)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, res)
}

// handleA2AUnsupported answers an operation this agent does not offer
// (the extended card) with err, once the agent is known.
func (s *Server) handleA2AUnsupported(err error) frontdoor.HandlerFunc {
	return s.adaptA2A(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := s.a2aAgent(r); err != nil {
			return err
		}
		return err
	})
}

// --- The JSON-RPC binding ---

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// errRPC is a JSON-RPC error of its own code (parse error, invalid
// request, method not found, invalid params).
type errRPC struct {
	code int
	msg  string
}

func (e *errRPC) Error() string { return e.msg }

// noAgent is the error of a JSON-RPC request to an agent that does not
// exist: a 404 problem, as for any path that leads nowhere.
type noAgent struct{ err error }

func (e *noAgent) Error() string { return e.err.Error() }

// handleA2ARPC serves the JSON-RPC binding: every answer, error or not, is
// a JSON-RPC response (200), but for an agent that does not exist (404).
func (s *Server) handleA2ARPC(w http.ResponseWriter, r *http.Request) error {
	req := rpcRequest{ID: json.RawMessage("null")}
	err := s.serveRPC(w, r, &req)
	if err == nil {
		return nil
	}
	var na *noAgent
	if errors.As(err, &na) {
		return na.err
	}
	if sw, ok := w.(interface{ Started() bool }); ok && sw.Started() {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: req.ID, Error: s.rpcErrorOf(r, err)})
}

// rpcErrorOf is the JSON-RPC error of err, with its problem document as data.
func (s *Server) rpcErrorOf(r *http.Request, err error) *rpcError {
	var re *errRPC
	if errors.As(err, &re) {
		return &rpcError{Code: re.code, Message: re.msg}
	}
	pe := problem.As(err)
	info := frontdoor.InfoFrom(r.Context())
	info.Problem = pe
	doc := pe.Doc(r.URL.Path, info.RequestID, info.TraceID)
	return &rpcError{Code: a2aErrOf(pe).rpc, Message: doc.Title + ": " + doc.Detail, Data: doc}
}

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, req *rpcRequest) error {
	var raw json.RawMessage
	if err := frontdoor.DecodeJSON(r, &raw); problem.Is(err, problem.MalformedRequest) {
		return &errRPC{-32700, "Parse error: " + problem.As(err).Detail}
	} else if err != nil {
		return err
	}
	var msg rpcRequest
	if err := json.Unmarshal(raw, &msg); err != nil {
		return &errRPC{-32600, "Invalid Request: a JSON-RPC request is an object with jsonrpc, id, method and params"}
	}
	if validRPCID(msg.ID) {
		req.ID = msg.ID
	}
	switch {
	case msg.JSONRPC != "2.0":
		return &errRPC{-32600, `Invalid Request: jsonrpc must be "2.0"`}
	case !validRPCID(msg.ID):
		return &errRPC{-32600, "Invalid Request: id must be a string or a number"}
	case msg.Method == "":
		return &errRPC{-32600, "Invalid Request: method is required"}
	}
	info := frontdoor.InfoFrom(r.Context())
	if len(msg.Method) <= 64 {
		info.Details = map[string]any{"a2a_method": msg.Method}
	}
	v, err := s.a2aAgent(r)
	if problem.Is(err, problem.NotFound) || problem.Is(err, problem.AgentVersionNotFound) {
		return &noAgent{err}
	}
	if err != nil {
		return err
	}
	c := &a2aCall{s: s, w: w, r: r, agent: v.Name, event: func(v any) any {
		return rpcResponse{JSONRPC: "2.0", ID: msg.ID, Result: v}
	}}
	var res any
	switch msg.Method {
	case "SendMessage", "SendStreamingMessage":
		var p a2aSendRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		if msg.Method == "SendStreamingMessage" {
			return c.sendStreamingMessage(p)
		}
		res, err = c.sendMessage(p)
	case "GetTask", "CancelTask", "SubscribeToTask":
		var p a2aTaskRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		switch msg.Method {
		case "GetTask":
			res, err = c.getTask(p.ID)
		case "CancelTask":
			res, err = c.cancelTask(p.ID)
		default:
			return c.subscribe(p.ID)
		}
	case "ListTasks":
		var p a2aListRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		res, err = c.listTasks(p)
	case "CreateTaskPushNotificationConfig":
		var p a2aPushConfig
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		res, err = c.createPushConfig(p)
	case "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		var p a2aPushRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		switch msg.Method {
		case "GetTaskPushNotificationConfig":
			res, err = c.getPushConfig(p)
		case "DeleteTaskPushNotificationConfig":
			res, err = c.deletePushConfig(p)
		default:
			res, err = c.listPushConfigs(p)
		}
	case "GetExtendedAgentCard":
		return errNoExtendedCard
	default:
		m := msg.Method
		if len(m) > 64 {
			m = m[:64] + "…"
		}
		return &errRPC{-32601, fmt.Sprintf("Method not found: %q is not an A2A 1.0 method", m)}
	}
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: msg.ID, Result: res})
}

// validRPCID reports whether id is a JSON-RPC request id: a string or a number.
func validRPCID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// rpcParams decodes a method's params, which must be an object with no
// unknown members.
func rpcParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if raw[0] != '{' {
		return &errRPC{-32602, "Invalid params: params must be an object"}
	}
	if err := jsonbody.Decode(raw, v); err != nil {
		return &errRPC{-32602, "Invalid params: " + problem.As(err).Detail}
	}
	return nil
}

var errNoExtendedCard = problem.New(problem.A2AUnsupportedOperation, "this agent has no extended card (capabilities.extendedAgentCard is false)")
