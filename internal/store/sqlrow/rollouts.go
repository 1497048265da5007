package sqlrow

import (
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/rollout"
)

// RolloutColumns are the rollouts table's columns, in the order of
// ScanRollout and RolloutValues.
const RolloutColumns = `tenant, id, agent, base_version, target, percent, sticky, mode, spec, min_runs,
	auto_promote, state, failed_check, request_hash, created_by, created_at, ended_at`

// ScanRollout scans a row of RolloutColumns; a missing row's error is
// returned as it is.
func ScanRollout(s Scanner) (*rollout.Rollout, error) {
	var r rollout.Rollout
	err := s.Scan(&r.Tenant, &r.ID, &r.Agent, &r.BaseVersion, &r.Target, &r.Percent, &r.Sticky, &r.Mode,
		JSON(&r.Spec, "rollout checks"), &r.MinRuns, &r.AutoPromote, &r.State, &r.FailedCheck, &r.RequestHash,
		&r.CreatedBy, Time(&r.CreatedAt), TimeOrZero(&r.EndedAt))
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan rollout: %w", err)
	}
	return &r, nil
}

// RolloutValues are r's values in RolloutColumns order, times made by
// timeOf and an unset end by noEnd (each engine's).
func RolloutValues(r *rollout.Rollout, timeOf func(time.Time) any, noEnd any) ([]any, error) {
	spec, err := EncodeJSON(r.Spec, "rollout checks")
	if err != nil {
		return nil, err
	}
	var ended = noEnd
	if !r.EndedAt.IsZero() {
		ended = timeOf(r.EndedAt)
	}
	return []any{r.Tenant, r.ID, r.Agent, r.BaseVersion, r.Target, r.Percent, r.Sticky, r.Mode, spec, r.MinRuns,
		r.AutoPromote, r.State, r.FailedCheck, r.RequestHash, r.CreatedBy, timeOf(r.CreatedAt), ended}, nil
}

// RolloutRunValues are a run's values in the rollout_runs table's column
// order (tenant, rollout_id, workflow_id, arm, outcome, input_tokens,
// output_tokens, cost, currency, priced, finished_at).
func RolloutRunValues(run *rollout.Run, timeOf func(time.Time) any) []any {
	return []any{run.Tenant, run.RolloutID, run.WorkflowID, run.Arm, run.Outcome, run.InputTokens, run.OutputTokens,
		run.Cost, run.Currency, run.Priced, timeOf(run.FinishedAt)}
}

// ScanArmTotals scans a row of the arms' sums: arm, runs, input tokens,
// output tokens, cost, priced runs, least and greatest currency.
func ScanArmTotals(s Scanner) (rollout.ArmTotals, error) {
	var (
		t        rollout.ArmTotals
		min, max *string
	)
	if err := s.Scan(&t.Arm, &t.Runs, &t.InputTokens, &t.OutputTokens, &t.Cost, &t.Priced, &min, &max); err != nil {
		return t, fmt.Errorf("scan rollout totals: %w", err)
	}
	if min != nil {
		t.MinCurrency = *min
	}
	if max != nil {
		t.MaxCurrency = *max
	}
	return t, nil
}

// ScanCheckCount scans a row of arm, check name, result and count.
func ScanCheckCount(s Scanner) (rollout.CheckCount, error) {
	var c rollout.CheckCount
	if err := s.Scan(&c.Arm, &c.Name, &c.Result, &c.Count); err != nil {
		return c, fmt.Errorf("scan rollout check count: %w", err)
	}
	return c, nil
}
