// Package rollout runs an agent's target version beside its default
// (SPEC §4 "Change safety"): a canary, where a sticky share of the
// invocations of the default version runs the target instead, or a
// shadow, where finished workflows of the default are replayed against the
// target as dry runs. Each finished run is checked with the batch checks'
// CEL; once the target's arm has min_runs, a gated check under its minimum
// rolls the rollout back at once, and with auto_promote a rollout whose
// every gate holds promotes its target. Everything a rollout decides is in
// the store: any replica chooses the same arm for an invocation, and a
// restart loses nothing.
package rollout

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Modes of a rollout.
const (
	Canary = "canary"
	Shadow = "shadow"
)

// States of a rollout.
const (
	Active     = "active"
	RolledBack = "rolled_back"
	Promoted   = "promoted"
	Ended      = "ended"
)

// ArmShadow is the arm of a shadow rollout's dry runs against the target.
const ArmShadow = "shadow"

// DefaultMinRuns is a rollout's min_runs when its request sets none.
const DefaultMinRuns = 20

// MaxMinRuns bounds min_runs.
const MaxMinRuns = 1_000_000

// Rollout is one rollout of an agent's target version.
type Rollout struct {
	ID     string `json:"id"`
	Tenant string `json:"-"`
	Agent  string `json:"agent"`
	// BaseVersion is the agent's default version when the rollout began.
	BaseVersion string  `json:"base_version"`
	Target      string  `json:"target"`
	Percent     float64 `json:"percent"`
	Sticky      string  `json:"sticky,omitempty"`
	Mode        string  `json:"mode"`
	// Spec is the checks and their gate.
	Spec        replay.Spec `json:"-"`
	MinRuns     int         `json:"min_runs"`
	AutoPromote bool        `json:"auto_promote"`
	State       string      `json:"state"`
	// FailedCheck names the check whose gate rolled the rollout back.
	FailedCheck string `json:"failed_check,omitempty"`
	// RequestHash identifies the request that made the rollout.
	RequestHash string    `json:"-"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
}

// TargetArm is the arm that runs the rollout's target.
func (r *Rollout) TargetArm() string {
	if r.Mode == Shadow {
		return ArmShadow
	}
	return workflow.ArmCanary
}

// Run is one finished run a rollout counts: a workflow of either arm, or a
// shadow's dry run of one.
type Run struct {
	Tenant       string
	RolloutID    string
	WorkflowID   string
	Arm          string
	Outcome      string
	InputTokens  int64
	OutputTokens int64
	// Cost is in Currency ("" with no priced completion); Priced is false
	// when a completion had no price.
	Cost       float64
	Currency   string
	Priced     bool
	Checks     []replay.CheckResult
	FinishedAt time.Time
}

// ArmTotals are what a store sums over one arm's runs.
type ArmTotals struct {
	Arm          string
	Runs         int
	InputTokens  int64
	OutputTokens int64
	Cost         float64
	// Priced counts the runs whose every completion was priced;
	// MinCurrency and MaxCurrency span their currencies.
	Priced                   int
	MinCurrency, MaxCurrency string
}

// CheckCount counts one arm's results of one check that ended one way
// (replay.ResultPassed, ResultFailed, ResultErrored).
type CheckCount struct {
	Arm, Name, Result string
	Count             int
}

// Store keeps rollouts and the runs they count.
type Store interface {
	// CreateRollout stores a new active rollout with its audit record and
	// webhook event; problem.Conflict when the agent has an active one.
	CreateRollout(ctx context.Context, r *Rollout, rec *audit.Record, ev *webhook.Event) error
	// Rollout returns one rollout of the tenant, or problem.NotFound.
	Rollout(ctx context.Context, tenant, id string) (*Rollout, error)
	// ActiveRollout returns the agent's active rollout, or problem.NotFound.
	ActiveRollout(ctx context.Context, tenant, agent string) (*Rollout, error)
	// LatestRollout returns the agent's newest rollout, whatever its
	// state, or problem.NotFound.
	LatestRollout(ctx context.Context, tenant, agent string) (*Rollout, error)
	// EndRollout sets an active rollout's state (RolledBack with the
	// failing check, Promoted or Ended), its percent to 0 when rolled
	// back, and its end time, with the record and event; it reports false,
	// writing nothing, when the rollout was no longer active.
	EndRollout(ctx context.Context, tenant, id, state, failedCheck string, at time.Time, rec *audit.Record, ev *webhook.Event) (bool, error)
	// RecordRolloutRun stores a run and its checks' results once: it
	// reports false, writing nothing, when the rollout counted the
	// workflow already.
	RecordRolloutRun(ctx context.Context, run *Run) (bool, error)
	// RolloutTotals sums a rollout's runs by arm and counts its checks'
	// results by arm, check and result.
	RolloutTotals(ctx context.Context, tenant, id string) ([]ArmTotals, []CheckCount, error)
	// UncountedRolloutWorkflows returns, in every tenant, up to limit
	// workflows that an active rollout chose the arm of, that finished
	// before the given time and that the rollout has not counted: those
	// whose replica stopped between their end and their count.
	UncountedRolloutWorkflows(ctx context.Context, finishedBefore time.Time, limit int) ([]*workflow.Workflow, error)
}

// Request is a PUT of a rollout.
type Request struct {
	Target      string             `json:"target"`
	Percent     *float64           `json:"percent"`
	Sticky      string             `json:"sticky,omitempty"`
	Mode        string             `json:"mode,omitempty"`
	Checks      []replay.CheckSpec `json:"checks,omitempty"`
	Gate        map[string]float64 `json:"gate,omitempty"`
	MinRuns     *int               `json:"min_runs,omitempty"`
	AutoPromote bool               `json:"auto_promote,omitempty"`
}

// Arm is one arm of a rollout as GET …/rollout shows it.
type Arm struct {
	Arm string `json:"arm"`
	// Version is the version the arm runs: the target, or the default.
	Version      string              `json:"version"`
	Runs         int                 `json:"runs"`
	InputTokens  int64               `json:"input_tokens"`
	OutputTokens int64               `json:"output_tokens"`
	Cost         *replay.Cost        `json:"cost"`
	Checks       []replay.CheckTotal `json:"checks"`
}

// View is a rollout with its arms side by side.
type View struct {
	*Rollout
	Checks []replay.CheckSpec `json:"checks"`
	Gate   map[string]float64 `json:"gate,omitempty"`
	Arms   []Arm              `json:"arms"`
}

// viewOf puts a rollout's totals side by side: the default arm first.
func viewOf(r *Rollout, defaultVersion string, totals []ArmTotals, counts []CheckCount) *View {
	v := &View{Rollout: r, Checks: r.Spec.Checks, Gate: r.Spec.Gate}
	if v.Checks == nil {
		v.Checks = []replay.CheckSpec{}
	}
	for _, name := range []string{workflow.ArmDefault, r.TargetArm()} {
		a := Arm{Arm: name, Version: r.Target}
		if name == workflow.ArmDefault {
			a.Version = defaultVersion
		}
		for _, t := range totals {
			if t.Arm != name {
				continue
			}
			a.Runs, a.InputTokens, a.OutputTokens = t.Runs, t.InputTokens, t.OutputTokens
			if t.Runs > 0 && t.Priced == t.Runs && t.MinCurrency != "" && t.MinCurrency == t.MaxCurrency {
				a.Cost = &replay.Cost{Amount: t.Cost, Currency: t.MinCurrency}
			}
		}
		a.Checks = r.tally(name, counts)
		v.Arms = append(v.Arms, a)
	}
	return v
}

// tally is one arm's check totals, each with its gate: a check's given
// minimum, or with no gate at all every check must pass every run.
func (r *Rollout) tally(arm string, counts []CheckCount) []replay.CheckTotal {
	by := map[string][3]int{}
	for _, c := range counts {
		if c.Arm != arm {
			continue
		}
		n := by[c.Name]
		switch c.Result {
		case replay.ResultPassed:
			n[0] += c.Count
		case replay.ResultFailed:
			n[1] += c.Count
		default:
			n[2] += c.Count
		}
		by[c.Name] = n
	}
	totals := r.Spec.Tally(by)
	if len(r.Spec.Gate) == 0 {
		for i := range totals {
			one := 1.0
			totals[i].Gate = &one
		}
	}
	return totals
}

// failing is the first of the target arm's checks under its gate, "" when
// every gate holds.
func failing(totals []replay.CheckTotal) string {
	for _, t := range totals {
		if t.Gate != nil && t.PassRate < *t.Gate {
			return t.Name
		}
	}
	return ""
}

// validPercent reports whether p is a share from 0 to 100.
func validPercent(p float64) bool { return !math.IsNaN(p) && p >= 0 && p <= 100 }

// splitTarget is the version a target names: "3" or "name@3", whose name
// must be the agent's.
func splitTarget(agentName, target string) (string, bool) {
	name, version, pinned := strings.Cut(target, "@")
	if !pinned {
		return target, true
	}
	return version, name == agentName
}

// eventData is the data of a rollout's webhook events.
type eventData struct {
	RolloutID   string  `json:"rollout_id"`
	Agent       string  `json:"agent"`
	BaseVersion string  `json:"base_version"`
	Target      string  `json:"target"`
	Mode        string  `json:"mode"`
	Percent     float64 `json:"percent"`
	State       string  `json:"state"`
	FailedCheck string  `json:"failed_check,omitempty"`
}

// event is the webhook event of a rollout's change.
func event(r *Rollout, typ string, at time.Time) *webhook.Event {
	return webhook.RolloutEvent(r.Tenant, typ, r.Agent, r.ID, at, eventData{RolloutID: r.ID, Agent: r.Agent,
		BaseVersion: r.BaseVersion, Target: r.Target, Mode: r.Mode, Percent: r.Percent, State: r.State, FailedCheck: r.FailedCheck})
}

// Actor is the audit actor of the changes a rollout makes itself.
var Actor = audit.Actor{Sub: "agentplane:rollout"}

// record is the audit record of a change the rollout made itself: rec's
// action and time, with the rollout as its resource and actor.
func record(r *Rollout, rec audit.Record, details map[string]any) *audit.Record {
	details["agent"], details["target"] = r.Agent, r.Target
	rec.Tenant, rec.Actor, rec.Outcome = r.Tenant, Actor, audit.Success
	rec.Resource = audit.Resource{Type: "rollout", ID: r.ID}
	rec.Details = audit.Details(details)
	return &rec
}
