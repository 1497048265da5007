package workflow

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
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
	// pinned are the operations of the tools not at their current
	// revision (a resume's), by tool name.
	pinned map[string][]tool.Operation
	// created, for a new workflow, is its storing, still under way when
	// the execution begins.
	created *creation
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
	ctx, span := tracer.Start(ctx, "invoke_agent "+wf.Agent, trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", wf.Agent),
		attribute.String("gen_ai.agent.id", wf.Agent+"@"+wf.AgentVersion),
		attribute.String("gen_ai.conversation.id", wf.ID),
		attribute.String("agentplane.workflow_id", wf.ID),
		attribute.String("agentplane.agent", wf.Agent+"@"+wf.AgentVersion),
		attribute.Int("agentplane.resumed_after_step", len(h.steps)),
	))
	defer span.End()
	store := context.WithoutCancel(ctx)
	j := &journal{r: r, wf: wf, ctx: store, steps: slices.Clip(h.steps)}
	if h.created != nil {
		j.mu.Lock()
		j.inFlight(h.created.wait, nil)
		j.mu.Unlock()
	}
	defer j.wait()
	defer func() {
		if v := recover(); v != nil {
			r.crashed(store, wf, j, &panicError{value: v, stack: debug.Stack()})
		}
	}()
	rec := &recorder{r: r, wf: wf, h: h, j: j, calls: map[int]*callRecord{}, tools: map[string]*tool.Tool{}, last: r.opts.Now()}
	for _, t := range h.tools {
		if t != nil {
			rec.tools[t.Name] = t
		}
	}
	if err := rec.masking(ctx); err != nil {
		// Nothing is stored unmasked: the workflow waits for its key.
		_ = rec.pause(ctx, fmt.Errorf("redaction key: %w", err))
		if err := j.wait(); err == nil {
			if err := r.opts.Store.ReleaseLease(store, r.opts.Owner, wf.ID); err != nil {
				r.opts.Logger.Warn("release workflow lease", "workflow_id", wf.ID, "err", err)
			}
		}
		return
	}
	run := prog.Run(ctx, wf.Input(), agent.NewEnv(rec, rec, rec))

	var runErr error
	for ev, err := range run.Events() {
		if err != nil {
			runErr = err
			break
		}
		if ev.Step <= len(h.steps) {
			// Made again from its record: it must be the recorded step.
			if err := sameStep(&h.steps[ev.Step-1], ev); err != nil {
				runErr = err
				break
			}
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
	case errors.Is(cause, errShutdown), errors.Is(cause, errPaused):
		err := j.flush()
		if p := panicked(err); p != nil {
			r.crashed(store, wf, j, p)
		} else if err == nil {
			if err := r.opts.Store.ReleaseLease(store, r.opts.Owner, wf.ID); err != nil {
				r.opts.Logger.Warn("release workflow lease", "workflow_id", wf.ID, "err", err)
			}
		}
		return
	case errors.Is(cause, errLeaseLost), errors.Is(cause, errNotCreated):
		return
	}
	steps, last, err := j.take()
	if p := panicked(err); p != nil {
		r.crashed(store, wf, j, p)
		return
	}
	if err != nil {
		return // logged; the workflow is resumed from what was stored
	}
	if res := run.Result(); res.Status == agent.WorkflowWaiting && runErr == nil && rec.asked != nil {
		r.suspend(store, wf, steps, last, rec.asked)
		return
	}
	r.finish(store, wf, steps, last, rec.maskResult(run.Result()), runErr)
}

// journal stores an execution's steps, each as soon as it can without
// holding the execution up:
//
//   - The newest step is held until the execution next acts or ends, so a
//     workflow's last step and its end cost one commit.
//   - Before a read, the held step is released: written in the background
//     while the read is made. A step released while a write is in flight
//     waits for the execution's next release (or its end) to go with the
//     step released then, one commit for both, or is written on its own
//     once that write has been done for stepLinger. A read is safe to make
//     again, so it need not wait for the steps before it.
//   - Before a write or a planner request, every step is stored first.
//   - The steps not yet written at the end are stored with it.
//   - A new workflow's own storing, under way in Start as the execution
//     begins, is the first write in flight: every write waits for it.
//
// A step is visible (to followers, who read the store) only once stored,
// and it is stored before any write or planner request that follows it.
type journal struct {
	r   *Runner
	wf  *Workflow
	ctx context.Context // the store's: not cancelled with the execution
	// newest is the step held until the execution next acts or ends; only
	// the execution touches it.
	newest *StepWrite

	mu sync.Mutex
	// queued are released steps not yet being written, oldest first.
	queued []StepWrite
	// linger writes the queued steps once no write has been in flight for
	// stepLinger (lingerFor in tests); nil when not set.
	linger    *time.Timer
	lingerFor time.Duration
	// writing is closed when the write in flight ends; nil when none is.
	writing chan struct{}
	steps   []Step // stored, the history's included
	err     error  // the first failure to store; the execution stops
}

// add holds s, releasing the step held before it.
func (j *journal) add(s *Step, recs []*audit.Record) error {
	err := j.release()
	j.newest = &StepWrite{Step: s, Records: recs}
	return err
}

// release queues the held step to be written in the background; it
// returns the failure of an earlier write, if any.
func (j *journal) release() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.newest != nil && j.err == nil {
		j.queued = append(j.queued, *j.newest)
		if j.writing == nil {
			j.writeQueued()
		}
	}
	j.newest = nil
	return j.err
}

// writeQueued writes the queued steps in the background. j.mu is held.
func (j *journal) writeQueued() {
	j.stopLinger()
	batch := j.queued
	j.queued = nil
	j.inFlight(func() error {
		if err := j.r.opts.Store.AppendSteps(j.ctx, j.r.opts.Owner, batch...); err != nil {
			return fmt.Errorf("store steps %d to %d: %w", batch[0].Step.Step, batch[len(batch)-1].Step.Step, err)
		}
		return nil
	}, batch)
}

// inFlight runs write in the background as the write in flight, then
// writes what was queued meanwhile; steps are what write stores. j.mu is
// held.
func (j *journal) inFlight(write func() error, steps []StepWrite) {
	done := make(chan struct{})
	j.writing = done
	go func() {
		err := guard(write)
		if err == nil && len(steps) > 0 {
			j.r.hub.notify(j.wf.ID)
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		defer close(done)
		j.writing = nil
		if err != nil {
			j.failLocked(err)
			return
		}
		for _, sw := range steps {
			j.steps = append(j.steps, *sw.Step)
		}
		if len(j.queued) > 0 && j.linger == nil {
			j.linger = time.AfterFunc(cmp.Or(j.lingerFor, stepLinger), j.lingered)
		}
	}()
}

// stepLinger is how long steps released while a write was in flight wait,
// once it is done, for the execution's next release to be written with.
const stepLinger = time.Millisecond

// lingered writes the steps still queued once the linger has passed.
func (j *journal) lingered() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.linger = nil
	if j.writing == nil && len(j.queued) > 0 && j.err == nil {
		j.writeQueued()
	}
}

// stopLinger cancels the linger: the queued steps are being written or
// taken. j.mu is held.
func (j *journal) stopLinger() {
	if j.linger != nil {
		j.linger.Stop()
		j.linger = nil
	}
}

// wait returns once no write is in flight, with the first failure to store.
func (j *journal) wait() error {
	for {
		j.mu.Lock()
		w, err := j.writing, j.err
		j.mu.Unlock()
		if w == nil {
			return err
		}
		<-w
	}
}

// flush stores every step, the held one included.
func (j *journal) flush() error {
	j.release()
	for {
		if err := j.wait(); err != nil {
			return err
		}
		j.mu.Lock()
		if len(j.queued) == 0 || j.err != nil {
			err := j.err
			j.mu.Unlock()
			return err
		}
		if j.writing == nil {
			j.writeQueued()
		}
		j.mu.Unlock()
	}
}

// take returns the steps not yet written, to be stored with the
// execution's end, once no write is in flight; stored are the steps
// stored before them.
func (j *journal) take() (stored []Step, last []StepWrite, err error) {
	j.mu.Lock()
	j.stopLinger()
	last, j.queued = j.queued, nil
	j.mu.Unlock()
	if j.newest != nil {
		last, j.newest = append(last, *j.newest), nil
	}
	err = j.wait()
	return j.steps, last, err
}

// fail stops the execution on a failure to store, leaving the workflow to
// be resumed from what was stored; it returns err.
func (j *journal) fail(err error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failLocked(err)
	return err
}

// failLocked is fail with j.mu held. A workflow Start failed to store is
// not logged here: Start reports it.
func (j *journal) failLocked(err error) {
	if j.err != nil {
		return
	}
	j.err = err
	// A panic is logged as the execution ends its workflow (see crashed).
	if !errors.Is(err, errNotCreated) && panicked(err) == nil {
		j.r.opts.Logger.Error("workflow write failed; leaving the workflow to be resumed", "workflow_id", j.wf.ID, "err", err)
	}
}

// finish stores how the workflow ended, after its last steps (those not
// yet written), and wakes its followers; steps are those stored before.
func (r *Runner) finish(ctx context.Context, wf *Workflow, steps []Step, last []StepWrite, res agent.Result, runErr error) {
	var nd *nondeterminismError
	if errors.As(runErr, &nd) {
		// Whatever the program ran to, it is not this workflow's result.
		res = agent.Result{Outcome: OutcomeFailed, Status: Failed, Error: nd.Error(), ErrorCode: ErrorCodeNondeterministic}
	}
	wf.Status, wf.Outcome = res.Status, res.Outcome
	wf.FinishedAt = r.opts.Now().UTC()
	if res.Output != nil {
		if b, err := json.Marshal(res.Output); err == nil {
			wf.Output = b
		}
	}
	if wf.Status == Failed {
		var interrupted *interruptedError
		detail, code := res.Error, res.ErrorCode
		switch {
		case res.Outcome == OutcomeTimedOut:
			detail, code = "the workflow ran past its time limit", ErrorCodeTimeout
		case errors.As(runErr, &interrupted):
			detail, code = interrupted.Error(), ErrorCodeInterrupted
		}
		wf.Error = FailureDocument(wf.ID, detail, code)
	}
	rec := r.auditRecord(wf, "workflow.finish", outcomeOf(wf.Status), map[string]any{"status": wf.Status, "outcome": wf.Outcome})
	err := r.opts.Store.FinishWorkflow(ctx, r.opts.Owner, wf, []*audit.Record{rec}, last...)
	if err != nil {
		r.opts.Logger.Error("workflow end not stored; leaving the workflow to be resumed", "workflow_id", wf.ID, "err", err)
		return
	}
	for _, sw := range last {
		steps = append(steps, *sw.Step)
	}
	// No longer running here before its end is handed over: a waiter that
	// subscribes too late for the hand-over reads the stored end instead.
	r.mu.Lock()
	delete(r.running, wf.ID)
	hook := r.onFinish
	r.mu.Unlock()
	done := *wf
	r.hub.finish(wf.ID, &ending{wf: &done, steps: steps})
	if hook != nil {
		ended := *wf
		hook(context.WithoutCancel(ctx), &ended)
	}
}

// panicError is a panic recovered in an execution or in one of its
// writes, with the stack where it happened.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// panicked returns the panic err holds, or nil.
func panicked(err error) *panicError {
	var p *panicError
	errors.As(err, &p)
	return p
}

// guard runs f, returning a panic in it as a *panicError.
func guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return f()
}

// crashed ends a workflow whose execution (its resume, a write of it)
// panicked: failed, with error_code internal and the steps stored before
// (j is nil before the execution began). It is not left to be resumed,
// which would run into the same panic, here or on every replica in turn.
// The stack is logged once, never put in the workflow.
func (r *Runner) crashed(ctx context.Context, wf *Workflow, j *journal, p *panicError) {
	r.opts.Logger.Error("workflow execution panicked; ending the workflow failed", "workflow_id", wf.ID,
		"panic", fmt.Sprint(p.value), "stack", string(p.stack))
	var (
		steps []Step
		last  []StepWrite
	)
	if j != nil {
		var err error
		if steps, last, err = j.take(); err != nil {
			// Steps after a write that failed (or panicked) would leave a gap.
			last = nil
		}
	}
	res := agent.Result{Outcome: OutcomeFailed, Status: Failed, ErrorCode: ErrorCodeInternal,
		Error: "the server failed while executing the workflow"}
	if err := guard(func() error { r.finish(ctx, wf, steps, last, res, nil); return nil }); err != nil {
		r.opts.Logger.Error("storing the end of a workflow that panicked panicked too", "workflow_id", wf.ID, "err", err)
	}
}

// Stable causes of a failed workflow, its error document's error_code.
const (
	ErrorCodeTimeout          = "timeout"
	ErrorCodeInterrupted      = "interrupted"
	ErrorCodeNondeterministic = "nondeterministic"
	ErrorCodeInternal         = "internal"
)

// FailureDocument is the problem document of a failed workflow; code is
// its stable cause, or empty when a step's own failure ended it.
func FailureDocument(workflowID, detail, code string) json.RawMessage {
	if detail == "" {
		detail = "the workflow failed"
	}
	doc := (&problem.Error{Code: problem.WorkflowFailed, Detail: detail}).Doc("/v1/workflows/"+workflowID, "", "")
	doc.ErrorCode = code
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
	// mask masks what is stored; detect are the detectors of text no one
	// tool owns.
	mask   *redact.Masker
	detect []string
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
		// The record holds the arguments masked: so is the call made again.
		if v, ok := redact.Decode(e.maskArgs(c.Tool, c.Args)); ok && e.mask != nil {
			c.Args, _ = v.(map[string]any)
		}
		if err := sameCall(step, s, c); err != nil {
			return agent.CallResult{}, err
		}
		return agent.CallResult{Status: s.Status, Result: s.Result, Err: s.Error, ErrorCode: s.ErrorCode}, nil
	}
	if e.h.intents[step] {
		return agent.CallResult{}, &interruptedError{tool: c.Tool, operation: c.Operation, step: step}
	}
	t, op, err := e.lookup(ctx, c.Tool, c.Operation)
	switch {
	case problem.Is(err, problem.NotFound):
		// The program names what is no longer registered: the step fails.
		return agent.CallResult{Status: agent.StatusError, Err: err.Error(), ErrorCode: tool.CodeInvalidArguments}, nil
	case err != nil:
		return agent.CallResult{}, e.pause(ctx, err)
	}
	// A read goes out while the steps before it are written: a crash before
	// they are stored only sends reads again. A write waits until they are,
	// so that its arguments come from stored answers (a resumed workflow
	// sends an idempotent write again with the same arguments, and its key)
	// and an unrepeatable write's intent follows them.
	if op.Kind == tool.Read {
		if err := e.j.release(); err != nil {
			return agent.CallResult{}, err
		}
	} else if err := e.j.flush(); err != nil {
		return agent.CallResult{}, err
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
	callID := cmp.Or(c.CallID, req.IdempotencyKey)
	// The arguments' masked values are known before the call, so that the
	// spans reporting on it hold their masked forms.
	e.maskArgs(c.Tool, c.Args)
	_, _, detect := e.redaction(c.Tool)
	ctx = redact.NewContext(ctx, e.mask, detect)
	ctx, span := tracer.Start(ctx, "execute_tool "+c.Tool+"."+c.Operation, trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", c.Tool), attribute.String("gen_ai.tool.call.id", callID),
		attribute.Int("agentplane.step", step), attribute.String("agentplane.operation_kind", op.Kind)))
	defer span.End()
	start := e.r.opts.Now()
	res, err := e.r.opts.Caller.Call(ctx, req)
	if err != nil {
		span.SetStatus(codes.Error, e.mask.Text(err.Error(), detect))
	}
	stored := e.maskCall(c.Tool, c.Args, res)
	// A call that failed as the execution stopped may not have reached
	// the tool; one that succeeded did, and is recorded like any other.
	// One that was sent and cut short by a cancel or the deadline is
	// recorded too (the workflow ends there): it may have reached the tool.
	// At a shutdown, resume decides its fate from its intent instead.
	if err != nil && ctx.Err() != nil {
		why, ended := stopReason(context.Cause(ctx))
		if !ended || res.Attempts == 0 {
			return agent.CallResult{}, ctx.Err()
		}
		e.calls[step] = &callRecord{res: stored, audit: tool.CallAuditRecord(ctx, req, stored, err, start)}
		return agent.CallResult{Status: agent.StatusCancelled,
			Err: why + " while the call was in flight: the request was sent and no answer was received"}, nil
	}
	e.calls[step] = &callRecord{res: stored, audit: tool.CallAuditRecord(ctx, req, stored, err, start)}
	if err != nil {
		return agent.CallResult{Status: agent.StatusError, Result: res.Body, Err: callError(err), ErrorCode: tool.ErrorCode(err)}, nil
	}
	return agent.CallResult{Status: agent.StatusOK, Result: res.Body}, nil
}

// ErrNondeterministic fails a resumed workflow whose program no longer
// produces the steps its history recorded: serving a recorded answer to a
// different step would be a silent wrong answer.
var ErrNondeterministic = errors.New("nondeterministic workflow")

// nondeterminismError is ErrNondeterministic saying where the program
// left its history.
type nondeterminismError struct{ detail string }

func (e *nondeterminismError) Error() string { return ErrNondeterministic.Error() + ": " + e.detail }

func (e *nondeterminismError) Unwrap() error { return ErrNondeterministic }

func nondeterministic(format string, args ...any) error {
	return &nondeterminismError{detail: fmt.Sprintf(format, args...)}
}

// sameStep checks that a step made again on resume is the recorded one:
// its action, kind (when recorded), tool, operation and status.
func sameStep(s *Step, ev agent.Event) error {
	if s.Action != ev.Action || s.Kind != "" && s.Kind != ev.Kind || s.Tool != ev.Tool || s.Operation != ev.Operation || s.Status != ev.Status {
		return nondeterministic("step %d recorded %s, the program now produces %s", s.Step,
			describeStep(s.Action, s.Kind, s.Tool, s.Operation, s.Status), describeStep(ev.Action, ev.Kind, ev.Tool, ev.Operation, ev.Status))
	}
	return nil
}

// sameCall checks that a call made again on resume is the recorded one: a
// call the history made (not one refused before it was made), of the same
// action, tool and operation, with the same RFC 8785 canonical arguments.
func sameCall(step int, s *Step, c agent.ToolCall) error {
	made := s.Status == agent.StatusOK || s.Status == agent.StatusError
	if !made || s.Action != c.Action || s.Tool != c.Tool || s.Operation != c.Operation {
		return nondeterministic("step %d recorded %s, the program now calls %q (%s.%s)", step,
			describeStep(s.Action, s.Kind, s.Tool, s.Operation, s.Status), c.Action, c.Tool, c.Operation)
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
		return nondeterministic("step %d recorded %s.%s with args %s, the program now sends %s",
			step, c.Tool, c.Operation, recorded, now)
	}
	return nil
}

// describeStep names a step in a nondeterminism detail:
// "post" (call ledger.postEntry, ok).
func describeStep(action, kind, toolName, operation, status string) string {
	what := kind
	if toolName != "" {
		what += " " + toolName + "." + operation
	}
	return fmt.Sprintf("%q (%s, %s)", action, what, status)
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

// stopReason says why a stopped execution ends its workflow there (a
// cancel, the deadline); ended is false when the workflow is resumed
// instead (a shutdown, a lease lost, a pause).
func stopReason(cause error) (why string, ended bool) {
	switch {
	case errors.Is(cause, errCancel):
		return "the workflow was cancelled", true
	case errors.Is(cause, context.DeadlineExceeded):
		return "the workflow ran past its time limit", true
	}
	return "", false
}

// pause stops the execution after a store error that may pass (a lookup
// that failed, not one that found nothing), unless it has stopped already:
// nothing is wrong with the workflow, so it is resumed from what was
// stored, here or on another replica. It returns the error that stops
// the run: the context's.
func (e *recorder) pause(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		e.r.opts.Logger.Warn("workflow paused by a store error; it will be resumed", "workflow_id", e.wf.ID, "err", err)
		e.r.stop(e.wf.ID, fmt.Errorf("%w: %w", errPaused, err))
	}
	return cmp.Or(ctx.Err(), err)
}

// lookup finds a call's tool and operation: problem.NotFound when either
// is not registered, any other error when the store failed.
func (e *recorder) lookup(ctx context.Context, toolName, opID string) (*tool.Tool, *tool.Operation, error) {
	t, ok := e.tools[toolName]
	if !ok {
		var err error
		if t, err = e.r.opts.Tools.ToolByName(ctx, e.wf.Tenant, toolName); err != nil {
			return nil, nil, fmt.Errorf("tool %s: %w", toolName, err)
		}
		e.tools[toolName] = t
	}
	if ops, ok := e.h.pinned[toolName]; ok {
		if i := slices.IndexFunc(ops, func(op tool.Operation) bool { return op.ID == opID }); i >= 0 {
			return t, &ops[i], nil
		}
		return nil, nil, fmt.Errorf("tool %s has no operation %s at revision %d", toolName, opID, t.Revision)
	}
	op, err := e.r.operation(ctx, e.wf.Tenant, t, opID)
	if err != nil {
		return nil, nil, err
	}
	return t, op, nil
}

// operation finds an operation of the tool's current revision, cached:
// problem.NotFound when the tool has none of that id.
func (r *Runner) operation(ctx context.Context, tenant string, t *tool.Tool, opID string) (*tool.Operation, error) {
	if op := r.ops.get(t, opID); op != nil {
		return op, nil
	}
	op, err := r.opts.Tools.Operation(ctx, tenant, t.ID, opID)
	if problem.Is(err, problem.NotFound) {
		return nil, problem.New(problem.NotFound, "tool %s has no operation %s (was it re-registered?)", t.Name, opID)
	}
	if err != nil {
		return nil, fmt.Errorf("operation %s.%s: %w", t.Name, opID, err)
	}
	r.ops.put(t, opID, op)
	return op, nil
}

// Complete implements agent.Completer: recorded completions are served
// again; a new one is asked of its model, unless the tenant's tokens
// through that model today have reached its daily budget, and recorded
// (with its usage) before use.
func (e *recorder) Complete(ctx context.Context, step, n int, req agent.ChatRequest) (agent.ChatResponse, error) {
	hash, err := RequestHash(e.mask, e.detect, req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	if b, ok := e.h.completions[n]; ok {
		rc, err := agent.DecodeCompletion(b)
		if err != nil {
			return agent.ChatResponse{}, fmt.Errorf("completion %d: %w", n, err)
		}
		if rc.RequestSHA256 != "" && rc.RequestSHA256 != hash {
			return agent.ChatResponse{}, nondeterministic("completion %d was recorded for another request", n)
		}
		return rc.Response, nil
	}
	m, resp, err := e.r.request(redact.NewContext(ctx, e.mask, e.detect), e.wf.Tenant, req, e.j.flush)
	var se *storeError
	if errors.As(err, &se) {
		return agent.ChatResponse{}, e.pause(ctx, se.err)
	}
	if err != nil {
		return resp, err
	}
	c, err := e.completion(step, n, m, hash, req, resp)
	if err != nil {
		return resp, err
	}
	if err := e.r.opts.Store.RecordCompletion(ctx, e.r.opts.Owner, c); err != nil {
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		return resp, e.j.fail(fmt.Errorf("record completion: %w", err))
	}
	return resp, nil
}

// storeError is a failure to read a model or its usage from the store:
// transient, so a workflow pauses on it instead of failing.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

// request asks the tenant's model req names (default "default") for a
// completion, unless the tenant has used the model's daily token budget
// (an *agent.BudgetError, nothing requested). beforeSend, when set, runs
// just before the request goes out.
func (r *Runner) request(ctx context.Context, tenant string, req agent.ChatRequest, beforeSend func() error) (*model.Model, agent.ChatResponse, error) {
	if r.opts.Models == nil || r.opts.LLM == nil {
		return nil, agent.ChatResponse{}, agent.ErrNoPlanner
	}
	name := cmp.Or(req.Model, model.DefaultName)
	m, err := r.opts.Models.Model(ctx, tenant, name)
	switch {
	case problem.Is(err, problem.NotFound):
		if name == model.DefaultName {
			// The registry says how the server-wide model is defined.
			return nil, agent.ChatResponse{}, fmt.Errorf("model %q: %s", name, problem.As(err).Detail)
		}
		return nil, agent.ChatResponse{}, fmt.Errorf("model %q is not registered: register it (POST /v1/models) or name another in the agent definition", name)
	case err != nil:
		return nil, agent.ChatResponse{}, &storeError{fmt.Errorf("model %s: %w", name, err)}
	}
	if m.DailyTokenBudget > 0 {
		used, err := r.opts.Store.TokensToday(ctx, tenant, m.Name, r.opts.Now())
		if err != nil {
			return nil, agent.ChatResponse{}, &storeError{fmt.Errorf("usage of model %s: %w", name, err)}
		}
		if used >= m.DailyTokenBudget {
			return nil, agent.ChatResponse{}, &agent.BudgetError{Reason: fmt.Sprintf(
				"model %q has used its daily budget of %d tokens for this tenant", m.Name, m.DailyTokenBudget)}
		}
	}
	client, err := r.opts.LLM.Client(m)
	if err != nil {
		return nil, agent.ChatResponse{}, fmt.Errorf("model %s: %w", name, err)
	}
	if beforeSend != nil {
		if err := beforeSend(); err != nil {
			return nil, agent.ChatResponse{}, err
		}
	}
	resp, err := client.Complete(ctx, req)
	return m, resp, err
}

// LiveCompletion requests a completion outside any workflow's history (a
// live what-if replay's) the way a workflow's are: from the tenant's model
// req names, within its daily budget. Its tokens and cost count toward the
// tenant's usage under agentName; the model is returned for its price.
func (r *Runner) LiveCompletion(ctx context.Context, tenant, agentName string, req agent.ChatRequest) (agent.ChatResponse, *model.Model, error) {
	m, resp, err := r.request(ctx, tenant, req, nil)
	if err != nil {
		return resp, nil, err
	}
	u := UsageRecord{Tenant: tenant, Agent: agentName, Model: m.Name, At: r.opts.Now()}
	if resp.Usage != nil {
		u.InputTokens, u.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	if m.Price != nil {
		u.Cost, u.Currency = m.Price.Cost(u.InputTokens, u.OutputTokens), cmp.Or(m.Price.Currency, model.DefaultCurrency)
	}
	if err := r.opts.Store.RecordUsage(ctx, u); err != nil {
		return resp, m, fmt.Errorf("count completion in usage: %w", err)
	}
	return resp, m, nil
}

// completion is the record of a new completion: the request and response
// whole, the usage the provider reported and its cost at m's price.
func (e *recorder) completion(step, n int, m *model.Model, hash string, req agent.ChatRequest, resp agent.ChatResponse) (*Completion, error) {
	c := &Completion{
		WorkflowID: e.wf.ID, N: n, Step: step, Tenant: e.wf.Tenant, Agent: e.wf.Agent, AgentVersion: e.wf.AgentVersion,
		Model: m.Name, ProviderModel: cmp.Or(resp.Model, m.Model), FinishReason: resp.FinishReason,
		CreatedAt: e.r.opts.Now().UTC(),
	}
	if resp.Usage != nil {
		c.InputTokens, c.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	// The record carries its step and cost beside the exchange, so a
	// replay reading the history alone has them.
	rec := struct {
		agent.RecordedCompletion
		Step int   `json:"step"`
		Cost *Cost `json:"cost,omitempty"`
	}{RecordedCompletion: agent.RecordedCompletion{RequestSHA256: hash, Request: &req, Response: resp}, Step: step}
	if m.Price != nil {
		c.Cost = m.Price.Cost(c.InputTokens, c.OutputTokens)
		c.Currency = cmp.Or(m.Price.Currency, model.DefaultCurrency)
		rec.Cost = &Cost{Amount: c.Cost, Currency: c.Currency}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode completion: %w", err)
	}
	c.Data = e.maskJSON(data)
	return c, nil
}

// step builds the stored step of an event and its audit records.
func (e *recorder) step(ev agent.Event) (*Step, []*audit.Record) {
	now := e.r.opts.Now()
	s := &Step{
		WorkflowID: e.wf.ID, Seq: ev.Step, Step: ev.Step, Action: ev.Action, Kind: ev.Kind, Status: ev.Status,
		Tool: ev.Tool, Operation: ev.Operation, Score: ev.Score, Queue: ev.Queue, Outcome: ev.Outcome,
		Result: ev.Result, Error: ev.Error, Reason: ev.Reason, Model: ev.Model, Usage: ev.Usage,
		FinishReason: ev.FinishReason, ErrorCode: ev.ErrorCode, StartedAt: e.last.UTC(), DurationMS: now.Sub(e.last).Milliseconds(),
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
	e.maskStep(s, ev, recs)
	return s, recs
}

func stepOutcome(status string) string {
	switch status {
	case agent.StatusDenied, agent.StatusLimitExceeded:
		return audit.Denied
	case agent.StatusError, agent.StatusCancelled:
		return audit.Error
	}
	return audit.Success
}
