package replay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
)

// Batch statuses.
const (
	BatchRunning   = "running"
	BatchCompleted = "completed"
	BatchFailed    = "failed"
	BatchCancelled = "cancelled"
)

// MaxBatch is the most workflows one batch replays.
const MaxBatch = 10000

// Concurrency of a batch: how many of its replays run at once.
const (
	DefaultConcurrency = 8
	MaxConcurrency     = 64
)

// CheckConcurrency refuses a requested concurrency outside 1..64 (0 is the
// default).
func CheckConcurrency(n int) []problem.FieldError {
	if n < 0 || n > MaxConcurrency {
		return []problem.FieldError{{Field: "concurrency", Message: fmt.Sprintf("must be from 1 to %d (default %d)", MaxConcurrency, DefaultConcurrency)}}
	}
	return nil
}

// A Batch replays many workflows against one target version, as dry runs:
// a regression run. Its counts are those of the replays stored so far.
type Batch struct {
	ID     string `json:"id"`
	Tenant string `json:"-"`
	// Target is name@version.
	Target string `json:"target_agent_version"`
	Status string `json:"status"`
	// Error says why a failed batch stopped.
	Error string `json:"error,omitempty"`
	Total int    `json:"total"`
	Done  int    `json:"done"`
	// Changed counts the replays whose outcome differs from the original's.
	Changed int `json:"changed"`
	// OutcomeChanges counts the replays by original and replay outcome,
	// unchanged pairs included; pairs that changed come first.
	OutcomeChanges []OutcomeChange `json:"outcome_changes"`
	// DeltaTotals sums the replays' deltas.
	DeltaTotals Delta `json:"delta_totals"`
	// Dataset is the dataset the workflows came from, name@version.
	Dataset string `json:"dataset,omitempty"`
	// Spec is what the batch checks and gates (checks.go); Checks totals
	// each check's results so far and Verdict judges them once the batch
	// has ended, when it has checks.
	Spec    Spec         `json:"-"`
	Checks  []CheckTotal `json:"checks,omitempty"`
	Verdict string       `json:"verdict,omitempty"`
	// Expectations are the dataset's, by workflow id, given to CreateBatch.
	Expectations map[string]Expectation `json:"-"`
	checks       *Checks
	// Mode is how every replay of the batch is served (llm,
	// unrecorded_calls); Concurrency how many run at once.
	Mode
	Concurrency int `json:"concurrency,omitempty"`
	// Usage sums the usage of the replays stored so far, both sides.
	Usage      Usages     `json:"usage"`
	Creator    Creator    `json:"-"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// BatchListFilter selects batches to list.
type BatchListFilter struct {
	// Target is name@version.
	Target string
	Limit  int
	// Before is the id of the last batch of the previous page.
	Before string
}

// OutcomeChange is one cell of the outcome matrix.
type OutcomeChange struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Count int    `json:"count"`
}

// BatchReplay is the replay of a batch's workflow at Position.
type BatchReplay struct {
	Position int
	Replay   *Replay
}

// BatchItem is one workflow of a batch, in the batch's order.
type BatchItem struct {
	Position   int
	WorkflowID string
	// Expected is the dataset's expectation of the workflow, if any.
	Expected *Expectation
}

// BatchStore keeps batches, their workflows and their replays.
type BatchStore interface {
	// CreateBatch stores a running batch of the workflows, in order, leased
	// to owner until until, with rec, its audit record.
	CreateBatch(ctx context.Context, b *Batch, workflowIDs []string, owner string, until time.Time, rec *audit.Record) error
	// Batch returns a batch of the tenant with its counts, or problem.NotFound.
	Batch(ctx context.Context, tenant, id string) (*Batch, error)
	// BatchProgress returns the status and counters of a batch of the
	// tenant, or problem.NotFound: one row, however large the batch.
	BatchProgress(ctx context.Context, tenant, id string) (Progress, error)
	// BatchByID returns a batch of any tenant (for signed report links).
	BatchByID(ctx context.Context, id string) (*Batch, error)
	// ListBatches returns the tenant's batches matching f, newest first,
	// with Done and Changed counted (not the outcome matrix or deltas).
	ListBatches(ctx context.Context, tenant string, f BatchListFilter) ([]*Batch, error)
	// PendingItems returns up to limit workflows of the batch not replayed
	// yet, after position after, in order.
	PendingItems(ctx context.Context, batchID string, after, limit int) ([]BatchItem, error)
	// AddBatchReplays stores each replay as that of the batch's workflow
	// at its position, all in one transaction, except those whose workflow
	// has its replay already (stored by an earlier lease holder), and adds
	// those it stored to the batch's counters, in the same transaction; it
	// returns how many it stored.
	AddBatchReplays(ctx context.Context, batchID string, rs []BatchReplay) (int, error)
	// BatchReplays pages a batch's replays: those whose outcome changed
	// first, then in batch order; only the changed ones when changedOnly.
	BatchReplays(ctx context.Context, batchID string, changedOnly bool, offset, limit int) ([]*Replay, error)
	// FailedCheckReplays pages the batch's replays that failed (or could
	// not run) a check, in batch order.
	FailedCheckReplays(ctx context.Context, batchID string, offset, limit int) ([]*Replay, error)
	// FinishBatch moves a running batch to status (completed, failed or
	// cancelled) and drops its lease; false when it was not running.
	FinishBatch(ctx context.Context, id, status, errMsg string, at time.Time) (bool, error)
	// ClaimBatch leases to owner a running batch whose lease expired before
	// now or that owner holds already (one it accepted), or returns nil.
	ClaimBatch(ctx context.Context, owner string, now, until time.Time) (*Batch, error)
	// RenewBatch extends owner's lease; problem.Conflict when the batch is
	// no longer running or leased to another owner.
	RenewBatch(ctx context.Context, id, owner string, until time.Time) error
	// JournalCompletion keeps a live completion of the batch's replay of
	// a workflow, under its number and request hash (once: a second with
	// the same key is ignored).
	JournalCompletion(ctx context.Context, batchID, workflowID string, n int, requestSHA256 string, data []byte) error
	// JournaledCompletions returns what JournalCompletion kept for the
	// batch's workflow, in any order.
	JournaledCompletions(ctx context.Context, batchID, workflowID string) ([][]byte, error)
}

// NewBatch is a new running batch of the tenant, served as the default
// mode says (recorded) until its Mode is set.
func NewBatch(tenant, target string, total int, creator Creator, now time.Time) *Batch {
	return &Batch{ID: ids.NewAt(ids.Batch, now), Tenant: tenant, Target: target, Status: BatchRunning,
		Total: total, OutcomeChanges: []OutcomeChange{}, Creator: creator, CreatedAt: now,
		Mode: Mode{}.WithDefaults()}
}

// BatchNotFound is the error for a batch that does not exist in the tenant.
func BatchNotFound(id string) error {
	return problem.New(problem.NotFound, "no replay batch %s", id)
}

// OutcomeChanged reports whether the replay's outcome differs from the
// original's.
func (r *Replay) OutcomeChanged() bool { return r.OriginalOutcome != r.ReplayOutcome }

// BatchCell counts a batch's replays of one (original, replay) outcome pair.
type BatchCell struct {
	From, To string
	Count    int
	Delta    Delta
}

// Count sets the batch's counts from its cells.
func (b *Batch) Count(cells []BatchCell) {
	b.Done, b.Changed, b.DeltaTotals = 0, 0, Delta{}
	b.OutcomeChanges = make([]OutcomeChange, 0, len(cells))
	for _, c := range cells {
		b.Done += c.Count
		if c.From != c.To {
			b.Changed += c.Count
		}
		b.DeltaTotals.StepsAdded += c.Delta.StepsAdded
		b.DeltaTotals.StepsChanged += c.Delta.StepsChanged
		b.DeltaTotals.StepsRemoved += c.Delta.StepsRemoved
		b.DeltaTotals.ToolCallsChanged += c.Delta.ToolCallsChanged
		b.OutcomeChanges = append(b.OutcomeChanges, OutcomeChange{From: c.From, To: c.To, Count: c.Count})
	}
	slices.SortFunc(b.OutcomeChanges, func(x, y OutcomeChange) int {
		if cx, cy := x.From != x.To, y.From != y.To; cx != cy {
			if cx {
				return -1
			}
			return 1
		}
		if x.Count != y.Count {
			return y.Count - x.Count
		}
		return cmp.Or(strings.Compare(x.From, y.From), strings.Compare(x.To, y.To))
	})
}
