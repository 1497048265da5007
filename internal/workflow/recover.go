package workflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"go.opentelemetry.io/otel/trace"
)

// Run renews this replica's leases, resumes workflows whose owner died or
// drained, and follows the store's change feed when it has one,
// until ctx ends. It returns once everything it started has returned.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.watch(ctx) })
	// Renewals have their own ticker: a slow recovery or approval expiry
	// must not hold them past the lease, or another replica takes over a
	// workflow still running here.
	wg.Go(func() { r.renewLeases(ctx) })
	r.recover(ctx)
	t := time.NewTicker(r.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.feed.released:
			// Another replica drained: its workflows are free now.
			r.recover(ctx)
		case <-t.C:
			r.recover(ctx)
			r.expireApprovals(ctx)
		}
	}
}

// renewLeases renews every third of the lease until ctx ends. Each renewal
// gives up after a quarter of the lease, so a stuck one leaves time for
// the next before the leases lapse.
func (r *Runner) renewLeases(ctx context.Context) {
	t := time.NewTicker(r.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, r.opts.Lease/4)
			r.renew(rctx)
			cancel()
		}
	}
}

// renew extends the leases of local executions, stopping those another
// replica took over and those someone asked to cancel.
func (r *Runner) renew(ctx context.Context) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.running))
	for id := range r.running {
		if !r.creating[id] && !r.held(id) {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	st, err := r.opts.Store.RenewLease(ctx, r.opts.Owner, ids, r.opts.Now().Add(r.opts.Lease))
	if err != nil {
		r.opts.Logger.Warn("renew workflow leases", "err", err)
		return
	}
	for _, id := range st.Lost {
		r.stop(id, errLeaseLost)
	}
	for _, id := range st.CancelRequested {
		r.stop(id, errCancel)
	}
}

// recover claims running workflows whose lease lapsed and resumes them. A
// workflow that can never be resumed (its version is gone or no longer
// compiles, or compiling it panics) ends failed. One whose resume failed
// otherwise (a store error) is tried again once the lease just taken
// lapses, behind the workflows waiting longer, unless it is past its
// deadline (it ends timed_out) or was asked to stop (it ends cancelled);
// at shutdown its lease is released for the next start.
func (r *Runner) recover(ctx context.Context) {
	// A replica claims no more than it has room to run: the others, or
	// this one once its executions end, take the rest.
	running, queued := r.Executions()
	room := min(32, r.opts.MaxRunning-running-queued)
	if room <= 0 {
		return
	}
	now := r.opts.Now()
	wfs, err := r.opts.Store.ClaimExpired(ctx, r.opts.Owner, now, now.Add(r.opts.Lease), room)
	if err != nil {
		r.opts.Logger.Warn("claim workflows to resume", "err", err)
		return
	}
	store := context.WithoutCancel(ctx)
	for _, wf := range wfs {
		if wf.CancelRequested {
			// Asked to stop before its owner could: nothing more runs.
			r.finish(store, wf, nil, nil, agent.Result{Outcome: OutcomeCancelled, Status: Cancelled}, nil)
			continue
		}
		err := guard(func() error { return r.resume(ctx, wf) })
		switch {
		case err == nil, errors.Is(err, errRunning):
		case panicked(err) != nil:
			r.crashed(store, wf, nil, panicked(err))
		case unresumable(err):
			r.opts.Logger.Error("resume workflow", "workflow_id", wf.ID, "err", err)
			r.finish(store, wf, nil, nil, agent.Result{Outcome: OutcomeFailed, Status: Failed,
				Error: "could not resume after a restart: " + err.Error()}, nil)
		case wf.CancelRequested:
			r.finish(store, wf, nil, nil, agent.Result{Outcome: OutcomeCancelled, Status: Cancelled}, nil)
		case !wf.Deadline.IsZero() && !now.Before(wf.Deadline):
			r.opts.Logger.Warn("resume workflow; past its deadline", "workflow_id", wf.ID, "err", err)
			r.finish(store, wf, nil, nil, agent.Result{Outcome: OutcomeTimedOut, Status: Failed}, nil)
		case errors.Is(err, errShutdown):
			if err := r.opts.Store.ReleaseLease(store, r.opts.Owner, wf.ID); err != nil {
				r.opts.Logger.Warn("release workflow lease", "workflow_id", wf.ID, "err", err)
			}
		default:
			r.opts.Logger.Warn("resume workflow; trying again once its lease lapses", "workflow_id", wf.ID, "err", err)
		}
	}
}

// unresumable reports whether a resume failed for good: the workflow's
// version is gone, or its definition no longer decodes or compiles.
func unresumable(err error) bool {
	return problem.Is(err, problem.NotFound) || problem.Is(err, problem.AgentVersionNotFound) ||
		problem.Is(err, problem.ValidationFailed) || errors.Is(err, errUndecodable)
}

// resume re-runs a claimed workflow against its recorded history.
func (r *Runner) resume(ctx context.Context, wf *Workflow) error {
	v, err := r.opts.Versions.AgentVersion(ctx, wf.Tenant, wf.Agent, wf.AgentVersion)
	if err != nil {
		return fmt.Errorf("agent version %s@%s: %w", wf.Agent, wf.AgentVersion, err)
	}
	var (
		prog   *agent.Program
		gov    *agent.Governance
		tools  []*tool.Tool
		pinned map[string][]tool.Operation
	)
	if v.External != nil {
		gov, tools, err = r.governance(ctx, v)
	} else {
		prog, tools, pinned, err = r.startedProgram(ctx, wf, v)
	}
	if err != nil {
		return err
	}
	steps, err := r.opts.Store.Steps(ctx, wf.ID, 0)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	intents, err := r.opts.Store.Intents(ctx, wf.ID)
	if err != nil {
		return fmt.Errorf("intents: %w", err)
	}
	approvals, err := r.opts.Store.WorkflowApprovals(ctx, wf.ID)
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	completions, err := r.opts.Store.Completions(ctx, wf.ID)
	if err != nil {
		return fmt.Errorf("completions: %w", err)
	}
	h := history{steps: steps, intents: map[int]bool{}, completions: completions, approvals: map[int]*Approval{},
		tools: tools, pinned: pinned, pending: intents}
	for _, a := range approvals {
		h.approvals[a.Step] = a
	}
	for _, in := range intents {
		h.intents[in.Step] = true
	}
	launch := func() error { return r.launch(trace.SpanContext{}, wf, prog, h) }
	if gov != nil {
		launch = func() error { return r.resumeExternal(wf, v, h, gov) }
	}
	if err := launch(); err != nil {
		return err
	}
	r.opts.Logger.Info("resuming workflow", "workflow_id", wf.ID, "after_step", len(steps))
	return nil
}

// startedProgram compiles v against the tool revisions wf started with, so
// that a tool updated since (a policy class, an operation's kind) does not
// change what the recorded steps do again. It returns the tools as
// compiled and the operations of those not at their current revision. A
// revision no longer kept is replaced by the current one: the comparison
// of each step made again with its record then catches a change that
// matters.
func (r *Runner) startedProgram(ctx context.Context, wf *Workflow, v *agent.Version) (*agent.Program, []*tool.Tool, map[string][]tool.Operation, error) {
	tools, err := r.tools(ctx, v.Tenant, v.Tools)
	if err != nil {
		return nil, nil, nil, err
	}
	var pinned map[string][]tool.Operation
	for i, name := range v.Tools {
		rev, ok := wf.ToolRevisions[name]
		if !ok || tools[i] != nil && tools[i].Revision == rev {
			continue
		}
		t, ops, err := r.opts.Tools.ToolRevision(ctx, wf.Tenant, name, rev)
		if problem.Is(err, problem.NotFound) {
			r.opts.Logger.Warn("resume workflow against the current revision of a tool; the one it started with is not kept",
				"workflow_id", wf.ID, "tool", name, "revision", rev)
			continue
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("tool %s at revision %d: %w", name, rev, err)
		}
		if pinned == nil {
			pinned = map[string][]tool.Operation{}
		}
		tools[i], pinned[name] = t, ops
	}
	prog, err := r.compile(ctx, v, tools, pinned)
	if err != nil {
		return nil, nil, nil, err
	}
	return prog, tools, pinned, nil
}
