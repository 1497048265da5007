package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

var tracer = telemetry.Tracer("github.com/agentplane/agentplane/internal/workflow")

// history is what a workflow recorded before the current execution.
type history struct {
	steps []Step
	// intents are the steps whose unrepeatable call may have been sent;
	// pending, those intents whole.
	intents     map[int]bool
	pending     []Intent
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
	ctx, span := startInvokeSpan(ctx, wf, len(h.steps))
	defer span.End()
	store := context.WithoutCancel(ctx)
	j, rec := r.begin(store, wf, h)
	defer j.wait()
	defer func() {
		if v := recover(); v != nil {
			r.crashed(store, wf, j, &panicError{value: v, stack: debug.Stack()})
		}
	}()
	if !r.masking(ctx, wf, j, rec) {
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
		s, recs := rec.step(ev)
		if err := j.add(s, recs, rec.answer(ev.Step)); err != nil {
			break
		}
	}
	r.conclude(ctx, wf, j, rec, run.Result(), runErr)
}

// begin makes an execution's journal and recorder. A new workflow's
// storing, under way in Start, is the journal's first write in flight.
func (r *Runner) begin(store context.Context, wf *Workflow, h history) (*journal, *recorder) {
	j := &journal{r: r, wf: wf, ctx: store, steps: slices.Clip(h.steps)}
	if h.created != nil {
		j.counted = []Completion{}
		j.mu.Lock()
		j.inFlight(h.created.wait, nil)
		j.mu.Unlock()
	}
	rec := &recorder{r: r, wf: wf, h: h, j: j, calls: map[int]*callRecord{}, answered: map[int]*Completion{}, tools: map[string]*tool.Tool{}, last: r.opts.Now()}
	for _, t := range h.tools {
		if t != nil {
			rec.tools[t.Name] = t
		}
	}
	return j, rec
}

// masking readies the recorder's masking; without its key, nothing is
// stored unmasked: the workflow is released to wait for it, and masking
// reports false.
func (r *Runner) masking(ctx context.Context, wf *Workflow, j *journal, rec *recorder) bool {
	err := rec.masking(ctx)
	if err == nil {
		return true
	}
	_ = rec.pause(ctx, fmt.Errorf("redaction key: %w", err))
	if err := j.wait(); err == nil {
		if err := r.opts.Store.ReleaseLease(context.WithoutCancel(ctx), r.opts.Owner, wf.ID); err != nil {
			r.opts.Logger.Warn("release workflow lease", "workflow_id", wf.ID, "err", err)
		}
	}
	return false
}

// startInvokeSpan starts the invoke_agent span of an execution of wf that
// resumes after the steps recorded before it. The workflow is the GenAI
// conversation of the spans started under it.
func startInvokeSpan(ctx context.Context, wf *Workflow, after int, extra ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(telemetry.WithConversation(ctx, wf.ID), "invoke_agent "+wf.Agent, trace.WithAttributes(append([]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", wf.Agent),
		attribute.String("gen_ai.agent.id", wf.Agent+"@"+wf.AgentVersion),
		attribute.String("gen_ai.conversation.id", wf.ID),
		attribute.String("agentplane.workflow_id", wf.ID),
		attribute.String("agentplane.agent", wf.Agent+"@"+wf.AgentVersion),
		attribute.Int("agentplane.resumed_after_step", after),
	}, extra...)...))
}

// conclude ends an execution as its context's cause and its result say:
// an execution stopped by a shutdown or a store error stores its steps and
// releases the workflow to be resumed; one that lost its lease leaves it;
// one paused at an approval suspends it; any other finishes it.
func (r *Runner) conclude(ctx context.Context, wf *Workflow, j *journal, rec *recorder, res agent.Result, runErr error) {
	store := context.WithoutCancel(ctx)
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
	wf.Usage = j.usage()
	if res.Status == agent.WorkflowWaiting && runErr == nil && rec.asked != nil {
		r.suspend(store, wf, steps, last, rec.asked)
		return
	}
	r.finish(store, wf, steps, last, rec.maskResult(res), runErr)
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
	// The agent the workflow runs, which OCSF exports name as its ai_agent.
	details["agent"], details["agent_version"] = wf.Agent, wf.AgentVersion
	return &audit.Record{
		Time: r.opts.Now(), Tenant: wf.Tenant,
		Actor:    audit.Actor{Sub: wf.Caller.Sub, ClientID: wf.Caller.ClientID},
		Action:   action,
		Resource: audit.Resource{Type: "workflow", ID: wf.ID},
		Outcome:  outcome, RequestID: wf.RequestID, TraceID: wf.TraceID, WorkflowID: wf.ID,
		Details: audit.Details(details),
	}
}
