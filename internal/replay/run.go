package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// History is what a finished workflow recorded: the workflow itself (its
// goal, context, caller, limits and outcome), its steps, and its LLM
// completions by number.
type History struct {
	Workflow    *workflow.Workflow      `json:"workflow"`
	Steps       []workflow.Step         `json:"steps"`
	Completions map[int]json.RawMessage `json:"completions,omitempty"`
}

// ErrBadHistory refuses a history that cannot have been recorded as it is.
var ErrBadHistory = errors.New("the workflow's history is inconsistent")

// Run is how a replay of a history went.
type Run struct {
	Outcome string
	// Error says why the replay failed, when it did.
	Error string
	Steps []workflow.Step
	// Status and Output are the run's final status and output value.
	Status string
	Output json.RawMessage
	// Completions are those requested live, in order (none from the record).
	Completions []Completion
}

// Live is what a replay needs beyond its history when it is not served
// from the record alone.
type Live struct {
	Mode Mode
	// Tenant and Agent are whose usage live completions count toward: the
	// workflow's tenant and the target version's agent.
	Tenant, Agent string
	// Models requests completions when Mode.LLM is live.
	Models Models
	// Reader makes unrecorded reads when Mode.UnrecordedCalls is read.
	Reader Reader
	// Journal, when set, keeps each live completion as it arrives and
	// serves those kept by an earlier attempt.
	Journal Journal
	// Mask, when set, masks calls and requests before they are compared
	// with a masked history.
	Mask Masking
	// Faults answer the calls they apply to instead of the record (see
	// package fault), decided by the history's workflow id and the step.
	Faults []fault.Fault
}

// Masking masks what a replay compares with a history whose values were
// masked (docs/redaction.md): a call's arguments and a completion's
// request, the way the original workflow masked them before storing.
type Masking interface {
	Args(tool string, args map[string]any) map[string]any
	RequestHash(req agent.ChatRequest) (string, error)
}

// DryRun runs prog on the history's goal, context, caller scopes and
// max_tool_calls, serving every tool call and completion from the record
// (see Env) and making no other. A context that the program's inputs
// refuse ends the replay failed without a step. Only ctx's end makes it
// return an error.
func DryRun(ctx context.Context, prog *agent.Program, h *History) (*Run, error) {
	return Rerun(ctx, prog, h, nil)
}

// Rerun is DryRun, except that live, when set, says which completions and
// unrecorded reads are requested now (see Env).
func Rerun(ctx context.Context, prog *agent.Program, h *History, live *Live) (*Run, error) {
	env, err := NewEnv(h)
	if err != nil {
		return nil, err
	}
	if err := env.goLive(ctx, live); err != nil {
		return nil, err
	}
	in := h.Workflow.Input()
	if errs := prog.ValidateContext(in.Context); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Field + ": " + e.Message
		}
		return &Run{Outcome: agent.OutcomeFailed, Error: "the target version's inputs refuse the context: " + strings.Join(msgs, "; "),
			Steps: []workflow.Step{}}, nil
	}
	run := prog.Run(ctx, in, env)
	out := &Run{Steps: []workflow.Step{}}
	for ev, err := range run.Events() {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break // the result says why
		}
		out.Steps = append(out.Steps, env.step(ev))
	}
	res := run.Result()
	out.Outcome, out.Error, out.Status, out.Completions = res.Outcome, res.Error, res.Status, env.kept
	if res.Output != nil {
		if b, err := json.Marshal(res.Output); err == nil {
			out.Output = b
		}
	}
	return out, nil
}

// Env serves a replay from a history: a call one of the replay's faults
// applies to gets the injected answer (see package fault); a tool call
// identical to a recorded one that was sent (tool, operation and
// canonical arguments, workflow.CanonicalJSON) gets the recorded answer
// and status, repeats consumed in recorded order; any other call is not
// made and comes back unrecorded. A completion is served
// only to a request whose canonical hash is the recorded one's; a
// completion recorded before requests were hashed is served by its number.
// Live (see goLive), every completion is requested from the models instead,
// and a read with no recorded answer may be made.
type Env struct {
	wf   *workflow.Workflow
	live *Live
	// mask, when set, masks calls and requests before they are compared
	// with the record.
	mask Masking
	// journaled are the completions an earlier attempt kept, by number and
	// request hash; kept are this run's live completions, in order.
	journaled map[string]Completion
	kept      []Completion
	// reads are the live reads made, by step.
	reads       map[int]tool.CallResult
	calls       map[string][]*workflow.Step
	completions map[string][]recordedAnswer
	// served are the recorded steps whose answers were served, by the
	// replay's step number.
	served map[int]*workflow.Step
	// args are the canonical arguments of the calls asked for, by step.
	args map[int]json.RawMessage
	// decisions are the recorded approval decisions by action, in order.
	decisions map[string][]*workflow.Step
	// faults are the replay's faults; injected what they answered, by step.
	faults   *fault.Plan
	injected map[int]*fault.Injected
}

// Check refuses a history that cannot have been recorded: steps numbered
// other than 1..N, a sent call whose arguments are not a JSON object or
// whose result is not JSON, completions not numbered 1..N.
func (h *History) Check() error {
	if h.Workflow == nil {
		return errors.New("the history has no workflow")
	}
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Step != i+1 {
			return fmt.Errorf("step numbers must run 1..%d in order: position %d holds step %d", len(h.Steps), i+1, s.Step)
		}
		if s.Operation == "" {
			continue
		}
		if len(s.Args) > 0 && !isObject(s.Args) {
			return fmt.Errorf("step %d: args are not a JSON object", s.Step)
		}
		if len(s.Result) > 0 && !json.Valid(s.Result) {
			return fmt.Errorf("step %d: the recorded result is not JSON", s.Step)
		}
	}
	for n := range h.Completions {
		if n < 1 || n > len(h.Completions) {
			return fmt.Errorf("completions must be numbered 1..%d: found %d", len(h.Completions), n)
		}
	}
	return nil
}

// isObject reports whether raw is one valid JSON object, without decoding it.
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(raw)
}

// NewEnv checks a history and indexes its sent calls and its completions.
func NewEnv(h *History) (*Env, error) {
	if err := h.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadHistory, err)
	}
	e := &Env{wf: h.Workflow, reads: map[int]tool.CallResult{}, calls: map[string][]*workflow.Step{}, completions: map[string][]recordedAnswer{}, served: map[int]*workflow.Step{},
		args: map[int]json.RawMessage{}, decisions: map[string][]*workflow.Step{}, injected: map[int]*fault.Injected{}}
	var completionSteps []*workflow.Step // the n-th is completion n's
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Kind == agent.KindCompletion {
			completionSteps = append(completionSteps, s)
		}
		if s.Kind == agent.KindApprove && (s.Status == agent.StatusApproved || s.Status == agent.StatusDenied) {
			e.decisions[s.Action] = append(e.decisions[s.Action], s)
			continue
		}
		if !s.Sent || s.Operation == "" || (s.Status != agent.StatusOK && s.Status != agent.StatusError) {
			continue
		}
		key, err := recordedKey(s)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", s.Step, err)
		}
		e.calls[key] = append(e.calls[key], s)
	}
	for n := 1; n <= len(h.Completions); n++ {
		rc, err := agent.DecodeCompletion(h.Completions[n])
		if err != nil {
			return nil, fmt.Errorf("completion %d: %w", n, err)
		}
		key := rc.RequestSHA256
		if key == "" {
			key = "#" + strconv.Itoa(n)
		}
		a := recordedAnswer{resp: rc.Response}
		if n <= len(completionSteps) && completionSteps[n-1].Status == agent.StatusCancelled {
			a = recordedAnswer{stopped: stoppedAt(completionSteps[n-1])}
		}
		e.completions[key] = append(e.completions[key], a)
	}
	return e, nil
}

// recordedAnswer is how a recorded completion is served: its response, or,
// for one the run's stop cut short (its step cancelled), that stop, so the
// replay ends cancelled where the run did.
type recordedAnswer struct {
	resp    agent.ChatResponse
	stopped *agent.StoppedError
}

// stoppedAt is the stop of a cancelled completion step: its tokens and
// its words.
func stoppedAt(s *workflow.Step) *agent.StoppedError {
	stopped := &agent.StoppedError{Reason: s.Error}
	if s.Usage != nil {
		stopped.Usage = *s.Usage
	}
	return stopped
}

// recordedKey is the agent.ToolCall key of a recorded step.
func recordedKey(s *workflow.Step) (string, error) {
	args, err := workflow.CanonicalJSON(s.Args)
	if err != nil {
		return "", fmt.Errorf("recorded args: %w", err)
	}
	return agent.CallKey(s.Tool, s.Operation, args), nil
}

// Call implements agent.ToolCaller.
func (e *Env) Call(ctx context.Context, step int, c agent.ToolCall) (agent.CallResult, error) {
	compared := c.Args
	if e.mask != nil {
		compared = e.mask.Args(c.Tool, c.Args)
	}
	args, err := agent.CanonicalArgs(compared)
	if err != nil {
		return agent.CallResult{}, err
	}
	e.args[step] = args
	if in := e.faults.Inject(ctx, step, c.Tool, c.Operation, c.Args); in != nil {
		// The recorded answer stays for a later identical call.
		e.injected[step] = &in.Injected
		return in.CallResult(), nil
	}
	key := agent.CallKey(c.Tool, c.Operation, args)
	q := e.calls[key]
	if len(q) == 0 {
		if l := e.live; l != nil && l.Mode.UnrecordedCalls == UnrecordedRead && l.Reader != nil && c.Kind == tool.Read {
			res, sent, err := l.Reader.Read(ctx, e.wf, c)
			if err != nil {
				return agent.CallResult{}, err
			}
			if sent.Attempts > 0 {
				e.reads[step] = sent
			}
			return res, nil
		}
		return agent.CallResult{Status: agent.StatusUnrecorded}, nil
	}
	s := q[0]
	e.calls[key] = q[1:]
	e.served[step] = s
	return agent.CallResult{Status: s.Status, Result: s.Result, Err: s.Error, ErrorCode: s.ErrorCode}, nil
}

// goLive makes e request what live says, loading the completions its
// journal kept.
func (e *Env) goLive(ctx context.Context, live *Live) error {
	if live == nil {
		return nil
	}
	e.live, e.mask = live, live.Mask
	var errs []problem.FieldError
	if e.faults, errs = fault.Compile("faults", e.wf.ID, live.Faults); len(errs) > 0 {
		return problem.Validation(errs...)
	}
	if live.Mode.Live() && live.Models == nil {
		return errors.New("live replays need the server's model service, and this server has none")
	}
	if live.Journal == nil {
		return nil
	}
	kept, err := live.Journal.Journaled(ctx)
	if err != nil {
		return err
	}
	e.journaled = make(map[string]Completion, len(kept))
	for _, c := range kept {
		e.journaled[journalKey(c.N, c.RequestSHA256)] = c
	}
	return nil
}

func journalKey(n int, hash string) string { return strconv.Itoa(n) + "/" + hash }

// Complete implements agent.Completer.
func (e *Env) Complete(ctx context.Context, step, n int, req agent.ChatRequest) (agent.ChatResponse, error) {
	hash, err := e.requestHash(req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	if e.live != nil && e.live.Mode.Live() {
		return e.completeLive(ctx, step, n, hash, req)
	}
	for _, key := range []string{hash, "#" + strconv.Itoa(n)} {
		if q := e.completions[key]; len(q) > 0 {
			e.completions[key] = q[1:]
			if q[0].stopped != nil {
				return agent.ChatResponse{}, q[0].stopped
			}
			return q[0].resp, nil
		}
	}
	return agent.ChatResponse{}, agent.ErrUnrecorded
}

// completeLive serves a completion the journal kept, or requests it and
// journals it before it is used.
func (e *Env) completeLive(ctx context.Context, step, n int, hash string, req agent.ChatRequest) (agent.ChatResponse, error) {
	key := journalKey(n, hash)
	if c, ok := e.journaled[key]; ok {
		delete(e.journaled, key)
		e.kept = append(e.kept, c)
		return c.Response, nil
	}
	resp, cost, err := e.live.Models.Complete(ctx, e.live.Tenant, e.live.Agent, step, n, req)
	if err != nil {
		return resp, err
	}
	// The engine goes on appending to the conversation: keep this one.
	req.Messages, req.Tools = slices.Clone(req.Messages), slices.Clone(req.Tools)
	c := Completion{N: n, Step: step, RequestSHA256: hash, Request: &req, Response: resp, Cost: cost}
	if e.live.Journal != nil {
		if err := e.live.Journal.Keep(ctx, c); err != nil {
			return agent.ChatResponse{}, fmt.Errorf("journal completion %d: %w", n, err)
		}
	}
	e.kept = append(e.kept, c)
	return resp, nil
}

// Approve implements agent.Approver: the next decision recorded for the
// same action is served; with none the step is unrecorded and the replay
// goes on as though approved.
func (e *Env) Approve(_ context.Context, step int, req agent.ApprovalRequest) (agent.Decision, error) {
	q := e.decisions[req.Action]
	if len(q) == 0 {
		return agent.Decision{Status: agent.StatusUnrecorded}, nil
	}
	e.decisions[req.Action] = q[1:]
	return agent.Decision{Status: q[0].Status, Result: q[0].Result}, nil
}

// step is the replay step of an event; a served call shows the recorded
// request and status it was answered with.
func (e *Env) step(ev agent.Event) workflow.Step {
	s := workflow.Step{
		Seq: ev.Step, Step: ev.Step, Action: ev.Action, Kind: ev.Kind, Status: ev.Status,
		Tool: ev.Tool, Operation: ev.Operation, Score: ev.Score, Queue: ev.Queue, Outcome: ev.Outcome,
		Result: ev.Result, Error: ev.Error, ErrorCode: ev.ErrorCode, Reason: ev.Reason, Model: ev.Model, FinishReason: ev.FinishReason,
	}
	if a, ok := e.args[ev.Step]; ok {
		s.Args = a
	} else if ev.Args != nil {
		s.Args, _ = json.Marshal(ev.Args)
	}
	if rec := e.served[ev.Step]; rec != nil {
		s.Request, s.HTTPStatus = rec.Request, rec.HTTPStatus
	}
	if sent, ok := e.reads[ev.Step]; ok {
		s.Request, _ = json.Marshal(sent.Request)
		s.HTTPStatus, s.Attempts, s.Sent = sent.Status, sent.Attempts, true
	}
	if in := e.injected[ev.Step]; in != nil {
		s.Injected, s.HTTPStatus = in, in.Status
	}
	return s
}

// requestHash is the hash a completion of req is recorded under.
func (e *Env) requestHash(req agent.ChatRequest) (string, error) {
	if e.mask != nil {
		return e.mask.RequestHash(req)
	}
	return req.Hash()
}
