package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentplane/agentplane/internal/tool"
)

// runner holds the state of one execution.
type runner struct {
	ctx      context.Context
	p        *Program
	in       Input
	env      Env
	act      *activation
	yield    func(Event, error) bool
	step     int // number of the last emitted step
	calls    int // tool calls made
	llmCalls int // completions asked for
	maxCalls int
	visits   int
	// usage is the tokens of the run's completions so far, completions
	// how many were answered; maxLLMTokens bounds usage's total (0: no bound).
	usage        Usage
	completions  int
	maxLLMTokens int64
	// baseCalls and baseTokens are the budgets the run started with: what
	// approving a spent one grants again.
	baseCalls  int
	baseTokens int64
}

func newRunner(ctx context.Context, p *Program, in Input, env Env) *runner {
	maxCalls := in.MaxToolCalls
	if maxCalls <= 0 {
		maxCalls = DefaultMaxToolCalls
	}
	scopes := make([]any, len(in.Caller.Scopes))
	for i, s := range in.Caller.Scopes {
		scopes[i] = s
	}
	maxTokens := in.MaxLLMTokens
	if maxTokens <= 0 {
		maxTokens = p.MaxLLMTokens()
	}
	return &runner{
		ctx: ctx, p: p, in: in, env: env, maxCalls: maxCalls, maxLLMTokens: maxTokens, baseCalls: maxCalls, baseTokens: maxTokens,
		act: &activation{
			goal:     in.Goal,
			context:  normalize(in.Context),
			caller:   map[string]any{"sub": in.Caller.Sub, "tenant": in.Caller.Tenant, "scopes": scopes},
			saved:    map[string]any{},
			declared: p.declared,
		},
	}
}

// normalize turns any JSON-marshalable map into plain JSON values as
// expressions see them (decodeValue), so they see the same types however
// the caller built the context: a number is a double unless it is an
// integer only an int (or a uint) holds exactly.
func normalize(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	if isPlainJSON(m) {
		return m
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return m
	}
	v, err := decodeValue(raw)
	if err != nil {
		return m
	}
	return v.(map[string]any)
}

// isPlainJSON reports whether v holds only what encoding/json decodes to.
func isPlainJSON(v any) bool {
	switch x := v.(type) {
	case nil, bool, float64, string:
		return true
	case map[string]any:
		for _, e := range x {
			if !isPlainJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !isPlainJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

// emit numbers and yields a step event.
func (r *runner) emit(ev Event) error {
	r.step++
	ev.Step = r.step
	if !r.yield(ev, nil) {
		return errStopped
	}
	return nil
}

// exec runs the steps and works out the ending. A returned error is the
// context's, an Env's, or errStopped.
func (r *runner) exec() (ending, error) {
	end, err := r.runSteps()
	if err != nil {
		return ending{}, err
	}
	if end != nil && end.waiting {
		return *end, nil
	}
	if end == nil {
		end = &ending{outcome: OutcomeCompleted, agent: true}
		if r.p.outcome != nil {
			out, err := r.p.outcome.evalString(r.ctx, r.act)
			if err != nil {
				if r.ctx.Err() != nil {
					return ending{}, r.ctx.Err()
				}
				return *failed("outcome: %v", err), nil
			}
			if !IsSlug(out) {
				return *failed("outcome: %q is not a slug", out), nil
			}
			end.outcome = out
		}
	}
	if end.agent && r.p.output != nil {
		out, err := r.p.output.evalJSON(r.ctx, r.act)
		if err != nil {
			if r.ctx.Err() != nil {
				return ending{}, r.ctx.Err()
			}
			return *failed("output: %v", err), nil
		}
		end.output = out
	}
	return *end, nil
}

// runSteps runs steps until they run out (nil ending) or one ends the run.
func (r *runner) runSteps() (*ending, error) {
	steps := r.p.steps
	for pc := 0; pc < len(steps); {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		s := steps[pc]
		if s.when != nil {
			ok, err := s.when.evalBool(r.ctx, r.act)
			if err != nil {
				if r.ctx.Err() != nil {
					return nil, r.ctx.Err()
				}
				return failed("%s.when: %v", s.field, err), nil
			}
			if !ok {
				pc++
				continue
			}
		}
		r.visits++
		if r.visits > r.p.maxSteps {
			return failed("the run exceeded max_steps (%d) at %s", r.p.maxSteps, s.field), nil
		}
		var (
			end *ending
			err error
		)
		switch s.kind {
		case KindGoto:
			pc = s.gotoIdx
			continue
		case KindCall:
			end, err = r.callStep(s)
		case KindScore:
			end, err = r.scoreStep(s)
		case KindRoute:
			end, err = r.routeStep(s)
		case KindSet:
			end, err = r.setStep(s)
		case KindPlan:
			end, err = r.planStep(s)
		case KindApprove:
			end, err = r.approveStep(s)
		case KindFinish:
			return r.finishStep(s)
		}
		if err != nil || end != nil {
			return end, err
		}
		pc++
	}
	return nil, nil
}

// stepFailed emits the step with status error and ends the run failed.
// A context error takes precedence: the run was stopped, not broken.
func (r *runner) stepFailed(s *cstep, ev Event, err error) (*ending, error) {
	if r.ctx.Err() != nil {
		return nil, r.ctx.Err()
	}
	ev.Action, ev.Kind, ev.Status, ev.Error = s.action, s.kind, StatusError, err.Error()
	if err := r.emit(ev); err != nil {
		return nil, err
	}
	return failed("%s (%s): %v", s.field, s.action, err), nil
}

func (r *runner) callStep(s *cstep) (*ending, error) {
	v, err := s.args.eval(r.ctx, r.act)
	if err != nil {
		return r.stepFailed(s, Event{Tool: s.target.tool, Operation: s.target.op.ID}, fmt.Errorf("args.%w", err))
	}
	args, ok := v.(map[string]any)
	if !ok && v != nil {
		return r.stepFailed(s, Event{Tool: s.target.tool, Operation: s.target.op.ID}, fmt.Errorf("args: the expression gave %T, not an object", v))
	}
	out, err := r.toolCall(s, s.target, args, "")
	if err != nil || out.end != nil {
		return out.end, err
	}
	if s.saveAs != "" {
		r.save(s.saveAs, out.value)
	}
	return nil, nil
}

func (r *runner) scoreStep(s *cstep) (*ending, error) {
	f, err := s.score.evalNumber(r.ctx, r.act)
	if err != nil {
		return r.stepFailed(s, Event{}, err)
	}
	r.save(s.saveAs, f)
	return nil, r.emit(Event{Action: s.action, Kind: KindScore, Status: StatusOK, Score: &f})
}

func (r *runner) routeStep(s *cstep) (*ending, error) {
	queue := ""
	for j, c := range s.route {
		if c.when == nil {
			queue = c.queue
			break
		}
		ok, err := c.when.evalBool(r.ctx, r.act)
		if err != nil {
			return r.stepFailed(s, Event{}, fmt.Errorf("route[%d].when: %w", j, err))
		}
		if ok {
			queue = c.queue
			break
		}
	}
	if queue == "" {
		r.save(s.saveAs, nil)
	} else {
		r.save(s.saveAs, queue)
	}
	return nil, r.emit(Event{Action: s.action, Kind: KindRoute, Status: StatusOK, Queue: queue})
}

// setStep evaluates every value against the state before the step, then
// assigns them all.
func (r *runner) setStep(s *cstep) (*ending, error) {
	v, err := s.set.eval(r.ctx, r.act)
	if err != nil {
		return r.stepFailed(s, Event{}, fmt.Errorf("set.%w", err))
	}
	vals := v.(map[string]any)
	raw, err := json.Marshal(vals)
	if err != nil {
		return r.stepFailed(s, Event{}, fmt.Errorf("set: %w", err))
	}
	for k, val := range vals {
		r.save(k, val)
	}
	return nil, r.emit(Event{Action: s.action, Kind: KindSet, Status: StatusOK, Result: raw})
}

func (r *runner) finishStep(s *cstep) (*ending, error) {
	outcome := s.finLit
	if s.finExpr != nil {
		out, err := s.finExpr.evalString(r.ctx, r.act)
		if err != nil {
			return r.stepFailed(s, Event{}, err)
		}
		if !IsSlug(out) {
			return r.stepFailed(s, Event{}, fmt.Errorf("outcome %q is not a slug", out))
		}
		outcome = out
	}
	if err := r.emit(Event{Action: s.action, Kind: KindFinish, Status: StatusOK, Outcome: outcome}); err != nil {
		return nil, err
	}
	return &ending{outcome: outcome, agent: true}, nil
}

// approveStep asks for a decision: it emits the waiting_approval event,
// then the decision's event, or pauses the run when there is none yet.
func (r *runner) approveStep(s *cstep) (*ending, error) {
	a := s.approve
	if a.when != nil {
		ok, err := a.when.evalBool(r.ctx, r.act)
		if err != nil {
			return r.stepFailed(s, Event{}, fmt.Errorf("approve.when: %w", err))
		}
		if !ok {
			return nil, nil
		}
	}
	reason := ""
	if a.reason != nil {
		var err error
		if reason, err = a.reason.evalString(r.ctx, r.act); err != nil {
			return r.stepFailed(s, Event{}, fmt.Errorf("approve.reason: %w", err))
		}
	}
	if err := r.emit(Event{Action: s.action, Kind: KindApprove, Status: StatusWaitingApproval, Reason: reason}); err != nil {
		return nil, err
	}
	d, err := r.env.Approve(r.ctx, r.step, ApprovalRequest{Action: s.action, Reason: reason, ApproverScope: a.scope,
		Timeout: a.timeout, OnTimeout: a.onTimeout, AllowSelf: a.allowSelf})
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, r.ctx.Err()
		}
		return nil, fmt.Errorf("approval at step %d: %w", r.step, err)
	}
	ev := Event{Action: s.action, Kind: KindApprove, Status: d.Status, Result: d.Result, Reason: reason}
	switch d.Status {
	case StatusWaitingApproval:
		return &ending{waiting: true}, nil
	case StatusApproved, StatusUnrecorded:
		return nil, r.emit(ev)
	case StatusDenied:
		ev.Error = "the approval was denied"
		if err := r.emit(ev); err != nil {
			return nil, err
		}
		if s.continueDenied {
			return nil, nil
		}
		return &ending{outcome: OutcomeDenied, err: fmt.Sprintf("%s (%s): the approval was denied", s.field, s.action)}, nil
	}
	return nil, fmt.Errorf("approval at step %d: unknown decision status %q", r.step, d.Status)
}

func (r *runner) save(name string, v any) {
	r.act.saved[name] = v
}

// callOutcome is what a checked tool call came to.
type callOutcome struct {
	status string
	// value is the decoded result (nil when unrecorded, denied or not JSON).
	value  any
	result json.RawMessage
	errMsg string
	// errCode is the stable cause of an error status (tool.Code*).
	errCode string
	// end is set when the call ends the run.
	end *ending
}

// toolCall checks and makes one call, emitting its step event. The checks,
// in order: the caller's scope, the policy rule of the tool's class,
// max_tool_calls.
// callID is the model's id of the call, for a plan step's.
func (r *runner) toolCall(s *cstep, t target, args map[string]any, callID string) (callOutcome, error) {
	if args == nil {
		args = map[string]any{}
	}
	ev := Event{Action: s.action, Kind: s.kind, Tool: t.tool, Operation: t.op.ID, Args: args}
	if reason := r.refusal(t, args); reason != "" {
		if r.ctx.Err() != nil {
			return callOutcome{}, r.ctx.Err()
		}
		ev.Status, ev.Error = StatusDenied, reason
		out := callOutcome{status: StatusDenied, errMsg: reason}
		if !s.continueDenied {
			out.end = &ending{outcome: OutcomeDenied, err: fmt.Sprintf("%s (%s): %s", s.field, s.action, reason)}
		}
		return out, r.emit(ev)
	}
	if r.calls >= r.maxCalls {
		grant, end, err := r.askBudget(Budget{Limit: LimitToolCalls, Used: int64(r.calls), Allowed: int64(r.maxCalls), Grant: int64(r.baseCalls)})
		if err != nil || end != nil {
			return callOutcome{status: StatusLimitExceeded, end: end}, err
		}
		r.maxCalls += int(grant)
	}
	if r.calls >= r.maxCalls {
		ev.Action, ev.Status = ActionLimitReached, StatusLimitExceeded
		ev.Error = fmt.Sprintf("max_tool_calls (%d) reached", r.maxCalls)
		out := callOutcome{status: StatusLimitExceeded, end: &ending{outcome: OutcomeLimitExceeded, err: ev.Error}}
		return out, r.emit(ev)
	}
	r.calls++
	res, err := r.env.Call(r.ctx, r.step+1, ToolCall{Action: s.action, Tool: t.tool, Operation: t.op.ID, Kind: t.op.Kind, Args: args, CallID: callID})
	if err != nil {
		if r.ctx.Err() != nil {
			return callOutcome{}, r.ctx.Err()
		}
		return callOutcome{}, fmt.Errorf("call %s.%s at step %d: %w", t.tool, t.op.ID, r.step+1, err)
	}
	out := callOutcome{status: res.Status}
	switch res.Status {
	case StatusCancelled:
		// The call may have reached the tool: its step is emitted, then the
		// run stops as its context says.
		ev.Status, ev.Error = StatusCancelled, orDefault(res.Err, "the run stopped while the call was in flight")
		if err := r.emit(ev); err != nil {
			return callOutcome{}, err
		}
		if err := r.ctx.Err(); err != nil {
			return callOutcome{}, err
		}
		return callOutcome{status: StatusCancelled, end: &ending{outcome: OutcomeCancelled, err: ev.Error}}, nil
	case StatusUnrecorded:
		out.result = json.RawMessage("null")
	case StatusOK, StatusError:
		out.result = res.Result
		if len(res.Result) > 0 {
			var err error
			if out.value, err = decodeValue(res.Result); err != nil {
				out.status, out.value = StatusError, nil
				out.errMsg, out.errCode = "the result is not JSON", tool.CodeUpstream
				out.result = nil
			}
		}
		if res.Status == StatusError && out.errMsg == "" {
			out.errMsg = orDefault(res.Err, "the call failed")
		}
		if out.status == StatusError && out.errCode == "" {
			out.errCode = orDefault(res.ErrorCode, tool.CodeInternal)
		}
	default:
		return callOutcome{}, fmt.Errorf("call %s.%s at step %d: unknown result status %q", t.tool, t.op.ID, r.step+1, res.Status)
	}
	ev.Status, ev.Result, ev.Error, ev.ErrorCode = out.status, out.result, out.errMsg, out.errCode
	if out.status == StatusError && !s.continueError {
		out.end = failed("%s (%s): %s.%s: %s", s.field, s.action, t.tool, t.op.ID, out.errMsg)
	}
	return out, r.emit(ev)
}

// refusal says why a call may not be made, or "".
func (r *runner) refusal(t target, args map[string]any) string {
	scopes := r.in.Caller.Scopes
	if !slices.Contains(scopes, "tool:"+t.tool) && !slices.Contains(scopes, "tool:*") {
		return fmt.Sprintf("the caller lacks scope tool:%s", t.tool)
	}
	rule := r.p.policies[t.op.PolicyClass]
	if rule == nil {
		return ""
	}
	r.act.policy = &policyVars{tool: t.tool, operation: t.op.ID, args: exprArgs(args)}
	ok, err := rule.evalBool(r.ctx, r.act)
	r.act.policy = nil
	switch {
	case err != nil:
		return fmt.Sprintf("policy %s failed, so the call is denied: %v", t.op.PolicyClass, err)
	case !ok:
		return fmt.Sprintf("policy %s denied the call", t.op.PolicyClass)
	}
	return ""
}
