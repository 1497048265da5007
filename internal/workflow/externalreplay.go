package workflow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// ExternalReplay asks for a dry run of an external version on a finished
// workflow's record (SPEC §4 "External agents", replay and what-if).
type ExternalReplay struct {
	// ID names the run to the agent (run.id) and its gateway: the
	// replay's id, as the dry run stores no workflow.
	ID string
	// Original is the replayed workflow, with its steps and completions.
	Original    *Workflow
	Steps       []Step
	Completions map[int]json.RawMessage
	Target      *agent.Version
	// LiveLLM relays every completion to the model; otherwise a request
	// identical to the next recorded one gets its answer and any other is
	// refused (unrecorded).
	LiveLLM bool
	// ReadUnrecorded makes a call with no recorded answer live when its
	// operation is a read.
	ReadUnrecorded bool
	// Faults answer the calls they apply to instead of the record (see
	// package fault).
	Faults []fault.Fault
	// Journaled are the live completions an earlier run of this replay
	// kept (a batch resumed after a restart): with LiveLLM, a request
	// identical to a journaled completion of its number gets that answer
	// again rather than the model's second one. Keep, when set,
	// keeps each live completion before the agent reads it.
	Journaled []ReplayCompletion
	Keep      func(context.Context, ReplayCompletion) error
}

// ExternalReplayRun is how an external dry run went.
type ExternalReplayRun struct {
	Outcome, Error, Status string
	Output                 json.RawMessage
	Steps                  []Step
	// Completions are those relayed to the model (LiveLLM), in order.
	Completions []ReplayCompletion
}

// ReplayCompletion is a completion a dry run requested from the model,
// in the form every view reads (and its request's wire-form hash).
type ReplayCompletion struct {
	N, Step       int
	RequestSHA256 string
	Request       *agent.ChatRequest
	Response      agent.ChatResponse
	Cost          *Cost
	// Wire is the exchange as relayed (request and answer as sent, masked
	// as a workflow's completions are), which a resumed batch serves again.
	Wire json.RawMessage
}

// GatewayUnrecorded refuses, in a dry run, a model request with no
// recorded answer.
const GatewayUnrecorded = "unrecorded"

// dryReplay is what an external dry run serves from and keeps.
type dryReplay struct {
	req *ExternalReplay
	// calls are the original's sent calls by key, each served once, and
	// decisions its decided approvals by the key of the call they were
	// asked for, each served once; completions its relayed completions in
	// order, each served once (used).
	calls       map[string][]*Step
	decisions   map[string][]*Step
	completions []recordedWire
	used        []bool
	steps       []Step
	kept        []ReplayCompletion
	// served are the recorded steps whose answers were served, and reads
	// the live reads, by the dry run's step.
	served map[int]*Step
	reads  map[int]tool.CallResult
}

// ReplayExternal runs an external version on a finished workflow's goal
// and context without storing anything: one attempt, whose gateway serves
// the original's recorded answers (calls identical in tool, operation and
// canonical masked arguments, in any order, each once; completions
// identical to a recorded one, each once, the first unused of identical
// ones) and sends nothing else but, as req
// says, completions to the model and reads. A write is never sent. The
// agent is told run.replay {of, dry_run: true}.
func (r *Runner) ReplayExternal(ctx context.Context, req ExternalReplay) (*ExternalReplayRun, error) {
	v, orig := req.Target, req.Original
	if v.External == nil {
		return nil, fmt.Errorf("%s is not an external version", v.Ref())
	}
	g, tools, err := r.governance(ctx, v)
	if err != nil {
		return nil, err
	}
	in := orig.Input()
	if errs := g.ValidateContext(in.Context); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Field + ": " + e.Message
		}
		return &ExternalReplayRun{Outcome: OutcomeFailed, Status: Failed,
			Error: "the target version's inputs refuse the context: " + strings.Join(msgs, "; "), Steps: []Step{}}, nil
	}
	// A batch of dry runs opens no more connections to the agent than
	// its max_concurrency allows, as its workflows do; the agent's time
	// runs from the slot on.
	release, ok := r.versionSlot(ctx, v)
	if !ok {
		return nil, ctx.Err()
	}
	defer release()
	now := r.opts.Now()
	wf := *orig
	wf.ID, wf.Agent, wf.AgentVersion, wf.ReplayOf, wf.Faults = req.ID, v.Name, v.Version, orig.ID, req.Faults
	wf.Status, wf.StartedAt, wf.Deadline = Running, now, now.Add(v.External.RunTimeout())
	d := &dryReplay{req: &req, calls: map[string][]*Step{}, decisions: map[string][]*Step{}, served: map[int]*Step{}, reads: map[int]tool.CallResult{}, steps: []Step{}}
	if err := d.index(); err != nil {
		return nil, problem.Wrap(problem.WorkflowNotReplayable, err, "workflow %s cannot be replayed: %v", orig.ID, err)
	}
	rec := &recorder{r: r, wf: &wf, tools: map[string]*tool.Tool{}, calls: map[int]*callRecord{}, last: now}
	for _, t := range tools {
		rec.tools[t.Name] = t
	}
	if err := rec.masking(ctx); err != nil {
		return nil, err
	}
	x := &externalRun{r: r, wf: &wf, v: v, g: g, rec: rec, in: in, intents: map[int]Intent{}, made: map[string]int{}, lastStepAt: now,
		decided: map[int]*Approval{}, dry: d, budgets: newBudgetState()}
	// A dry run asks nobody: it has the budget the original's decisions
	// granted it, and stops where they denied more.
	for i := range req.Steps {
		if s := &req.Steps[i]; s.Kind == agent.KindApprove && s.Action == agent.ActionBudgetExhausted {
			x.budgets.replay(s)
		}
	}
	ctx, cancel := context.WithDeadline(ctx, wf.Deadline)
	defer cancel()
	out := x.attempt(ctx, 1)
	if out.err != nil {
		if errors.Is(out.err, context.DeadlineExceeded) && ctx.Err() != nil {
			return &ExternalReplayRun{Outcome: OutcomeTimedOut, Status: Failed, Error: "the agent did not answer within its timeout",
				Steps: d.steps, Completions: d.kept}, nil
		}
		return nil, out.err
	}
	_ = x.emitAttempt(1, out.status, out.result, out.code, out.detail)
	res := agent.Result{Outcome: OutcomeFailed, Status: Failed, ErrorCode: out.code, Error: out.detail}
	if out.final != nil {
		res = *out.final
	}
	// The original's output is stored masked: so is the replay's it is
	// compared with.
	res = x.rec.maskResult(res)
	run := &ExternalReplayRun{Outcome: res.Outcome, Status: res.Status, Error: res.Error, Steps: d.steps, Completions: d.kept}
	if res.Output != nil {
		run.Output, _ = json.Marshal(res.Output)
	}
	return run, nil
}

// index reads the original's record: its sent calls, the decisions on
// its calls' approvals (a defined agent's approval steps name no call and
// answer none), and its relayed completions (a defined agent's, recorded
// in their normalized form, are no wire request's and answer none).
func (d *dryReplay) index() error {
	for i := range d.req.Steps {
		s := &d.req.Steps[i]
		into := d.calls
		switch {
		case s.Kind == agent.KindApprove && s.Operation != "" && (s.Status == agent.StatusApproved || s.Status == agent.StatusDenied):
			into = d.decisions
		case !s.Sent || s.Operation == "" || (s.Status != agent.StatusOK && s.Status != agent.StatusError):
			continue
		}
		if len(s.Args) > 0 {
			if _, err := jcs.Transform(s.Args); err != nil {
				return fmt.Errorf("step %d: the recorded args are not JSON", s.Step)
			}
		}
		key := callKey(s.Tool, s.Operation, s.Args)
		into[key] = append(into[key], s)
	}
	for n := 1; n <= len(d.req.Completions); n++ {
		if rc, ok := decodeWireCompletion(d.req.Completions[n]); ok {
			d.completions = append(d.completions, rc)
		}
	}
	return nil
}

// emitDry keeps a dry run's step: nothing is stored or audited.
func (x *externalRun) emitDry(ev agent.Event, attempt int) {
	x.step++
	ev.Step = x.step
	s, _ := x.rec.step(ev)
	s.Attempt = attempt
	if rec := x.dry.served[ev.Step]; rec != nil {
		s.Request, s.HTTPStatus = rec.Request, rec.HTTPStatus
	}
	if sent, ok := x.dry.reads[ev.Step]; ok {
		s.Request, _ = json.Marshal(sent.Request)
		s.HTTPStatus, s.Attempts, s.Sent = sent.Status, sent.Attempts, sent.Attempts > 0
	}
	x.dry.steps = append(x.dry.steps, *s)
}

// serveDry makes one exchange of a dry run.
func (x *externalRun) serveDry(ctx context.Context, a *attemptGateway, ex *exchange) error {
	switch ex.kind {
	case agent.KindCompletion:
		resp, err := x.completeDry(ctx, ex)
		ex.answer = resp
		return err
	case agent.KindCall:
		ans, err := x.callDry(ctx, a, ex)
		ex.call = ans
		return err
	}
	return nil
}

// completeDry serves a model request of a dry run: the answer of a
// recorded completion whose request is identical (recorded), else
// unrecorded; with LiveLLM, relayed to the model and kept.
func (x *externalRun) completeDry(ctx context.Context, ex *exchange) (*llm.RelayResponse, error) {
	d := x.dry
	var head requestHead
	if err := json.Unmarshal(ex.body, &head); err != nil || head.Model == "" {
		return nil, &GatewayError{Status: http.StatusBadRequest, Code: GatewayInvalidRequest, Message: "the request body is not a JSON object naming a model"}
	}
	key, err := x.requestKey(ex)
	if err != nil {
		return nil, err
	}
	ev := agent.Event{Action: ActionCompletion, Kind: agent.KindCompletion, Model: head.Model}
	refuse := func(no *refusal) (*llm.RelayResponse, error) {
		ev.Status, ev.Error, ev.ErrorCode = agent.StatusError, no.msg, no.errCode()
		if no.code == GatewayLimitExceeded {
			ev.Action, ev.Status = agent.ActionTokenLimitReached, agent.StatusLimitExceeded
			x.limited = no.msg
		}
		x.emitDry(ev, 1)
		return nil, &GatewayError{Status: no.status, Code: no.code, Message: no.msg}
	}
	if no := x.admit(head.Model); no != nil {
		return refuse(no)
	}
	if !d.req.LiveLLM {
		if rc := d.recorded(key); rc != nil {
			for _, e := range rc.answer.Events {
				if err := ex.send(e); err != nil || ctx.Err() != nil {
					break
				}
			}
			ev.Status = agent.StatusOK
			if _, answer, err := llm.Normalize(rc.api, ex.body, rc.answer); err == nil {
				ev.Usage, ev.FinishReason = answer.Usage, answer.FinishReason
				if answer.Usage != nil {
					x.tokens += answer.Usage.Total()
				}
			}
			x.emitDry(ev, 1)
			return rc.answer, nil
		}
		const why = "no recorded completion answers this request: a dry run with llm recorded answers only a request identical to one of the original's, each once; replay with llm live to ask the model"
		ev.Status, ev.Error = agent.StatusUnrecorded, why
		x.emitDry(ev, 1)
		return nil, &GatewayError{Status: http.StatusBadRequest, Code: GatewayUnrecorded, Message: why}
	}
	if c, ok := d.journaled(key); ok {
		// Asked and answered before the batch was interrupted: the
		// answer is served again, and was counted in usage then.
		for _, e := range c.answer.Events {
			if err := ex.send(e); err != nil || ctx.Err() != nil {
				break
			}
		}
		ev.Status, ev.Usage, ev.FinishReason = agent.StatusOK, c.Response.Usage, c.Response.FinishReason
		if c.Response.Usage != nil {
			x.tokens += c.Response.Usage.Total()
		}
		c.Step = x.step + 1
		d.kept = append(d.kept, c.ReplayCompletion)
		x.emitDry(ev, 1)
		return c.answer, nil
	}
	m, resp, no, err := x.relayLive(ctx, ex, head.Model, nil)
	switch {
	case no != nil && resp != nil:
		// Cut short: its tokens count, in the tenant's usage and the dry
		// run's max_llm_tokens, as an answer's do.
		usage := resp.Usage
		if err := x.r.countUsage(ctx, x.wf.Tenant, x.wf.Agent, m, usage); err != nil {
			return nil, err
		}
		x.tokens += usage.Total()
		ev.Status, ev.Error, ev.ErrorCode, ev.Usage = agent.StatusError, no.msg+countedOf(resp), no.errCode(), &usage
		x.emitDry(ev, 1)
		return nil, &GatewayError{Status: no.status, Code: no.code, Message: no.msg}
	case no != nil:
		return refuse(no)
	case err != nil && resp != nil:
		// Stopped while the model answered: its tokens count in the
		// tenant's usage all the same.
		x.r.countAfterStop(ctx, x.wf, m, resp.Usage)
		x.tokens += resp.Usage.Total()
		x.emitDry(stoppedCompletion(ctx, ev, resp), 1)
		return nil, err
	case err != nil:
		return nil, err
	}
	if resp.Status != http.StatusOK {
		ev.Status, ev.ErrorCode = agent.StatusError, agent.ErrorCodeLLM
		ev.Error = x.providerError(ex.api, resp)
		x.emitDry(ev, 1)
		return resp, nil
	}
	// The usage record and the journal's are written at once: the agent
	// waits for both, one commit's time rather than two.
	counted := make(chan error, 1)
	go func() { counted <- x.r.countUsage(ctx, x.wf.Tenant, x.wf.Agent, m, resp.Usage) }()
	usage := resp.Usage
	x.tokens += usage.Total()
	ev.Status, ev.Usage, ev.FinishReason = agent.StatusOK, &usage, resp.FinishReason
	c := ReplayCompletion{N: len(d.kept) + 1, Step: x.step + 1, RequestSHA256: key}
	if req, answer, err := llm.Normalize(ex.api, ex.body, resp); err == nil {
		c.Request, c.Response = &req, answer
	}
	if m.Price != nil {
		c.Cost = &Cost{Amount: m.Price.Cost(usage.InputTokens, usage.OutputTokens), Currency: priceCurrency(m)}
	}
	var kept error
	if d.req.Keep != nil {
		wire, _ := json.Marshal(wireOf(ex, resp))
		c.Wire = x.rec.maskJSON(wire)
		if err := d.req.Keep(ctx, c); err != nil {
			kept = fmt.Errorf("journal completion %d: %w", c.N, err)
		}
		c.Wire = nil
	}
	if err := errors.Join(<-counted, kept); err != nil {
		return nil, err
	}
	d.kept = append(d.kept, c)
	x.emitDry(ev, 1)
	return resp, nil
}

// journaledAnswer is a journaled completion and its answer on the wire.
type journaledAnswer struct {
	ReplayCompletion
	answer *llm.RelayResponse
}

// recorded takes the first unused recorded completion whose request is
// identical (key) to the one asked, or nil. Identical requests are served
// in their order, others in any: an agent may ask the model twice at once
// (parallel branches of a graph, agents as tools), and its requests then
// reach the gateway in either order.
func (d *dryReplay) recorded(key string) *recordedWire {
	if d.used == nil {
		d.used = make([]bool, len(d.completions))
	}
	for i := range d.completions {
		if !d.used[i] && d.completions[i].key == key {
			d.used[i] = true
			return &d.completions[i]
		}
	}
	return nil
}

// journaled finds the journaled completion numbered next whose request
// is identical (key) to the one asked.
func (d *dryReplay) journaled(key string) (journaledAnswer, bool) {
	n := len(d.kept) + 1
	for _, c := range d.req.Journaled {
		var w wireRecord
		if c.N != n || c.RequestSHA256 != key || len(c.Wire) == 0 || json.Unmarshal(c.Wire, &w) != nil {
			continue
		}
		c.Wire = nil
		return journaledAnswer{ReplayCompletion: c, answer: w.answer()}, true
	}
	return journaledAnswer{}, false
}

func priceCurrency(m *model.Model) string {
	if m.Price.Currency != "" {
		return m.Price.Currency
	}
	return model.DefaultCurrency
}

// callDry serves a tool call of a dry run: the target's policies and
// max_tool_calls apply; a call a fault applies to gets the injected
// answer; a call identical to a recorded one gets its answer; any other
// is unrecorded, or made live when it is a read and ReadUnrecorded is set.
func (x *externalRun) callDry(ctx context.Context, a *attemptGateway, ex *exchange) (CallAnswer, error) {
	d, op := x.dry, ex.op
	ev := agent.Event{Action: ActionCall, Kind: agent.KindCall, Tool: op.Tool, Operation: op.ID, Args: ex.args}
	refuse := func(status, msg string) (CallAnswer, error) {
		ev.Status, ev.Error = status, msg
		if status == agent.StatusLimitExceeded {
			ev.Action = agent.ActionLimitReached
			x.limited = msg
		}
		x.emitDry(ev, a.attempt)
		return CallAnswer{IsError: true, Message: msg}, nil
	}
	if reason := x.g.Refusal(ctx, x.in, op, ex.args); reason != "" {
		return refuse(agent.StatusDenied, "denied: "+reason)
	}
	if n := x.maxCalls(); x.calls >= n {
		return refuse(agent.StatusLimitExceeded, fmt.Sprintf("max_tool_calls (%d) reached: the run may make no more calls", n))
	}
	if in := x.rec.inject(ctx, x.step+1, agent.ToolCall{Tool: op.Tool, Operation: op.ID, Args: ex.args}); in != nil {
		x.calls++
		res := in.CallResult()
		ev.Status, ev.Result, ev.Error, ev.ErrorCode = res.Status, res.Result, res.Err, res.ErrorCode
		x.emitDry(ev, a.attempt)
		return answerOf(res, false), nil
	}
	key := callKey(op.Tool, op.ID, x.rec.maskArgs(op.Tool, ex.args))
	if req := x.g.Approval(ctx, x.in, op, ex.args); req != nil {
		if refusal := x.approveDry(a, op, ex.args, key, req); refusal != nil {
			return *refusal, nil
		}
	}
	if q := d.calls[key]; len(q) > 0 {
		s := q[0]
		d.calls[key] = q[1:]
		x.calls++
		d.served[x.step+1] = s
		res := agent.CallResult{Status: s.Status, Result: s.Result, Err: s.Error, ErrorCode: s.ErrorCode}
		ev.Status, ev.Result, ev.Error, ev.ErrorCode = res.Status, res.Result, res.Err, res.ErrorCode
		x.emitDry(ev, a.attempt)
		return answerOf(res, true), nil
	}
	if d.req.ReadUnrecorded && op.Kind == tool.Read {
		x.calls++
		res, sent, err := x.r.Read(ctx, d.req.Original, agent.ToolCall{Action: ActionCall, Tool: op.Tool, Operation: op.ID, Kind: op.Kind, Args: ex.args})
		if err != nil {
			return CallAnswer{}, err
		}
		if sent.Attempts > 0 {
			d.reads[x.step+1] = sent
		}
		ev.Status, ev.Result, ev.Error, ev.ErrorCode = res.Status, res.Result, res.Err, res.ErrorCode
		x.emitDry(ev, a.attempt)
		if res.Status == agent.StatusUnrecorded {
			return CallAnswer{IsError: true, Message: unrecordedCall(op)}, nil
		}
		return answerOf(res, false), nil
	}
	ev.Status = agent.StatusUnrecorded
	x.emitDry(ev, a.attempt)
	return CallAnswer{IsError: true, Message: unrecordedCall(op)}, nil
}

// approveDry decides, in a dry run, a call that one of the target's
// approvals rules holds, as a defined agent's dry replay decides its
// approval steps: nobody is asked; the decision the original recorded for
// an identical call (tool, operation, canonical masked arguments; each
// decision used once) is served, and a denial refuses the call; with no
// recorded decision the approval step is unrecorded and the call goes on
// as though approved. It returns the refusal, or nil when the call goes on.
func (x *externalRun) approveDry(a *attemptGateway, op agent.GatewayOperation, args map[string]any, key string, req *agent.ApprovalRequest) *CallAnswer {
	d := x.dry
	// As in the live run and a defined agent's replay: the step that
	// asks, then the decision's.
	ev := agent.Event{Action: ActionApproval, Kind: agent.KindApprove, Tool: op.Tool, Operation: op.ID, Args: args,
		Reason: x.rec.maskText(req.Reason), Status: agent.StatusWaitingApproval}
	x.emitDry(ev, a.attempt)
	ev.Status = agent.StatusUnrecorded
	q := d.decisions[key]
	if len(q) == 0 {
		x.emitDry(ev, a.attempt)
		return nil
	}
	rec := q[0]
	d.decisions[key] = q[1:]
	ev.Status, ev.Result = rec.Status, rec.Result
	if rec.Status != agent.StatusDenied {
		x.emitDry(ev, a.attempt)
		return nil
	}
	ev.Error = "the approval was denied"
	x.emitDry(ev, a.attempt)
	// The words the agent read when the original was denied, so that a
	// completion asked after them can be served from the record.
	var by decisionRecord
	_ = json.Unmarshal(rec.Result, &by)
	return &CallAnswer{IsError: true, Message: deniedCall(op, by.DecidedBy)}
}

// unrecordedCall is the result text of a dry run's call that was not made.
func unrecordedCall(op agent.GatewayOperation) string {
	msg := "unrecorded: this is a dry-run replay, and the original run recorded no identical call of " + op.Name + ", so it was not made"
	if op.Kind != tool.Read {
		return msg + " (a dry run never sends a write)"
	}
	return msg
}

// requestKey is the record's identity of a model request: its API and
// its canonical body (agent.CanonicalJSON) as masked, as a definition's completions are hashed
// (RequestHash). The record keeps the answers masked, and so serves them
// to a journal's attempt or a dry run: the request the agent builds from
// them must still be identical to the one the record answered.
func (x *externalRun) requestKey(ex *exchange) (string, error) {
	canon, err := agent.CanonicalJSON(ex.body)
	if err == nil && x.rec.mask != nil {
		// Canonical as sent first: masking re-encodes, and would pass a
		// body with no canonical form (a repeated member).
		if masked := x.rec.maskJSON(ex.body); !bytes.Equal(masked, ex.body) {
			canon, err = agent.CanonicalJSON(masked)
		}
	}
	if err != nil {
		return "", &GatewayError{Status: http.StatusBadRequest, Code: GatewayInvalidRequest, Message: "the request body is not canonicalizable JSON: " + err.Error()}
	}
	return wireKey(ex.api, canon), nil
}

// wireKey is the record's identity of a relayed request: its API and
// canonical body.
func wireKey(api string, canon []byte) string {
	sum := sha256.Sum256(append([]byte(api+"\n"), canon...))
	return hex.EncodeToString(sum[:])
}

// replayInfo is an invocation's run.replay: the original, and whether
// this is a dry run.
func (x *externalRun) replayInfo() map[string]any {
	if x.wf.ReplayOf == "" {
		return nil
	}
	return map[string]any{"of": x.wf.ReplayOf, "dry_run": x.dry != nil}
}
