// Package replay runs a recorded workflow again against another agent
// version and compares the two runs. A dry run serves every tool call and
// LLM completion from the record and makes no other; the comparison aligns
// the two step lists by a longest common subsequence on their actions.
package replay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Delta counts what changed between the original run and the replay.
type Delta struct {
	StepsAdded       int `json:"steps_added"`
	StepsChanged     int `json:"steps_changed"`
	StepsRemoved     int `json:"steps_removed"`
	ToolCallsChanged int `json:"tool_calls_changed"`
}

// Kinds of an aligned entry.
const (
	Same    = "same"
	Changed = "changed"
	Added   = "added"
	Removed = "removed"
)

// Entry is one line of the aligned diff: an original step, a replay step,
// or both. Fields names what differs in a changed pair.
type Entry struct {
	Kind     string         `json:"kind"`
	Fields   []string       `json:"changed_fields,omitempty"`
	Original *workflow.Step `json:"original"`
	Replay   *workflow.Step `json:"replay"`
}

// Creator is who made a replay; the viewer shows tool bodies by their scopes.
type Creator struct {
	Sub      string   `json:"sub"`
	ClientID string   `json:"client_id,omitempty"`
	Scopes   []string `json:"scopes"`
}

// Statuses of a replay: a real one is running until its new workflow ends;
// a dry run is stored completed.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	// StatusFailed is a real replay whose new workflow was never stored.
	StatusFailed = "failed"
)

// Replay is a stored replay result.
type Replay struct {
	ID         string `json:"replay_id"`
	Tenant     string `json:"-"`
	WorkflowID string `json:"workflow_id"`
	// Status is running, completed or failed (completed when stored before
	// replays had statuses).
	Status string `json:"status"`
	// Target is the replayed version, name@version.
	Target string `json:"target_agent_version"`
	DryRun bool   `json:"dry_run"`
	// OriginalVersion is the version the original workflow ran, name@version.
	OriginalVersion string `json:"original_agent_version"`
	OriginalOutcome string `json:"original_outcome"`
	ReplayOutcome   string `json:"replay_outcome"`
	// ReplayError says why the replay failed, when it did.
	ReplayError string `json:"replay_error,omitempty"`
	// ReplayErrorCode is the stable cause of a failed replay, when it has
	// one: internal when the server failed while replaying it.
	ReplayErrorCode string `json:"replay_error_code,omitempty"`
	// ReplayStatus and ReplayOutput are the replay's workflow status and
	// output, when it has them (checks compare them with the original's).
	ReplayStatus string          `json:"replay_status,omitempty"`
	ReplayOutput json.RawMessage `json:"replay_output,omitempty"`
	Delta        Delta           `json:"delta"`
	Steps        []Entry         `json:"steps"`
	// Checks are the replay's check results, in a batch with checks.
	Checks []CheckResult `json:"checks,omitempty"`
	// ReplayWorkflowID is the new workflow of a replay that is not a dry run.
	ReplayWorkflowID string `json:"replay_workflow_id,omitempty"`
	// Mode is how a dry run was served: llm and unrecorded_calls.
	Mode
	// Faults are the faults the replay injected into the calls they
	// applied to (see package fault); its steps say which.
	Faults []fault.Fault `json:"faults,omitempty"`
	// Usage is the tokens and cost of the original's completions and of
	// those the replay requested (none when they came from the record).
	Usage Usages `json:"usage"`
	// OriginalCompletions are the original conversation, Completions the
	// replay's live one (kept, so the replay reads the same every time).
	OriginalCompletions []Completion `json:"original_completions,omitempty"`
	Completions         []Completion `json:"completions,omitempty"`
	Creator             Creator      `json:"-"`
	CreatedAt           time.Time    `json:"created_at"`
	// Repeat reports a real replay that an earlier request with the same
	// idempotency key made: this request made nothing (never stored).
	Repeat bool `json:"-"`
}

// ListFilter selects replays of one tenant, newest first.
type ListFilter struct {
	WorkflowID string
	// Target is name@version.
	Target string
	Limit  int
	// Before is the id of the last replay of the previous page.
	Before string
}

// Store keeps replays.
type Store interface {
	// CreateReplay stores a replay and its audit record in one transaction,
	// with a replay.completed webhook event unless the replay is running.
	CreateReplay(ctx context.Context, r *Replay, rec *audit.Record) error
	// CompleteReplay stores the outcome of a running replay (r with a final
	// status) and queues its replay.completed event, in one transaction;
	// false when it was no longer running (another replica completed it).
	CompleteReplay(ctx context.Context, r *Replay) (bool, error)
	// ReplayOfWorkflow returns the replay, of any tenant, whose new
	// workflow is workflowID, or problem.NotFound.
	ReplayOfWorkflow(ctx context.Context, workflowID string) (*Replay, error)
	// RunningReplays returns up to limit replays of any tenant still
	// running, oldest first.
	RunningReplays(ctx context.Context, limit int) ([]*Replay, error)
	// Replay returns a replay of the tenant, or problem.NotFound.
	Replay(ctx context.Context, tenant, id string) (*Replay, error)
	// ReplayByID returns a replay of any tenant (for signed viewer links,
	// which carry no token), or problem.NotFound.
	ReplayByID(ctx context.Context, id string) (*Replay, error)
	// ListReplays returns the tenant's replays, newest first.
	ListReplays(ctx context.Context, tenant string, f ListFilter) ([]*Replay, error)
}
