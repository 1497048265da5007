package workflow

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/agentplane/agentplane/internal/agent"
)

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
