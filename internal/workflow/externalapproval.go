package workflow

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
)

// A call of an external agent that matches one of its version's approvals
// rules waits for a person (SPEC §4 "External agents", Approvals): the
// workflow is stored waiting, with its pending approval, while the gateway
// holds the call up to ExternalOptions.ApprovalHold. A decision in time
// hands the workflow back to the held execution, which makes or refuses
// the call. Past the hold the call is refused as waiting, the attempt is
// set aside (nothing it does is recorded: the workflow waits), and after
// the decision a new attempt replays the journal up to the call, which the
// decision then lets through or refuses.

// hold is a call held for a decision.
type hold struct {
	step     int
	decision chan *Approval
}

// heldApproval is an approval an external run asked for: the call's key
// and the step that asked.
type heldApproval struct {
	key  string
	step int
	// used is set once the approval let a call through that the tool
	// answered ok: an approval lets one call through, the one it was
	// asked for, and its repeats while they fail (a denial refuses every
	// identical call of the run).
	used bool
}

// holdFor registers the held call of a workflow: a decision on its
// approval goes to the execution rather than to a new one.
func (r *Runner) holdFor(id string, step int) *hold {
	h := &hold{step: step, decision: make(chan *Approval, 1)}
	r.mu.Lock()
	if r.holds == nil {
		r.holds = map[string]*hold{}
	}
	r.holds[id] = h
	r.mu.Unlock()
	return h
}

// unhold ends a workflow's hold, whether or not it was decided.
func (r *Runner) unhold(id string, h *hold) {
	r.mu.Lock()
	if r.holds[id] == h {
		delete(r.holds, id)
	}
	r.mu.Unlock()
}

// handOver gives a decision to the execution holding its call, if one
// here does; false when none does (a new execution resumes the workflow).
func (r *Runner) handOver(a *Approval) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.holds[a.WorkflowID]
	if h == nil || h.step != a.Step {
		return false
	}
	delete(r.holds, a.WorkflowID)
	h.decision <- a // buffered: sent under r.mu, so unhold then finds it
	return true
}

// resumeAfter has the execution of wf running here resume wf once it
// returns: a decision came while an attempt set aside was still running.
func (r *Runner) resumeAfter(wf *Workflow) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[wf.ID]; !ok {
		return false
	}
	if r.resumeNext == nil {
		r.resumeNext = map[string]*Workflow{}
	}
	r.resumeNext[wf.ID] = wf
	return true
}

// held reports whether a workflow's execution holds a call here: its lease
// is not renewed meanwhile (it waits in the store).
func (r *Runner) held(id string) bool {
	return r.holds[id] != nil // r.mu is held
}

// approvalOf is the decision on an approval the run asked for the call
// key that has not let a call through yet (used), and its index in
// x.approvals; nil (and -1) when there is none.
func (x *externalRun) approvalOf(ctx context.Context, key string) (*Approval, int, error) {
	for i, ha := range x.approvals {
		if ha.key != key || ha.used {
			continue
		}
		a := x.decided[ha.step]
		if a == nil {
			as, err := x.r.opts.Store.WorkflowApprovals(ctx, x.wf.ID)
			if err != nil {
				return nil, -1, err
			}
			for _, each := range as {
				if each.Decided() {
					x.decided[each.Step] = each
				}
			}
			a = x.decided[ha.step]
		}
		if a != nil {
			return a, i, nil
		}
	}
	return nil, -1, nil
}

// approve decides whether a call that needs a decision may be made: the
// index in x.approvals of the approval that lets it through, or -1 and a
// refusal's answer when denied or when the hold passed. The caller marks
// the approval used once the call is answered ok.
func (x *externalRun) approve(ctx context.Context, a *attemptGateway, op agent.GatewayOperation, args map[string]any, key string, req *agent.ApprovalRequest) (held int, refusal *CallAnswer, err error) {
	ev := agent.Event{Action: ActionApproval, Kind: agent.KindApprove, Tool: op.Tool, Operation: op.ID, Args: args, Reason: x.rec.maskText(req.Reason)}
	decided, held, err := x.approvalOf(ctx, key)
	if err != nil {
		return -1, nil, x.rec.pause(ctx, err)
	}
	if decided == nil {
		held = len(x.approvals) // wait holds it there
		if decided, err = x.wait(ctx, a, ev, req, key); err != nil || decided == nil {
			if err == nil {
				x.setAside = true
				return -1, &CallAnswer{IsError: true, Message: fmt.Sprintf(
					"%s.%s waits for a person's approval (step %d): %s. This attempt is set aside; after the decision agentplane starts a new one, in which the same call is made or refused",
					op.Tool, op.ID, x.step, ev.Reason)}, nil
			}
			return -1, nil, err
		}
	}
	d, err := x.emitDecision(ev, decided, a.attempt)
	if err != nil {
		return -1, nil, err
	}
	if d.Status == agent.StatusDenied {
		return -1, &CallAnswer{IsError: true, Message: deniedCall(op, decided.DecidedBy)}, nil
	}
	return held, nil, nil
}

// emitDecision records the step of a decision on the approval ev asked
// for, in the attempt that goes on after it.
func (x *externalRun) emitDecision(ev agent.Event, decided *Approval, attempt int) (agent.Decision, error) {
	d := decided.decision()
	ev.Status, ev.Result = d.Status, d.Result
	if d.Status == agent.StatusDenied {
		ev.Error = "the approval was denied"
	}
	return d, x.emit(ev, attempt, "")
}

// deniedCall is the result text of a call whose approval was denied.
func deniedCall(op agent.GatewayOperation, by string) string {
	return fmt.Sprintf("%s.%s was denied by %s: the call was not made", op.Tool, op.ID, by)
}

// wait stores the workflow waiting at a new approval and holds the
// exchange that asked (a call, or a completion or call past a budget):
// the decision, or nil when the hold passed first.
func (x *externalRun) wait(ctx context.Context, a *attemptGateway, ev agent.Event, req *agent.ApprovalRequest, key string) (*Approval, error) {
	if err := x.j.flush(); err != nil {
		return nil, err
	}
	ev.Status = agent.StatusWaitingApproval
	x.step++
	ev.Step = x.step
	s, recs := x.rec.step(ev)
	s.Attempt = a.attempt
	now := x.r.opts.Now().UTC()
	ap := &Approval{
		WorkflowID: x.wf.ID, Tenant: x.wf.Tenant, Agent: x.wf.Agent, AgentVersion: x.wf.AgentVersion, Step: x.step,
		Action: req.Action, Reason: ev.Reason, ApproverScope: req.ApproverScope, AllowSelf: req.AllowSelf,
		OnTimeout: req.OnTimeout, Invoker: x.wf.Caller.Sub, RequestedAt: now, Deadline: now.Add(req.Timeout),
		Status: ApprovalPending, Remaining: max(x.wf.Deadline.Sub(now), 0), Budget: req.Budget,
	}
	h := x.r.holdFor(x.wf.ID, x.step)
	defer x.r.unhold(x.wf.ID, h)
	if err := x.r.opts.Store.SuspendWorkflow(x.j.ctx, x.r.opts.Owner, ap, StepWrite{Step: s, Records: recs}); err != nil {
		return nil, x.j.fail(fmt.Errorf("store the waiting workflow: %w", err))
	}
	if key != "" {
		x.approvals = append(x.approvals, heldApproval{key: key, step: x.step})
	}
	x.j.mu.Lock()
	x.j.steps = append(x.j.steps, *s)
	x.j.mu.Unlock()
	x.r.hub.notify(x.wf.ID)
	waiting := *x.wf
	waiting.Status = Waiting
	x.r.hub.finish(x.wf.ID, &ending{wf: &waiting})
	t := time.NewTimer(x.hold())
	defer t.Stop()
	x.waiting = true
	select {
	case decided := <-h.decision:
		x.waiting = false
		x.decided[decided.Step] = decided
		return decided, nil
	case <-t.C:
		x.r.unhold(x.wf.ID, h)
		select {
		case decided := <-h.decision: // handed over as the hold passed
			x.waiting = false
			x.decided[decided.Step] = decided
			return decided, nil
		default:
			return nil, nil
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (x *externalRun) hold() time.Duration {
	if d := x.r.opts.External.ApprovalHold; d > 0 {
		return d
	}
	return defaultApprovalHold
}

// ActionApproval is the action of an external agent's approval steps.
const ActionApproval = "approval"
