package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// checkVersion refuses a request for a protocol version other than 1.0
// (header or query parameter A2A-Version; none means 1.0: this server
// speaks no other).
func checkVersion(r *http.Request) error {
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
	return VersionNotSupported.New("A2A-Version %q is not supported: this agent speaks A2A %s", v, wire.Version)
}

// agent is the default version of the agent the request names, after
// checking the protocol version.
func (s *Server) agent(r *http.Request) (*agent.Version, error) {
	name := r.PathValue("agent")
	info := frontdoor.InfoFrom(r.Context())
	info.ResourceID = name
	if err := checkVersion(r); err != nil {
		return nil, err
	}
	return s.d.Agents.AgentVersion(r.Context(), frontdoor.Principal(r).Tenant, name, "")
}

// input is what a message asks of the agent.
type input struct {
	Goal    string
	Context map[string]any
}

// messageInput is the goal and context of a message: its text parts,
// joined by blank lines, and its one data part, which must be an object.
func messageInput(m *wire.Message) (input, error) {
	var req input
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
			// Decoded as an invoke's body is: its numbers are json.Numbers,
			// so an integer past 2^53 reaches the workflow with every digit.
			if err := jsonbody.Decode(p.Data, &req.Context); err != nil || req.Context == nil {
				return req, problem.Field(field+".data", "must be a JSON object: it is the agent's context")
			}
		case p.Raw != nil, p.URL != nil:
			return req, ContentTypeNotSupported.New("%s is a file part: this agent takes text parts (the goal) and one data part (the context)", field)
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

// fingerprint identifies a message sent to the task taskID ("" for a new
// one) by its goal and context, as workflow.Fingerprint identifies an
// invoke's body: every digit of an integer past 2^53 counts, and a context
// of ordinary numbers has the fingerprint it had when they were decoded
// as float64s, so a retry sent across an upgrade finds its task.
func (in input) fingerprint(taskID string) string {
	canon, _ := json.Marshal(map[string]any{"goal": in.Goal, "context": in.Context, "taskId": taskID})
	return workflow.Fingerprint(canon)
}

// send starts the task of a message, or finds the one a message with the
// same id started (the message id is the idempotency key, as in invoke).
// stream reserves a stream before anything starts; release frees it.
func (c *call) send(req wire.SendMessageRequest, stream bool) (wf *workflow.Workflow, release func(), err error) {
	release = func() {}
	m := req.Message
	switch {
	case m == nil:
		return nil, release, problem.Field("message", "is required")
	case m.MessageID == "":
		return nil, release, problem.Field("message.messageId", "is required: it is the message's idempotency key")
	case len(m.MessageID) > maxMessageID:
		return nil, release, problem.Field("message.messageId", "must be at most %d characters", maxMessageID)
	case m.Role != "" && m.Role != wire.RoleUser:
		return nil, release, problem.Field("message.role", "must be ROLE_USER")
	case req.Configuration != nil && len(req.Configuration.PushConfig) > 0 && string(req.Configuration.PushConfig) != "null":
		return nil, release, UnsupportedOperation.New("configuration.taskPushNotificationConfig is not taken: create the task's config with CreateTaskPushNotificationConfig once SendMessage (with returnImmediately) has answered its id")
	}
	in, err := messageInput(m)
	if err != nil {
		return nil, release, err
	}
	r := c.r
	p := frontdoor.Principal(r)
	hash := in.fingerprint(m.TaskID)
	key := workflow.IdempotencyKey(p.ID(), "/a2a/"+c.agent, m.MessageID)
	if stream {
		// Counted before anything starts, a repeat's stream too, as invoke's.
		if release, err = c.s.d.Stream(p.Tenant); err != nil {
			return nil, func() {}, err
		}
	}
	fail := func(err error) (*workflow.Workflow, func(), error) {
		release()
		return nil, func() {}, err
	}
	if wf, err = c.s.d.Invoker.Find(r.Context(), p.Tenant, key, hash, c.s.d.IdempotencyTTL); err != nil {
		return fail(messageReused(err))
	}
	info := frontdoor.InfoFrom(r.Context())
	if wf != nil {
		info.Details = map[string]any{"idempotent_replayed": true}
	} else {
		if m.TaskID != "" {
			return fail(c.continueTask(m.TaskID))
		}
		started, err := c.s.d.Invoker.Start(r.Context(), workflow.Invocation{StartRequest: workflow.StartRequest{
			Agent: c.agent, Goal: in.Goal, Context: in.Context, Caller: callerOf(p),
			RequestID: info.RequestID, TraceID: info.TraceID, IdempotencyKey: key, RequestHash: hash,
		}})
		if err != nil {
			return fail(messageReused(err))
		}
		wf = started.Workflow
	}
	info.WorkflowID = wf.ID
	c.w.Header().Set("Workflow-Id", wf.ID)
	return wf, release, nil
}

// callerOf is the principal as the caller of the workflows it starts.
func callerOf(p auth.Principal) workflow.Caller {
	return workflow.Caller{Sub: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes}
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
func (c *call) continueTask(id string) error {
	wf, err := c.task(id)
	if err != nil {
		return err
	}
	if wf.Done() {
		return UnsupportedOperation.New("task %s has ended (%s): send a new message without taskId", id, stateOf(wf))
	}
	return UnsupportedOperation.New("task %s takes no further messages: an approver decides its approval through POST /v1/workflows/%s/approvals/{step}", id, id)
}

// for a decision, or at once with returnImmediately.
func (c *call) sendMessage(req wire.SendMessageRequest) (any, error) {
	wf, _, err := c.send(req, false)
	if err != nil {
		return nil, err
	}
	if req.Configuration == nil || !req.Configuration.ReturnImmediately {
		if wf, _, err = c.s.d.Runner.Finished(c.r.Context(), wf.Tenant, wf.ID); err != nil {
			return nil, err
		}
	}
	t, err := c.s.readTask(c.r.Context(), wf)
	if err != nil {
		return nil, err
	}
	return map[string]any{"task": t}, nil
}
