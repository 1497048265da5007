package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// maxGoal is the longest goal of an invocation, in characters.
const maxGoal = 8000

// StartRequest is one invocation.
type StartRequest struct {
	Tenant string
	Agent  string
	// Version is "" for the agent's default version.
	Version string
	// Goal is required: 1 to 8000 characters.
	Goal    string
	Context map[string]any
	Caller  Caller
	// MaxToolCalls bounds the workflow's tool calls, from 1 to the runner's
	// MaxToolCalls; nil for the runner's DefaultToolCalls.
	MaxToolCalls *int
	// MaxLLMTokens bounds the tokens of the workflow's completions, from 1
	// to MaxLLMTokens; nil for the definition's limits.max_llm_tokens.
	MaxLLMTokens *int64
	// OnExhausted is agent.OnExhaustedFail or agent.OnExhaustedAsk; "" for
	// the version's limits.on_exhausted.
	OnExhausted string
	RequestID   string
	TraceID     string
	ReplayOf    string
	// Faults, for a real replay (with ReplayOf), answer the calls they
	// apply to instead of the tools (see package fault); the replay
	// service has checked them.
	Faults []fault.Fault
	// ID, when set, is the new workflow's id (a wf_ id no workflow has):
	// a real replay stores it with the replay before the workflow starts.
	ID string
	// ScheduleID and DueAt, when set, name the schedule and due time the
	// workflow is started for (Workflow.ScheduleID, ScheduledFor).
	ScheduleID string
	DueAt      time.Time
	// Created, when set, builds an audit record written in the
	// transaction that stores the workflow (a schedule's run).
	Created func(wf *Workflow) *audit.Record
	// IdempotencyKey, when set, is stored with the workflow, unique in its
	// tenant (see Workflow.IdempotencyKey): Start then fails with
	// ErrKeyTaken if another workflow has it. RequestHash identifies the
	// request that carried it.
	IdempotencyKey string
	RequestHash    string

	// arm is the rollout arm the runner chose (Runner.version).
	arm *RolloutArm
}

// Start validates an invocation and executes its workflow in the
// background, returning once the workflow is stored (the execution begins
// meanwhile); the caller's context does not bound the execution.
func (r *Runner) Start(ctx context.Context, req StartRequest) (*Workflow, error) {
	maxCalls, err := r.check(req)
	if err != nil {
		return nil, err
	}
	if r.opts.Catalog != nil {
		ctx = r.opts.Catalog.At(ctx, req.Tenant)
	}
	v, err := r.version(ctx, &req)
	if err != nil {
		return nil, err
	}
	if v.External != nil {
		return r.startExternal(ctx, req, v, maxCalls)
	}
	prog, tools, err := r.program(ctx, v)
	if err != nil {
		return nil, err
	}
	if errs := prog.ValidateContext(req.Context); len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	wf, err := r.newWorkflow(v, req, maxCalls)
	if err != nil {
		return nil, err
	}
	wf.ToolRevisions = toolRevisions(tools)
	// It calls the tools just looked up rather than reading them again.
	return r.store(ctx, req, wf, func(c *creation) error {
		return r.launch(trace.SpanContextFromContext(ctx), wf, prog, history{tools: tools, created: c})
	})
}

// version is the live version an invocation runs and, while a rollout of
// its agent is active and it asks for the default version, the rollout's
// arm it runs. The arm is chosen once, before the workflow is stored, from
// the store's rollout and the request alone: whichever replica starts it
// chooses the same. A target that cannot run (archived since) runs the
// default instead.
func (r *Runner) version(ctx context.Context, req *StartRequest) (*agent.Version, error) {
	if r.opts.Arms != nil && req.Version == "" && req.ReplayOf == "" {
		if req.ID == "" {
			req.ID = ids.NewAt(ids.Workflow, r.opts.Now().UTC())
		}
		target, arm, err := r.opts.Arms.Choose(ctx, *req, req.ID)
		if err != nil {
			return nil, err
		}
		req.arm = arm
		if target != "" {
			v, err := r.opts.Versions.AgentVersion(ctx, req.Tenant, req.Agent, target)
			if err == nil && v.CheckLive() == nil {
				return v, nil
			}
			req.arm = &RolloutArm{ID: arm.ID, Arm: ArmDefault}
		}
	}
	v, err := r.opts.Versions.AgentVersion(ctx, req.Tenant, req.Agent, req.Version)
	if err != nil {
		return nil, err
	}
	if err := v.CheckLive(); err != nil {
		return nil, err
	}
	return v, nil
}

// store stores a new workflow while its execution, launched by launch with
// the storing under way, begins; it returns the workflow as started.
func (r *Runner) store(ctx context.Context, req StartRequest, wf *Workflow, launch func(c *creation) error) (*Workflow, error) {
	// Refused before it is stored when the runner is closing: stored, it
	// would be resumed by the next start while the caller, told 503, may
	// start it again.
	r.mu.Lock()
	closing := r.closing
	r.mu.Unlock()
	if closing {
		return nil, problem.New(problem.Unavailable, "%v", errShutdown)
	}
	started, stored := *wf, *wf // the execution goes on changing wf
	r.mu.Lock()
	r.creating[wf.ID] = true
	r.mu.Unlock()
	// The execution begins while the workflow is stored: its reads go out
	// meanwhile, and its first write waits for the workflow's (see journal).
	c := &creation{done: make(chan struct{})}
	if err := launch(c); err != nil {
		r.mu.Lock()
		delete(r.creating, wf.ID)
		r.mu.Unlock()
		return nil, problem.New(problem.Unavailable, "%v", err)
	}
	var created *audit.Record
	if req.Created != nil {
		created = req.Created(&stored)
	}
	// Its execution has begun (its reads may be out): the caller's going
	// away must not undo its storing, or a retry with its key would find
	// nothing and start another.
	c.err = r.opts.Store.CreateWorkflow(context.WithoutCancel(ctx), &stored, created)
	close(c.done)
	r.mu.Lock()
	delete(r.creating, wf.ID)
	r.mu.Unlock()
	if c.err != nil {
		r.stop(wf.ID, errNotCreated)
		return nil, c.err
	}
	return &started, nil
}

// creation is the storing of a new workflow, made by Start while the
// workflow's execution begins.
type creation struct {
	done chan struct{}
	err  error // valid once done is closed
}

// wait returns once the workflow is stored, or errNotCreated if it was not.
func (c *creation) wait() error {
	<-c.done
	if c.err != nil {
		return fmt.Errorf("%w: %w", errNotCreated, c.err)
	}
	return nil
}

// check validates an invocation's goal, max_tool_calls and max_llm_tokens before anything
// is looked up, and returns its bound on tool calls.
func (r *Runner) check(req StartRequest) (int, error) {
	var errs []problem.FieldError
	if n := utf8.RuneCountInString(req.Goal); n < 1 || n > maxGoal {
		errs = append(errs, problem.FieldError{Field: "goal", Message: fmt.Sprintf("is required: 1 to %d characters", maxGoal)})
	}
	maxCalls := r.opts.DefaultToolCalls
	if req.MaxToolCalls != nil {
		maxCalls = *req.MaxToolCalls
		if maxCalls < 1 || maxCalls > r.opts.MaxToolCalls {
			errs = append(errs, problem.FieldError{Field: "max_tool_calls", Message: fmt.Sprintf("must be from 1 to %d", r.opts.MaxToolCalls)})
		}
	}
	if n := req.MaxLLMTokens; n != nil && (*n < 1 || *n > agent.MaxLLMTokensLimit) {
		errs = append(errs, problem.FieldError{Field: "max_llm_tokens", Message: fmt.Sprintf(
			"must be from 1 to %d; leave it out for the agent's limits.max_llm_tokens", agent.MaxLLMTokensLimit)})
	}
	switch req.OnExhausted {
	case "", agent.OnExhaustedFail, agent.OnExhaustedAsk:
	default:
		errs = append(errs, problem.FieldError{Field: "on_exhausted", Message: fmt.Sprintf(
			"must be %q (a spent budget ends the run limit_exceeded) or %q (it waits for a person's approval of more); leave it out for the agent's limits.on_exhausted",
			agent.OnExhaustedFail, agent.OnExhaustedAsk)})
	}
	if len(errs) > 0 {
		return 0, problem.Validation(errs...)
	}
	return maxCalls, nil
}

func (r *Runner) newWorkflow(v *agent.Version, req StartRequest, maxCalls int) (*Workflow, error) {
	ctxJSON, err := json.Marshal(req.Context)
	if err != nil {
		return nil, problem.Wrap(problem.ValidationFailed, err, "context is not JSON")
	}
	if req.Context == nil {
		ctxJSON = []byte("{}")
	}
	// At the stores' precision, so the workflow the execution holds is the
	// one stored.
	now := r.opts.Now().UTC().Truncate(time.Microsecond)
	var maxTokens int64
	if req.MaxLLMTokens != nil {
		maxTokens = *req.MaxLLMTokens
	}
	id := req.ID
	if id == "" {
		id = ids.NewAt(ids.Workflow, now)
	}
	return &Workflow{
		ID: id, Tenant: req.Tenant, Agent: v.Name, AgentVersion: v.Version,
		Status: Running, Goal: req.Goal, Context: ctxJSON, Caller: req.Caller,
		MaxToolCalls: maxCalls, MaxLLMTokens: maxTokens, OnExhausted: req.OnExhausted, ReplayOf: req.ReplayOf, Faults: req.Faults, RequestID: req.RequestID, TraceID: req.TraceID,
		StartedAt: now, Deadline: now.Add(r.opts.Timeout),
		Owner: r.opts.Owner, LeaseUntil: now.Add(r.opts.Lease),
		ScheduleID: req.ScheduleID, ScheduledFor: req.DueAt,
		IdempotencyKey: req.IdempotencyKey, RequestHash: req.RequestHash, Rollout: req.arm,
	}, nil
}

// toolRevisions is the revision of each tool by name, nil when there are
// none: what a resume compiles the workflow's program against again.
func toolRevisions(tools []*tool.Tool) map[string]int {
	var revs map[string]int
	for _, t := range tools {
		if t == nil {
			continue
		}
		if revs == nil {
			revs = make(map[string]int, len(tools))
		}
		revs[t.Name] = t.Revision
	}
	return revs
}
