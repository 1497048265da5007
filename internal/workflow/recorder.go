package workflow

import (
	"cmp"
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
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// recorder is the Env of an execution: it serves recorded answers for steps
// in the history, makes real calls for new steps, and keeps what each call
// sent and received for the step record.
type recorder struct {
	r     *Runner
	wf    *Workflow
	h     history
	j     *journal
	calls map[int]*callRecord
	// answered are the new completions not yet handed to the journal, by
	// the step that reports each.
	answered map[int]*Completion
	tools    map[string]*tool.Tool
	last     time.Time
	// asked is the approval the execution paused at, if it did.
	asked *asked
	// mask masks what is stored; detect are the detectors of text no one
	// tool owns.
	mask   *redact.Masker
	detect []string
	// faults are the workflow's faults compiled (see inject); injected
	// what they answered, by step.
	faults   *fault.Plan
	compiled bool
	injected map[int]*fault.Injected
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
	if in := e.inject(ctx, step, c); in != nil {
		return in.CallResult(), nil
	}
	t, op, err := e.lookup(ctx, c.Tool, c.Operation)
	switch {
	case problem.Is(err, problem.NotFound):
		// The program names what is no longer registered: the step fails.
		return agent.CallResult{Status: agent.StatusError, Err: err.Error(), ErrorCode: tool.CodeInvalidArguments}, nil
	case err != nil:
		return agent.CallResult{}, e.pause(ctx, err)
	}
	// A read goes out while the steps before it are written (unless one of
	// them records a completion): a crash before they are stored only sends
	// reads again. A write waits until they are, so that its arguments come
	// from stored answers (a resumed workflow sends an idempotent write
	// again with the same arguments, and its key) and an unrepeatable
	// write's intent follows them.
	if op.Kind == tool.Read {
		if err := e.j.beforeRead(); err != nil {
			return agent.CallResult{}, err
		}
	} else if err := e.j.flush(); err != nil {
		return agent.CallResult{}, err
	}
	if op.Kind == tool.Write && !t.IdempotencySupport {
		in := Intent{WorkflowID: e.wf.ID, Step: step, Tool: c.Tool, Operation: c.Operation, Call: c.CallDigest, At: e.r.opts.Now()}
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
		IdempotencyKey: cmp.Or(c.IdempotencyKey, e.wf.ID+"."+strconv.Itoa(step)),
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
		telemetry.KeyToolType.String(telemetry.ToolTypeExtension), telemetry.KeyConversationID.String(e.wf.ID),
		attribute.Int("agentplane.step", step), attribute.String("agentplane.operation_kind", op.Kind)))
	defer span.End()
	start, began := e.r.opts.Now(), time.Now()
	res, err := e.r.opts.Caller.Call(ctx, req)
	var errType string
	if err != nil {
		errType = tool.ErrorCode(err)
		span.SetAttributes(telemetry.KeyErrorType.String(errType))
		span.SetStatus(codes.Error, e.mask.Text(err.Error(), detect))
	}
	telemetry.RecordToolDuration(ctx, c.Tool, errType, time.Since(began))
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

// inject answers a call of a replay with faults (a real replay's
// workflow, an external version's dry run) when one of its faults applies
// to it: the call is not sent, and its step records what was injected.
// The faults are decided by the replayed workflow's id and the step.
func (e *recorder) inject(ctx context.Context, step int, c agent.ToolCall) *fault.Injection {
	if len(e.wf.Faults) == 0 {
		return nil
	}
	if !e.compiled {
		e.compiled = true
		var errs []problem.FieldError
		if e.faults, errs = fault.Compile("faults", e.wf.ReplayOf, e.wf.Faults); len(errs) > 0 {
			// Checked when the replay was asked for: only a record changed
			// since could fail, and then nothing is injected.
			e.r.opts.Logger.Warn("a replay's faults no longer compile; none are injected", "workflow_id", e.wf.ID,
				"field", errs[0].Field, "error", errs[0].Message)
		}
	}
	in := e.faults.Inject(ctx, step, c.Tool, c.Operation, c.Args)
	if in != nil {
		if e.injected == nil {
			e.injected = map[int]*fault.Injected{}
		}
		e.injected[step] = &in.Injected
	}
	return in
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

// sent reports whether the call that step records reached its tool (its
// step's Sent), before the step is recorded.
func (e *recorder) sent(step int) bool {
	c, ok := e.calls[step]
	return ok && c.res.Attempts > 0
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
	if in, ok := e.injected[ev.Step]; ok {
		s.Injected, s.HTTPStatus = in, in.Status
		delete(e.injected, ev.Step)
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
