// Package workflow runs agent invocations durably. A workflow's history is an
// append-only list of numbered events; each step event and the tool call it
// made are stored, with their audit records, before the event is sent to
// anyone. A workflow is owned by one replica through a lease; when the owner
// dies, another replica claims it and resumes it after its last recorded step
// by re-running the deterministic agent program against the recorded history.
package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/problem"
)

// ErrLeaseLost is wrapped by Store writes made by an owner that no longer
// holds the workflow's lease (or of a workflow no longer running).
var ErrLeaseLost = errors.New("workflow lease lost")

// Statuses of a workflow.
const (
	Running = "running"
	// Waiting is a workflow paused at an approve step: nobody holds it
	// until a decision (or its timeout) hands it to a replica again.
	Waiting   = "waiting"
	Completed = "completed"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// Engine outcomes (agents add their own slugs).
const (
	OutcomeFailed        = "failed"
	OutcomeDenied        = "denied"
	OutcomeLimitExceeded = "limit_exceeded"
	OutcomeCancelled     = "cancelled"
	OutcomeTimedOut      = "timed_out"
)

// Caller is who invoked a workflow; its scopes decide which tools steps may call.
type Caller struct {
	Sub      string   `json:"sub"`
	ClientID string   `json:"client_id,omitempty"`
	Tenant   string   `json:"tenant"`
	Scopes   []string `json:"scopes"`
}

// Workflow is one invocation of an agent version.
type Workflow struct {
	ID           string          `json:"workflow_id"`
	Tenant       string          `json:"-"`
	Agent        string          `json:"agent"`
	AgentVersion string          `json:"agent_version"`
	Status       string          `json:"status"`
	Outcome      string          `json:"outcome"`
	Goal         string          `json:"goal"`
	Context      json.RawMessage `json:"context"`
	Caller       Caller          `json:"caller"`
	MaxToolCalls int             `json:"max_tool_calls"`
	// MaxLLMTokens bounds the tokens of the workflow's completions (0: the
	// definition's limits.max_llm_tokens, else none).
	MaxLLMTokens int64 `json:"max_llm_tokens,omitempty"`
	// OnExhausted is the invocation's on_exhausted (agent.OnExhaustedFail
	// or agent.OnExhaustedAsk; "": the version's limits.on_exhausted).
	OnExhausted string          `json:"on_exhausted,omitempty"`
	Output      json.RawMessage `json:"output"`
	// Error is the problem document of a failed workflow.
	Error json.RawMessage `json:"error,omitempty"`
	// ToolRevisions is the revision of each tool, by name, that the
	// workflow's program was compiled with: a resume compiles against them.
	ToolRevisions map[string]int `json:"-"`
	// ReplayOf links a real (non-dry-run) replay to the workflow it replays.
	ReplayOf string `json:"replay_of,omitempty"`
	// Faults are the faults a real replay injects into its calls (see
	// package fault), decided by ReplayOf's id and each call's step.
	Faults     []fault.Fault `json:"faults,omitempty"`
	RequestID  string        `json:"request_id,omitempty"`
	TraceID    string        `json:"trace_id,omitempty"`
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt time.Time     `json:"finished_at,omitzero"`
	// Deadline is when the workflow times out.
	Deadline time.Time `json:"-"`
	// Usage sums the workflow's completions as the execution that ran it
	// from its start counted them, on the end it hands to its waiters (so
	// an invocation's answer reads none back); nil otherwise: the store
	// sums them (Store.WorkflowUsage).
	Usage *CompletionTotals `json:"-"`
	// CancelRequested is set by POST /cancel; the owner stops at the next step.
	CancelRequested bool `json:"-"`
	// Owner is the replica holding the lease until LeaseUntil.
	Owner      string    `json:"-"`
	LeaseUntil time.Time `json:"-"`

	// ScheduleID names the schedule that started the workflow for its due
	// time ScheduledFor (zero for a manual trigger). CreateWorkflow records
	// the run and claims that due time in the same transaction (see
	// internal/schedule): a second workflow for it is a problem.Conflict
	// and is not stored.
	ScheduleID   string    `json:"schedule_id,omitempty"`
	ScheduledFor time.Time `json:"-"`

	// IdempotencyKey, when set, is the key of the request that created the
	// workflow (see IdempotencyKey), unique in its tenant: CreateWorkflow
	// refuses a second workflow with it (ErrKeyTaken), so a repeat of the
	// request finds this one (Store.WorkflowByKey) and attaches to it.
	// RequestHash identifies that request's body, so a repeat with another
	// body is told the key is reused.
	IdempotencyKey string `json:"-"`
	RequestHash    string `json:"-"`

	// Rollout names the rollout whose arm the workflow ran, when an
	// active rollout of its agent chose between its default version and
	// its target (see package rollout).
	Rollout *RolloutArm `json:"rollout,omitempty"`
}

// Arms of a rollout a workflow runs.
const (
	ArmDefault = "default"
	ArmCanary  = "canary"
)

// RolloutArm is the arm of a rollout a workflow ran: ArmCanary ran the
// rollout's target, ArmDefault the agent's default version.
type RolloutArm struct {
	ID  string `json:"id"`
	Arm string `json:"arm"`
}

// ArmChooser chooses the version an invocation of an agent's default
// version runs while a rollout of the agent is active (Options.Arms).
type ArmChooser interface {
	// Choose returns the version to run ("" for the default) and the arm
	// to record, nil when no rollout is active. workflowID is the new
	// workflow's id, which a choice without a sticky key hashes.
	Choose(ctx context.Context, req StartRequest, workflowID string) (version string, arm *RolloutArm, err error)
}

// ErrKeyTaken is wrapped by CreateWorkflow's error when another workflow of
// the tenant has the workflow's IdempotencyKey.
var ErrKeyTaken = errors.New("another workflow was created with this idempotency key")

// KeyTaken is the error of a CreateWorkflow refused for ErrKeyTaken.
func KeyTaken() error {
	return problem.Wrap(problem.Conflict, ErrKeyTaken, "a workflow was already created with this Idempotency-Key")
}

// Input is the engine input of the workflow: its goal, context, caller and
// limits, as every execution of it (first run, resume, replay) sees them.
func (w *Workflow) Input() agent.Input {
	ctx, err := DecodeContext(w.Context)
	if err != nil {
		ctx = map[string]any{}
	}
	return agent.Input{
		Goal: w.Goal, Context: ctx, MaxToolCalls: w.MaxToolCalls, MaxLLMTokens: w.MaxLLMTokens, OnExhausted: w.OnExhausted, Agent: w.Agent, Version: w.AgentVersion,
		Caller: agent.Caller{Sub: w.Caller.Sub, Tenant: w.Tenant, Scopes: w.Caller.Scopes},
	}
}

// DecodeContext decodes a stored invocation context, which must be one
// JSON object. Its numbers are json.Numbers, as they were written, so an
// integer past 2^53 keeps every digit on its way to a call's args (and one
// no double holds is left for agent.Program.ValidateContext to name).
func DecodeContext(raw json.RawMessage) (map[string]any, error) {
	var ctx map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&ctx); err != nil {
		return nil, err
	}
	if ctx == nil || dec.More() {
		return nil, errors.New("the context is not one JSON object")
	}
	return ctx, nil
}

// Done reports whether the workflow has finished.
func (w *Workflow) Done() bool { return w.Status != Running && w.Status != Waiting }

// Settled reports whether the workflow has finished or waits for a decision:
// what a synchronous invoke answers with.
func (w *Workflow) Settled() bool { return w.Status != Running }

// Step is one recorded step: the event sent for it and the tool call it made.
type Step struct {
	WorkflowID string `json:"-"`
	// Seq is the event id (SSE id); steps are 1..N, the complete event N+1.
	Seq       int             `json:"-"`
	Step      int             `json:"step"`
	Action    string          `json:"action"`
	Kind      string          `json:"kind"`
	Status    string          `json:"status"`
	Tool      string          `json:"tool,omitempty"`
	Operation string          `json:"operation,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	Score     *float64        `json:"score,omitempty"`
	Queue     string          `json:"queue,omitempty"`
	Outcome   string          `json:"outcome,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	// Reason is why an approve step asks for a decision.
	Reason string `json:"reason,omitempty"`
	// Request is the tool request as sent, without credentials.
	Request json.RawMessage `json:"request,omitempty"`
	// HTTPStatus is the tool's response status.
	HTTPStatus int       `json:"http_status,omitempty"`
	Attempts   int       `json:"attempts,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	DurationMS int64     `json:"duration_ms"`
	// Sent reports that the step's tool call was sent to the tool: only a
	// sent call's answer is served again by replay. A call refused before
	// sending (denied, over the limit, arguments that failed to evaluate,
	// an unknown operation) has a tool and an operation but was not sent.
	Sent bool `json:"sent,omitempty"`
	// A completion's step (kind completion) names its registered model and
	// carries the provider's token counts and finish reason; ErrorCode is
	// the stable cause of its error status (llm_error).
	Model string `json:"model,omitempty"`
	*agent.Usage
	FinishReason string `json:"finish_reason,omitempty"`
	ErrorCode    string `json:"error_code,omitempty"`
	// Attempt numbers the attempt of an external agent that made the
	// step (0 for a defined agent's steps).
	Attempt int `json:"attempt,omitempty"`
	// Journal is set on an external agent's exchange that an attempt after
	// the first made live: JournalDiverged when it differed from the next
	// recorded exchange of its kind.
	Journal string `json:"journal,omitempty"`
	// Injected is set on a call a replay's fault answered instead of the
	// tool (or the record): the call was not sent.
	Injected *fault.Injected `json:"injected,omitempty"`
}

// JournalDiverged marks the first exchange of an attempt that differed
// from the run's record and went live.
const JournalDiverged = "diverged"

// StepWrite is a step with the audit records stored with it.
type StepWrite struct {
	Step    *Step
	Records []*audit.Record
	// Completion, when set, is the completion the step records, stored
	// (and added to the tenant's daily usage, once) with it.
	Completion *Completion
}

// Intent records a tool call about to be sent that is unsafe to repeat (a
// write of a tool without idempotency support), so a resumed workflow knows
// it may have reached the tool.
type Intent struct {
	WorkflowID string
	Step       int
	Tool       string
	Operation  string
	// Call is the digest of an external agent's call (its tool, operation
	// and canonical masked arguments) the intent is for; empty for a
	// defined agent's, whose step says which call it is.
	Call string
	At   time.Time
}

// LeaseStatus is what a lease renewal found.
type LeaseStatus struct {
	// Lost are workflows whose lease the owner no longer holds.
	Lost []string
	// CancelRequested are held workflows someone asked to cancel.
	CancelRequested []string
}

// ListFilter selects workflows of one tenant.
type ListFilter struct {
	Agent string
	// Version is the agent version (with Agent).
	Version string
	Status  string
	Outcome string
	Since   time.Time
	Until   time.Time
	// Words must each appear in the goal, in any case (q=).
	Words []string
	// Context are values the invocation's context must hold at top-level
	// keys (context.<key>=<value>): a string equal to the value, or a
	// number or boolean whose JSON text is the value.
	Context map[string]string
	Limit   int
	// Before is the id of the last workflow of the previous page (newest first).
	Before string
}

// MaxFilterWords and MaxContextFilters bound a list's q= words and
// context.<key> filters.
const (
	MaxFilterWords    = 8
	MaxContextFilters = 8
)

// Store keeps workflows and their history.
type Store interface {
	// CreateWorkflow stores a new running workflow owned by w.Owner.
	CreateWorkflow(ctx context.Context, w *Workflow, rec *audit.Record) error
	// AppendSteps stores steps, in order, each with its audit records, in
	// one transaction, clearing each step's intent. It fails if owner no
	// longer holds the lease.
	AppendSteps(ctx context.Context, owner string, steps ...StepWrite) error
	// RecordIntent stores an intent before an unrepeatable call is sent.
	RecordIntent(ctx context.Context, owner string, in Intent) error
	// Intents returns the workflow's uncleared intents.
	Intents(ctx context.Context, workflowID string) ([]Intent, error)
	// FinishWorkflow stores the final status, outcome, output and error and
	// drops the lease. The last steps, when given, are stored first with
	// their records, as AppendSteps would, in the same transaction.
	FinishWorkflow(ctx context.Context, owner string, w *Workflow, recs []*audit.Record, last ...StepWrite) error
	// Workflow returns a workflow of the tenant, or problem.NotFound.
	Workflow(ctx context.Context, tenant, id string) (*Workflow, error)
	// WorkflowByKey returns the workflow of the tenant created with the
	// IdempotencyKey key, or a problem.NotFound.
	WorkflowByKey(ctx context.Context, tenant, key string) (*Workflow, error)
	// ExpireKey takes the idempotency key key off the tenant's workflow
	// that has it if that workflow started before before: the key is no
	// longer honoured and a new workflow may take it.
	ExpireKey(ctx context.Context, tenant, key string, before time.Time) error
	// Steps returns the workflow's steps with Seq > afterSeq, in order.
	Steps(ctx context.Context, workflowID string, afterSeq int) ([]Step, error)
	// ListWorkflows returns the tenant's workflows, newest first.
	ListWorkflows(ctx context.Context, tenant string, f ListFilter) ([]*Workflow, error)
	// CountWorkflows counts the tenant's workflows matching f, on every
	// page: f's Limit and Before are not read.
	CountWorkflows(ctx context.Context, tenant string, f ListFilter) (int, error)
	// RequestCancel marks a running workflow for cancellation and returns
	// it. A waiting workflow is handed to owner until leaseUntil, running
	// and marked, with its pending approval cancelled; taken reports that,
	// and the caller then finishes it.
	RequestCancel(ctx context.Context, tenant, id, owner string, leaseUntil time.Time) (wf *Workflow, taken bool, err error)
	// RenewLease extends owner's lease on the running workflows it holds.
	RenewLease(ctx context.Context, owner string, ids []string, until time.Time) (LeaseStatus, error)
	// ReleaseLease gives up owner's lease on a running workflow at once, so
	// another replica (or this one, restarted) can resume it.
	ReleaseLease(ctx context.Context, owner, workflowID string) error
	// Completions returns a workflow's recorded completions (their Data) by number.
	Completions(ctx context.Context, workflowID string) (map[int]json.RawMessage, error)
	// WorkflowCompletions returns a workflow's completions with their usage, by number.
	WorkflowCompletions(ctx context.Context, workflowID string) ([]Completion, error)
	// WorkflowUsage sums a workflow's completions as TotalCompletions
	// does, reading their usage columns only, not their records.
	WorkflowUsage(ctx context.Context, workflowID string) (CompletionTotals, error)
	UsageStore
	// ClaimExpired takes over up to limit running workflows whose lease
	// lapsed before now, giving owner the lease until until.
	ClaimExpired(ctx context.Context, owner string, now, until time.Time, limit int) ([]*Workflow, error)
	ApprovalStore
}
