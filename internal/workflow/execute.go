package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/gowebpki/jcs"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

var tracer = otel.Tracer("github.com/agentplane/agentplane/internal/workflow")

// history is what a workflow recorded before the current execution.
type history struct {
	steps []Step
	// intents are the steps whose unrepeatable call may have been sent.
	intents     map[int]bool
	completions map[int]json.RawMessage
	// approvals are the workflow's approvals by the step that asked.
	approvals map[int]*Approval
	// tools, when known, are the tools the program was compiled with.
	tools []*tool.Tool
}

// ErrInterrupted ends a resumed workflow whose unrepeatable call may have
// reached its tool before the server stopped.
var ErrInterrupted = errors.New("interrupted")

// interruptedError is ErrInterrupted naming the call.
type interruptedError struct {
	tool, operation string
	step            int
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("%v: the server stopped while %s.%s (step %d) was in flight, and repeating it is not safe",
		ErrInterrupted, e.tool, e.operation, e.step)
}

func (e *interruptedError) Unwrap() error { return ErrInterrupted }

// execute runs a workflow to its end, storing each new step (with its audit
// records) before anyone can see it. Steps already in the history are
// produced again by the deterministic program from their recorded answers
// and are not stored twice.
func (r *Runner) execute(ctx context.Context, wf *Workflow, prog *agent.Program, h history) {
	ctx, cancel := context.WithDeadline(ctx, wf.Deadline)
	defer cancel()
	ctx, span := tracer.Start(ctx, "workflow "+wf.Agent, trace.WithAttributes(
		attribute.String("agentplane.workflow_id", wf.ID),
		attribute.String("agentplane.agent", wf.Agent+"@"+wf.AgentVersion),
		attribute.Int("agentplane.resumed_after_step", len(h.steps)),
	))
	defer span.End()
	store := context.WithoutCancel(ctx)
	j := &journal{r: r, wf: wf, ctx: store, steps: slices.Clip(h.steps)}
	rec := &recorder{r: r, wf: wf, h: h, j: j, calls: map[int]*callRecord{}, tools: map[string]*tool.Tool{}, last: r.opts.Now()}
	for _, t := range h.tools {
		if t != nil {
			rec.tools[t.Name] = t
		}
	}
	run := prog.Run(ctx, wf.Input(), agent.NewEnv(rec, rec, rec))

	var runErr error
	for ev, err := range run.Events() {
		if err != nil {
			runErr = err
			break
		}
		if ev.Step <= len(h.steps) {
			continue
		}
		span.AddEvent("step", trace.WithAttributes(attribute.Int("step", ev.Step),
			attribute.String("action", ev.Action), attribute.String("status", ev.Status)))
		if err := j.add(rec.step(ev)); err != nil {
			break
		}
	}
	cause := context.Cause(ctx)
	switch {
	case j.err != nil:
		return // logged; the workflow is resumed from what was stored
	case errors.Is(cause, errShutdown):
		if j.flush() == nil {
			if err := r.opts.Store.ReleaseLease(store, r.opts.Owner, wf.ID); err != nil {
				r.opts.Logger.Warn("release workflow lease", "workflow_id", wf.ID, "err", err)
			}
		}
		return
	case errors.Is(cause, errLeaseLost):
		return
	}
	if res := run.Result(); res.Status == agent.WorkflowWaiting && runErr == nil && rec.asked != nil {
		r.suspend(store, wf, j.steps, j.pending, rec.asked)
		return
	}
	r.finish(store, wf, j.steps, j.pending, run.Result(), runErr)
}

// stepWrite is a step with its audit records.
type stepWrite struct {
	step *Step
	recs []*audit.Record
}

// journal stores an execution's steps. It holds the newest step until the
// execution next acts on the world (a tool or planner call) or ends, then
// stores it, alone or in the same transaction as the end: every step is
// stored before anything that could depend on it happens, and a workflow's
// last step and its end cost one commit. A step is visible (to followers,
// who read the store) only once stored.
type journal struct {
	r       *Runner
	wf      *Workflow
	ctx     context.Context // the store's: not cancelled with the execution
	pending *stepWrite
	steps   []Step // stored, the history's included
	err     error  // the first failure to store; the execution stops
}

// add stores the held step, if any, and holds s.
func (j *journal) add(s *Step, recs []*audit.Record) error {
	if err := j.flush(); err != nil {
		return err
	}
	j.pending = &stepWrite{step: s, recs: recs}
	return nil
}

// flush stores the held step.
func (j *journal) flush() error {
	if j.err != nil || j.pending == nil {
		return j.err
	}
	p := j.pending
	j.pending = nil
	if err := j.r.opts.Store.AppendStep(j.ctx, j.r.opts.Owner, p.step, p.recs...); err != nil {
		return j.fail(fmt.Errorf("store step %d: %w", p.step.Step, err))
	}
	j.steps = append(j.steps, *p.step)
	j.r.hub.notify(j.wf.ID)
	return nil
}

// fail stops the execution on a failure to store, leaving the workflow to
// be resumed from what was stored; it returns err.
func (j *journal) fail(err error) error {
	j.r.opts.Logger.Error("workflow write failed; leaving the workflow to be resumed", "workflow_id", j.wf.ID, "err", err)
	j.err = err
	return err
}

// finish stores how the workflow ended, after its last step when one is
// held, and wakes its followers; steps are those stored before.
func (r *Runner) finish(ctx context.Context, wf *Workflow, steps []Step, last *stepWrite, res agent.Result, runErr error) {
	wf.Status, wf.Outcome = res.Status, res.Outcome
	wf.FinishedAt = r.opts.Now().UTC()
	if res.Output != nil {
		if b, err := json.Marshal(res.Output); err == nil {
			wf.Output = b
		}
	}
	if wf.Status == Failed {
		var interrupted *interruptedError
		detail := res.Error
		switch {
		case res.Outcome == OutcomeTimedOut:
			detail = "the workflow ran past its time limit"
		case errors.As(runErr, &interrupted):
			detail = interrupted.Error()
		}
		wf.Error = FailureDocument(wf.ID, detail)
	}
	rec := r.auditRecord(wf, "workflow.finish", outcomeOf(wf.Status), map[string]any{"status": wf.Status, "outcome": wf.Outcome})
	var lastStep *Step
	var lastRecs []*audit.Record
	if last != nil {
		lastStep, lastRecs = last.step, last.recs
	}
	recs := []*audit.Record{rec}
	r.mu.Lock()
	offered := r.records[wf.ID]
	delete(r.records, wf.ID)
	r.mu.Unlock()
	if req := offered.claim(wf.ID); req != nil {
		recs = append(recs, req)
	}
	err := r.opts.Store.FinishWorkflow(ctx, r.opts.Owner, wf, recs, lastStep, lastRecs...)
	if len(recs) > 1 {
		offered.settle(err == nil)
	}
	if err != nil {
		r.opts.Logger.Error("workflow end not stored; leaving the workflow to be resumed", "workflow_id", wf.ID, "err", err)
		return
	}
	if last != nil {
		steps = append(steps, *last.step)
	}
	// No longer running here before its end is handed over: a waiter that
	// subscribes too late for the hand-over reads the stored end instead.
	r.mu.Lock()
	delete(r.running, wf.ID)
	r.mu.Unlock()
	done := *wf
	r.hub.finish(wf.ID, &ending{wf: &done, steps: steps})
}

// FailureDocument is the problem document of a failed workflow.
func FailureDocument(workflowID, detail string) json.RawMessage {
	if detail == "" {
		detail = "the workflow failed"
	}
	doc := (&problem.Error{Code: problem.WorkflowFailed, Detail: detail}).Doc("/v1/workflows/"+workflowID, "", "")
	b, _ := json.Marshal(doc)
	return b
}

func outcomeOf(status string) string {
	if status == Failed {
		return audit.Error
	}
	return audit.Success
}

func (r *Runner) auditRecord(wf *Workflow, action, outcome string, details map[string]any) *audit.Record {
	return &audit.Record{
		Time: r.opts.Now(), Tenant: wf.Tenant,
		Actor:    audit.Actor{Sub: wf.Caller.Sub, ClientID: wf.Caller.ClientID},
		Action:   action,
		Resource: audit.Resource{Type: "workflow", ID: wf.ID},
		Outcome:  outcome, RequestID: wf.RequestID, TraceID: wf.TraceID, WorkflowID: wf.ID,
		Details: audit.Details(details),
	}
}

// recorder is the Env of an execution: it serves recorded answers for steps
// in the history, makes real calls for new steps, and keeps what each call
// sent and received for the step record.
type recorder struct {
	r     *Runner
	wf    *Workflow
	h     history
	j     *journal
	calls map[int]*callRecord
	tools map[string]*tool.Tool
	last  time.Time
	// asked is the approval the execution paused at, if it did.
	asked *asked
}

// callRecord is what a real call sent and received.
type callRecord struct {
	res   tool.CallResult
	audit *audit.Record
}

// Call implements agent.ToolCaller.
func (e *recorder) Call(ctx context.Context, step int, c agent.ToolCall) (agent.CallResult, error) {
	if step <= len(e.h.steps) {
		s := &e.h.steps[step-1]
		if err := sameCall(step, s, c); err != nil {
			return agent.CallResult{}, err
		}
		return agent.CallResult{Status: s.Status, Result: s.Result, Err: s.Error}, nil
	}
	if e.h.intents[step] {
		return agent.CallResult{}, &interruptedError{tool: c.Tool, operation: c.Operation, step: step}
	}
	// The steps before this call are stored before it is made.
	if err := e.j.flush(); err != nil {
		return agent.CallResult{}, err
	}
	t, op, err := e.lookup(ctx, c.Tool, c.Operation)
	if err != nil {
		return agent.CallResult{Status: agent.StatusError, Err: err.Error()}, nil
	}
	if op.Kind == tool.Write && !t.IdempotencySupport {
		in := Intent{WorkflowID: e.wf.ID, Step: step, Tool: c.Tool, Operation: c.Operation, At: e.r.opts.Now()}
		if err := e.r.opts.Store.RecordIntent(ctx, e.r.opts.Owner, in); err != nil {
			// Stopped meanwhile: the cause of the stop decides the workflow's fate.
			if ctx.Err() != nil {
				return agent.CallResult{}, ctx.Err()
			}
			return agent.CallResult{}, e.j.fail(fmt.Errorf("record call intent: %w", err))
		}
	}
	req := tool.CallRequest{
		Tenant: e.wf.Tenant, Tool: t, Operation: op, Args: c.Args,
		IdempotencyKey: e.wf.ID + "." + strconv.Itoa(step),
		WorkflowID:     e.wf.ID, RequestID: e.wf.RequestID,
		Actor: audit.Actor{Sub: e.wf.Caller.Sub, ClientID: e.wf.Caller.ClientID},
	}
	ctx, span := tracer.Start(ctx, "tool.call "+c.Tool+"."+c.Operation, trace.WithAttributes(
		attribute.Int("agentplane.step", step), attribute.String("agentplane.operation_kind", op.Kind)))
	defer span.End()
	start := e.r.opts.Now()
	res, err := e.r.opts.Caller.Call(ctx, req)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	// A call that failed as the execution stopped may not have reached
	// the tool; one that succeeded did, and is recorded like any other.
	if err != nil && ctx.Err() != nil {
		return agent.CallResult{}, ctx.Err()
	}
	e.calls[step] = &callRecord{res: res, audit: tool.CallAuditRecord(ctx, req, res, err, start)}
	if err != nil {
		return agent.CallResult{Status: agent.StatusError, Result: res.Body, Err: callError(err)}, nil
	}
	return agent.CallResult{Status: agent.StatusOK, Result: res.Body}, nil
}

// ErrNondeterministic fails a resumed workflow whose program no longer
// makes the calls its history recorded: serving the recorded answer to a
// different call would be a silent wrong answer.
var ErrNondeterministic = errors.New("nondeterministic workflow")

// sameCall checks that a call made again on resume is the recorded one:
// tool, operation and RFC 8785 canonical arguments.
func sameCall(step int, s *Step, c agent.ToolCall) error {
	if s.Tool != c.Tool || s.Operation != c.Operation {
		return fmt.Errorf("%w: step %d recorded a call of %s.%s, the program now calls %s.%s",
			ErrNondeterministic, step, s.Tool, s.Operation, c.Tool, c.Operation)
	}
	now, err := agent.CanonicalArgs(c.Args)
	if err != nil {
		return err
	}
	recorded, err := CanonicalJSON(s.Args)
	if err != nil {
		return fmt.Errorf("step %d: recorded args: %w", step, err)
	}
	if !bytes.Equal(now, recorded) {
		return fmt.Errorf("%w: step %d recorded %s.%s with args %s, the program now sends %s",
			ErrNondeterministic, step, c.Tool, c.Operation, recorded, now)
	}
	return nil
}

// CanonicalJSON returns the RFC 8785 form of a recorded JSON value; empty
// is the empty object (a call without arguments).
func CanonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []byte("{}"), nil
	}
	return jcs.Transform(raw)
}

// callError describes a failed call for its step, naming each bad argument.
func callError(err error) string {
	var pe *problem.Error
	if !errors.As(err, &pe) || len(pe.Errors) < 2 {
		return err.Error()
	}
	fields := make([]string, len(pe.Errors))
	for i, fe := range pe.Errors {
		fields[i] = fe.Field + ": " + fe.Message
	}
	return err.Error() + ": " + strings.Join(fields, "; ")
}

func (e *recorder) lookup(ctx context.Context, toolName, opID string) (*tool.Tool, *tool.Operation, error) {
	t, ok := e.tools[toolName]
	if !ok {
		var err error
		if t, err = e.r.opts.Tools.ToolByName(ctx, e.wf.Tenant, toolName); err != nil {
			return nil, nil, fmt.Errorf("tool %s: %w", toolName, err)
		}
		e.tools[toolName] = t
	}
	if op := e.r.ops.get(t, opID); op != nil {
		return t, op, nil
	}
	op, err := e.r.opts.Tools.Operation(ctx, e.wf.Tenant, t.ID, opID)
	if problem.Is(err, problem.NotFound) {
		return nil, nil, fmt.Errorf("tool %s has no operation %s (was it re-registered?)", toolName, opID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("operation %s.%s: %w", toolName, opID, err)
	}
	e.r.ops.put(t, opID, op)
	return t, op, nil
}

// Complete implements agent.Completer: recorded completions are served
// again, new ones are asked of the planner and recorded before use.
func (e *recorder) Complete(ctx context.Context, n int, req agent.ChatRequest) (agent.ChatResponse, error) {
	hash, err := req.Hash()
	if err != nil {
		return agent.ChatResponse{}, err
	}
	if b, ok := e.h.completions[n]; ok {
		rc, err := agent.DecodeCompletion(b)
		if err != nil {
			return agent.ChatResponse{}, fmt.Errorf("completion %d: %w", n, err)
		}
		if rc.RequestSHA256 != "" && rc.RequestSHA256 != hash {
			return agent.ChatResponse{}, fmt.Errorf("%w: completion %d was recorded for another request", ErrNondeterministic, n)
		}
		return rc.Response, nil
	}
	if e.r.opts.Planner == nil {
		return agent.ChatResponse{}, agent.ErrNoPlanner
	}
	if err := e.j.flush(); err != nil {
		return agent.ChatResponse{}, err
	}
	resp, err := e.r.opts.Planner.Complete(ctx, n, req)
	if err != nil {
		return resp, err
	}
	b, err := json.Marshal(agent.RecordedCompletion{RequestSHA256: hash, Response: resp})
	if err != nil {
		return resp, fmt.Errorf("encode completion: %w", err)
	}
	if err := e.r.opts.Store.RecordCompletion(ctx, e.r.opts.Owner, e.wf.ID, n, b); err != nil {
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		return resp, e.j.fail(fmt.Errorf("record completion: %w", err))
	}
	return resp, nil
}

// step builds the stored step of an event and its audit records.
func (e *recorder) step(ev agent.Event) (*Step, []*audit.Record) {
	now := e.r.opts.Now()
	s := &Step{
		WorkflowID: e.wf.ID, Seq: ev.Step, Step: ev.Step, Action: ev.Action, Kind: ev.Kind, Status: ev.Status,
		Tool: ev.Tool, Operation: ev.Operation, Score: ev.Score, Queue: ev.Queue, Outcome: ev.Outcome,
		Result: ev.Result, Error: ev.Error, Reason: ev.Reason, StartedAt: e.last.UTC(), DurationMS: now.Sub(e.last).Milliseconds(),
	}
	e.last = now
	if ev.Args != nil {
		s.Args, _ = json.Marshal(ev.Args)
	}
	recs := []*audit.Record{e.r.auditRecord(e.wf, "workflow.step", stepOutcome(ev.Status),
		map[string]any{"step": ev.Step, "action": ev.Action, "status": ev.Status})}
	if c, ok := e.calls[ev.Step]; ok {
		s.Request, _ = json.Marshal(c.res.Request)
		s.HTTPStatus, s.Attempts, s.Sent = c.res.Status, c.res.Attempts, c.res.Attempts > 0
		s.StartedAt, s.DurationMS = c.audit.Time.UTC(), c.res.Duration.Milliseconds()
		recs = append(recs, c.audit)
		delete(e.calls, ev.Step)
	}
	return s, recs
}

func stepOutcome(status string) string {
	switch status {
	case agent.StatusDenied, agent.StatusLimitExceeded:
		return audit.Denied
	case agent.StatusError:
		return audit.Error
	}
	return audit.Success
}
