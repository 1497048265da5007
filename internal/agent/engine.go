package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Step statuses.
const (
	StatusOK            = "ok"
	StatusError         = "error"
	StatusDenied        = "denied"
	StatusLimitExceeded = "limit_exceeded"
	StatusUnrecorded    = "unrecorded"
	// StatusCancelled is a call that was sent and cut short as the run
	// stopped (cancelled or past its deadline): it may have reached the
	// tool, and no answer was received. A completion whose answer the
	// run's stop cut short (a plan step's, an external agent's) has it
	// too, with the tokens the model produced.
	StatusCancelled = "cancelled"
	// An approve step emits StatusWaitingApproval when it asks for a
	// decision, then the decision: StatusApproved or StatusDenied (or
	// StatusUnrecorded in a replay without one).
	StatusWaitingApproval = "waiting_approval"
	StatusApproved        = "approved"
)

// Engine outcomes; any other outcome is the agent's own slug.
const (
	OutcomeFailed        = "failed"
	OutcomeDenied        = "denied"
	OutcomeLimitExceeded = "limit_exceeded"
	OutcomeCancelled     = "cancelled"
	OutcomeTimedOut      = "timed_out"
	// OutcomeCompleted is the outcome of a definition without `outcome`
	// whose steps run out without a finish.
	OutcomeCompleted = "completed"
)

// Workflow statuses of a finished run.
const (
	WorkflowCompleted = "completed"
	WorkflowFailed    = "failed"
	WorkflowCancelled = "cancelled"
	// WorkflowWaiting is the status of a run paused at an approve step
	// without a decision: it has not ended, it waits.
	WorkflowWaiting = "waiting"
)

// WorkflowStatus maps an outcome to the workflow's final status: failed and
// timed_out are failed, cancelled is cancelled, every other outcome (the
// agent's own, denied, limit_exceeded) is completed.
func WorkflowStatus(outcome string) string {
	switch outcome {
	case OutcomeFailed, OutcomeTimedOut:
		return WorkflowFailed
	case OutcomeCancelled:
		return WorkflowCancelled
	}
	return WorkflowCompleted
}

// DefaultMaxToolCalls applies when Input.MaxToolCalls is 0.
const DefaultMaxToolCalls = 20

// Caller is who invoked the agent; their scopes decide which tools it may call.
type Caller struct {
	Sub    string
	Tenant string
	Scopes []string
}

// Input is one invocation.
type Input struct {
	Goal         string
	Context      map[string]any
	Caller       Caller
	MaxToolCalls int
	// MaxLLMTokens bounds the run's tokens (input + output) over all its
	// completions; 0 is no bound.
	MaxLLMTokens int64
	// OnExhausted is the invocation's on_exhausted (OnExhaustedFail or
	// OnExhaustedAsk); "" for the definition's limits.on_exhausted.
	OnExhausted string
	Agent       string
	Version     string
}

// Event is one emitted step.
type Event struct {
	// Step numbers emitted steps from 1.
	Step      int             `json:"step"`
	Action    string          `json:"action"`
	Kind      string          `json:"kind"`
	Status    string          `json:"status"`
	Tool      string          `json:"tool,omitempty"`
	Operation string          `json:"operation,omitempty"`
	Args      map[string]any  `json:"args,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Score     *float64        `json:"score,omitempty"`
	Queue     string          `json:"queue,omitempty"`
	Outcome   string          `json:"outcome,omitempty"`
	Error     string          `json:"error,omitempty"`
	// Reason is why an approve step asks for a decision.
	Reason string `json:"reason,omitempty"`
	// A completion's event (kind completion) names the model and carries
	// the provider's token counts and finish reason.
	Model string `json:"model,omitempty"`
	*Usage
	FinishReason string `json:"finish_reason,omitempty"`
	// ErrorCode is the stable cause of an error status (llm_error).
	ErrorCode string `json:"error_code,omitempty"`
}

// Result is how a run ended.
type Result struct {
	Outcome string `json:"outcome"`
	Status  string `json:"status"`
	// Output is the `output` expression's value (JSON-compatible), set only
	// when the run ends with the agent's own outcome.
	Output any `json:"output,omitempty"`
	// Error says why a run failed, was denied or hit a limit.
	Error string `json:"error,omitempty"`
	// ErrorCode is the stable cause of a failure (see workflow's
	// ErrorCode constants); empty for an ordinary step failure.
	ErrorCode string `json:"error_code,omitempty"`
	Steps     int    `json:"steps"`
	ToolCalls int    `json:"tool_calls"`
	// Usage is the tokens of the run's completions; Completions counts
	// the completions answered, and the one the run's stop cut short.
	Usage       Usage `json:"usage"`
	Completions int   `json:"completions"`
}

// ToolCall is a call the engine asks Env to make.
type ToolCall struct {
	Action    string
	Tool      string
	Operation string
	// Kind is the operation's kind (read or write).
	Kind string
	// Args are the evaluated arguments, JSON-compatible values; the event
	// shares them, so an Env must not modify them.
	Args map[string]any
	// CallID is the model's id of a call a plan step makes ("" for a call step's).
	CallID string
	// IdempotencyKey, when set, is the key a write carries instead of one
	// made from the call's step (an external agent's calls are keyed by
	// the call and its occurrence, so that a call repeated by a new
	// attempt carries the same key).
	IdempotencyKey string
	// CallDigest, set for an external agent's call, is kept with an
	// unrepeatable write's intent: which call may have been sent.
	CallDigest string
}

// CallResult is Env's answer to a ToolCall. Status is StatusOK,
// StatusError, StatusUnrecorded or StatusCancelled (the call was sent and
// the run's context ended before its answer: the step is emitted and the
// run stops); Result is JSON (ignored when unrecorded or cancelled); Err
// describes an error or cancelled result.
type CallResult struct {
	Status string
	Result json.RawMessage
	Err    string
	// ErrorCode is the stable cause of an error status (tool.Code*).
	ErrorCode string
}

// ToolCaller makes tool calls. step is the number of the step event the
// call will produce. A returned error means the call could not be made or
// recorded at all (not an error response from the tool, which is a
// CallResult with StatusError): the run ends failed and the iterator yields
// the error.
type ToolCaller interface {
	Call(ctx context.Context, step int, c ToolCall) (CallResult, error)
}

// Completer answers chat completions for plan steps. step is the number of
// the step event the completion will produce; n numbers the completions of
// a run from 1. An *LLMError is the model's failure (the step fails with
// error_code llm_error); a *BudgetError stops the run limit_exceeded before
// anything is requested; a *StoppedError is a completion the run's stop
// cut short (its step is emitted, cancelled, and the run stops);
// ErrUnrecorded ends the plan step in a replay; any other error ends the
// run failed.
type Completer interface {
	Complete(ctx context.Context, step, n int, req ChatRequest) (ChatResponse, error)
}

// LLMError is a model's failure to give a completion: the provider's
// status (0 when it never answered) and its own words, never a secret.
type LLMError struct {
	Status  int
	Message string
}

func (e *LLMError) Error() string {
	if e.Status == 0 {
		return e.Message
	}
	return fmt.Sprintf("the model answered %d: %s", e.Status, e.Message)
}

// BudgetError is a Completer's refusal to request a completion that would
// start past a token budget (the model's daily budget for the tenant).
type BudgetError struct {
	Reason string
}

func (e *BudgetError) Error() string { return e.Reason }

// StoppedError is a Completer's answer when the run's stop (its context's
// end) cut short a completion the model was making: Usage is the tokens
// it cost, and Reason says why and how they were counted. The plan step
// emits the completion's event with status cancelled and that usage, then
// the run stops as its context says.
type StoppedError struct {
	Usage  Usage
	Reason string
}

func (e *StoppedError) Error() string { return e.Reason }

// ApprovalRequest is what an approve step asks of its approvers.
type ApprovalRequest struct {
	Action        string
	Reason        string
	ApproverScope string
	Timeout       time.Duration
	// OnTimeout is DecisionApprove or DecisionDeny.
	OnTimeout string
	AllowSelf bool
	// Budget, when set, is the spent budget the approval would grant more
	// of (action ActionBudgetExhausted).
	Budget *Budget
}

// Decision is an Approver's answer. Status is StatusApproved,
// StatusDenied, StatusUnrecorded (a replay without a recorded decision:
// the run goes on as approved) or StatusWaitingApproval (no decision yet:
// the run pauses, and is run again from its history once there is one).
// Result is the decision's record, JSON, shown as the step's result.
type Decision struct {
	Status string
	Result json.RawMessage
}

// Approver answers approve steps. step is the number of the step event
// that asked (status waiting_approval).
type Approver interface {
	Approve(ctx context.Context, step int, req ApprovalRequest) (Decision, error)
}

// Env is everything outside the engine a run needs.
type Env interface {
	ToolCaller
	Completer
	Approver
}

// NewEnv combines a ToolCaller, a Completer and an Approver; a nil
// Completer refuses plan steps with ErrNoPlanner, a nil Approver leaves
// every approve step waiting.
func NewEnv(tools ToolCaller, llm Completer, approver Approver) Env {
	if llm == nil {
		llm = NoPlanner{}
	}
	if approver == nil {
		approver = NoDecisions{}
	}
	return env{tools, llm, approver}
}

type env struct {
	ToolCaller
	Completer
	Approver
}

// NoDecisions is an Approver that has no decision for any step.
type NoDecisions struct{}

// Approve implements Approver.
func (NoDecisions) Approve(context.Context, int, ApprovalRequest) (Decision, error) {
	return Decision{Status: StatusWaitingApproval}, nil
}

// ErrUnrecorded is a Completer's answer when it serves recorded
// completions (a replay) and has none for the request: the plan step emits
// one event with status unrecorded and ends, and the run goes on.
var ErrUnrecorded = errors.New("no recorded completion for this request")

// ErrNoPlanner is returned for plan steps when no LLM is configured.
var ErrNoPlanner = errors.New("plan steps need an LLM endpoint and none is configured")

// NoPlanner is a Completer that refuses every completion with ErrNoPlanner.
type NoPlanner struct{}

// Complete implements Completer.
func (NoPlanner) Complete(context.Context, int, int, ChatRequest) (ChatResponse, error) {
	return ChatResponse{}, ErrNoPlanner
}

// Run is one execution of a program. Range over Events once; Result is
// valid after the iteration ends.
type Run struct {
	r   *runner
	res Result
}

// Run starts an execution of the program. Nothing happens until Events is
// ranged over.
func (p *Program) Run(ctx context.Context, in Input, env Env) *Run {
	return &Run{r: newRunner(ctx, p, in, env), res: Result{Outcome: OutcomeCancelled, Status: WorkflowCancelled}}
}

// Events executes the run, yielding one event per emitted step. A run that
// reaches an approve step its Approver has no decision for pauses after the
// step's waiting_approval event: the iteration ends without an error and
// Result's status is WorkflowWaiting (no outcome). A non-nil
// error is the last thing yielded: the context's error when it is cancelled
// or past its deadline (Result's outcome is then cancelled or timed_out), or
// an Env error (outcome failed). Failures inside the agent (a step's
// expression error, a tool's error response) are not yielded as errors:
// they end the run with outcome failed and Result.Error says why. Stopping
// the iteration early leaves the outcome cancelled.
func (r *Run) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if r.r == nil {
			yield(Event{}, errors.New("agent: a run's events can be ranged over only once"))
			return
		}
		run := r.r
		r.r = nil
		run.yield = yield
		end, err := run.exec()
		if errors.Is(err, errStopped) {
			r.res.Steps, r.res.ToolCalls = run.step, run.calls
			r.res.Usage, r.res.Completions = run.usage, run.completions
			return
		}
		if err != nil {
			end = ending{outcome: OutcomeFailed, err: err.Error()}
			// The run's own context decides: an Env error that merely
			// wraps a deadline of its own (a planner's HTTP time-out) fails.
			switch ctxErr := run.ctx.Err(); {
			case errors.Is(ctxErr, context.DeadlineExceeded):
				end.outcome = OutcomeTimedOut
			case ctxErr != nil:
				end.outcome = OutcomeCancelled
			}
		}
		status := WorkflowStatus(end.outcome)
		if end.waiting {
			status = WorkflowWaiting
		}
		r.res = Result{
			Outcome:     end.outcome,
			Status:      status,
			Output:      end.output,
			Error:       end.err,
			ErrorCode:   end.errCode,
			Steps:       run.step,
			ToolCalls:   run.calls,
			Usage:       run.usage,
			Completions: run.completions,
		}
		if err != nil {
			yield(Event{}, err)
		}
	}
}

// Result returns how the run ended; valid once Events has been ranged over.
func (r *Run) Result() Result { return r.res }

// Execute runs the program to the end and collects its events.
func (p *Program) Execute(ctx context.Context, in Input, env Env) ([]Event, Result, error) {
	run := p.Run(ctx, in, env)
	var events []Event
	for ev, err := range run.Events() {
		if err != nil {
			return events, run.Result(), err
		}
		events = append(events, ev)
	}
	return events, run.Result(), nil
}

// errStopped reports that the consumer stopped ranging.
var errStopped = errors.New("consumer stopped")

// ending is how exec ended: an outcome, its error, and the output.
type ending struct {
	outcome string
	err     string
	// errCode is the stable cause of a failure (ErrorCodeLLM), if any.
	errCode string
	output  any
	// agent reports an outcome of the agent's own, for which output is evaluated.
	agent bool
	// waiting reports a run paused at an approve step: no outcome yet.
	waiting bool
}

func failed(format string, args ...any) *ending {
	return &ending{outcome: OutcomeFailed, err: fmt.Sprintf(format, args...)}
}
