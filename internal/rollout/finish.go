package rollout

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// ShadowRunner replays a finished workflow as a dry run (replay.Service).
type ShadowRunner interface {
	Replay(ctx context.Context, req replay.Request, rec *audit.Record) (*replay.Replay, error)
}

// Finished counts a finished workflow in the rollout that chose its arm,
// as the runner calls it wherever a workflow ends (Runner.OnFinish): its
// checks are run and its run stored once; a shadow's share of the
// default's workflows is replayed against the target first. It then judges
// the rollout. Errors are logged: a workflow's end does not wait on them.
func (s *Service) Finished(ctx context.Context, wf *workflow.Workflow) {
	if wf.Rollout == nil || !wf.Done() {
		return
	}
	if err := s.finished(ctx, wf); err != nil {
		s.logger().Warn("rollout: count a finished workflow", "workflow_id", wf.ID, "rollout_id", wf.Rollout.ID, "error", err)
	}
}

func (s *Service) finished(ctx context.Context, wf *workflow.Workflow) error {
	r, err := s.Store.Rollout(ctx, wf.Tenant, wf.Rollout.ID)
	if err != nil {
		return err
	}
	if r.State != Active {
		return nil
	}
	run, err := s.runOf(ctx, r, wf)
	if err != nil {
		return err
	}
	stored, err := s.Store.RecordRolloutRun(ctx, run)
	if err != nil {
		return err
	}
	// A workflow counted already had its shadow replayed then.
	if stored && r.Mode == Shadow && wf.Rollout.Arm == workflow.ArmDefault && takes(r, "workflow:"+wf.ID) {
		s.goShadow(ctx, r, wf)
	}
	return s.judge(ctx, r)
}

// goShadow replays wf against the shadow's target on a goroutine of its
// own, at most MaxShadows at once on this replica and MaxShadowsWaiting
// more waiting (past them it is not made), then judges the
// rollout: the workflow's execution slot is not held while the model
// answers the replay.
func (s *Service) goShadow(ctx context.Context, r *Rollout, wf *workflow.Workflow) {
	s.shadowOnce.Do(func() {
		s.shadowSlots = make(chan struct{}, cmp.Or(s.MaxShadows, DefaultMaxShadows))
		s.shadowQueue = make(chan struct{}, cmp.Or(s.MaxShadows, DefaultMaxShadows)+cmp.Or(s.MaxShadowsWaiting, DefaultMaxShadowsWaiting))
	})
	select {
	case s.shadowQueue <- struct{}{}:
	default:
		s.logger().Warn("rollout: shadow replay not made: too many wait on this replica", "workflow_id", wf.ID, "rollout_id", r.ID)
		return
	}
	s.shadowing.Go(func() {
		defer func() { <-s.shadowQueue }()
		s.shadowSlots <- struct{}{}
		defer func() { <-s.shadowSlots }()
		err := s.shadow(ctx, r, wf)
		if err == nil {
			err = s.judge(ctx, r)
		}
		if err != nil {
			s.logger().Warn("rollout: shadow replay", "workflow_id", wf.ID, "rollout_id", r.ID, "error", err)
		}
	})
}

// WaitShadows waits for the shadow replays this replica has started.
func (s *Service) WaitShadows() { s.shadowing.Wait() }

// runOf is a finished workflow as its rollout counts it.
func (s *Service) runOf(ctx context.Context, r *Rollout, wf *workflow.Workflow) (*Run, error) {
	comps, err := s.Workflows.WorkflowCompletions(ctx, wf.ID)
	if err != nil {
		return nil, err
	}
	run := &Run{Tenant: wf.Tenant, RolloutID: r.ID, WorkflowID: wf.ID, Arm: wf.Rollout.Arm, Outcome: wf.Outcome,
		Priced: true, FinishedAt: wf.FinishedAt}
	if run.FinishedAt.IsZero() {
		run.FinishedAt = s.now()
	}
	usage := &replay.Usage{}
	for _, c := range comps {
		run.InputTokens += c.InputTokens
		run.OutputTokens += c.OutputTokens
		run.Cost += c.Cost
		if c.Currency == "" || (run.Currency != "" && run.Currency != c.Currency) {
			run.Priced = false
		}
		run.Currency = c.Currency
		usage.Completions++
	}
	usage.InputTokens, usage.OutputTokens = run.InputTokens, run.OutputTokens
	if run.Priced && run.Currency != "" {
		usage.Cost = &replay.Cost{Amount: run.Cost, Currency: run.Currency}
	}
	if r.Mode != Canary || r.Spec.Empty() {
		return run, nil
	}
	checks, err := s.checks.runChecks(r)
	if err != nil {
		return nil, err
	}
	steps, err := s.Workflows.Steps(ctx, wf.ID, 0)
	if err != nil {
		return nil, err
	}
	run.Checks = checks.RunOn(ctx, replay.RunSide(wf, steps, usage))
	return run, nil
}

// shadow replays a workflow of the default against the shadow's target as
// a dry run (live model, recorded tools: no tool is called) and counts it
// in the shadow arm with the batch checks' results.
func (s *Service) shadow(ctx context.Context, r *Rollout, wf *workflow.Workflow) error {
	if s.Shadows == nil {
		return nil
	}
	rec := record(r, audit.Record{Action: "rollout.shadow_replay", Time: s.now()}, map[string]any{"workflow_id": wf.ID})
	rec.WorkflowID = wf.ID
	rp, err := s.Shadows.Replay(ctx, replay.Request{Tenant: wf.Tenant, WorkflowID: wf.ID, Target: r.Agent + "@" + r.Target,
		DryRun: true, Mode: replay.Mode{LLM: replay.LLMLive, UnrecordedCalls: replay.UnrecordedSkip}, Caller: wf.Caller}, rec)
	if err != nil {
		return err
	}
	u := rp.Usage.Replay
	run := &Run{Tenant: wf.Tenant, RolloutID: r.ID, WorkflowID: "shadow:" + wf.ID, Arm: ArmShadow, Outcome: rp.ReplayOutcome,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Priced: u.Completions == 0 || u.Cost != nil, FinishedAt: s.now()}
	if u.Cost != nil {
		run.Cost, run.Currency = u.Cost.Amount, u.Cost.Currency
	}
	if !r.Spec.Empty() {
		checks, err := s.checks.replayChecks(r)
		if err != nil {
			return err
		}
		run.Checks = checks.Run(ctx, replay.CaseOf(wf, rp, nil))
	}
	_, err = s.Store.RecordRolloutRun(ctx, run)
	return err
}

// judge rolls the rollout back when, after min_runs of its target's arm, a
// check is under its gate; with auto_promote, when every gate holds then,
// it promotes the target. The store's end of an active rollout happens
// once, whichever replica judges first.
func (s *Service) judge(ctx context.Context, r *Rollout) error {
	if len(r.Spec.Checks) == 0 && !r.AutoPromote {
		return nil // no check to fall under a gate, no promotion: the sums would decide nothing
	}
	totals, counts, err := s.Store.RolloutTotals(ctx, r.Tenant, r.ID)
	if err != nil {
		return err
	}
	runs := 0
	for _, t := range totals {
		if t.Arm == r.TargetArm() {
			runs = t.Runs
		}
	}
	if runs < r.MinRuns {
		return nil
	}
	now := s.now()
	if check := failing(r.tally(r.TargetArm(), counts)); check != "" {
		r.State, r.FailedCheck, r.Percent, r.EndedAt = RolledBack, check, 0, now
		rec := record(r, audit.Record{Action: "rollout.rollback", Time: now}, map[string]any{"failed_check": check, "runs": runs})
		ok, err := s.Store.EndRollout(ctx, r.Tenant, r.ID, RolledBack, check, now, rec, event(r, webhook.RolloutRolledBack, now))
		if ok {
			s.logger().Info("rollout rolled back", "rollout_id", r.ID, "agent", r.Agent, "failed_check", check)
		}
		return err
	}
	if !r.AutoPromote {
		return nil
	}
	r.State, r.EndedAt = Promoted, now
	rec := record(r, audit.Record{Action: "rollout.promote", Time: now}, map[string]any{"runs": runs})
	ok, err := s.Store.EndRollout(ctx, r.Tenant, r.ID, Promoted, "", now, rec, event(r, webhook.RolloutPromoted, now))
	if err != nil || !ok {
		return err
	}
	promote := record(r, audit.Record{Action: "agent.set_default", Time: now}, map[string]any{"version": r.Target, "rollout_id": r.ID})
	promote.Resource = audit.Resource{Type: "agent", ID: r.Agent}
	return s.Versions.SetDefault(ctx, r.Tenant, r.Agent, r.Target, promote)
}

// sweepGrace is how long after its end a workflow is left to the replica
// that finished it before a sweep counts it.
const sweepGrace = time.Minute

// sweepBatch is how many workflows one sweep counts at most.
const sweepBatch = 100

// Sweep counts the finished workflows of active rollouts that no replica
// counted (one stopped between a workflow's end and its count); counting
// is idempotent, so a sweep racing a replica counts each once.
func (s *Service) Sweep(ctx context.Context) error {
	wfs, err := s.Store.UncountedRolloutWorkflows(ctx, s.now().Add(-sweepGrace), sweepBatch)
	if err != nil {
		return err
	}
	for _, wf := range wfs {
		s.Finished(ctx, wf)
	}
	return nil
}

// RunSweeper calls Sweep every interval until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.logger().Warn("rollout: uncounted workflows not swept", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// checkCache holds each rollout's compiled checks: compiled code, the same
// on every replica.
type checkCache struct {
	mu   sync.Mutex
	byID map[string]*replay.Checks
}

func (c *checkCache) get(r *Rollout, compile func(replay.Spec) (*replay.Checks, error)) (*replay.Checks, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.byID[r.ID]; ok {
		return ch, nil
	}
	ch, err := compile(r.Spec)
	if err != nil {
		return nil, err
	}
	if c.byID == nil || len(c.byID) > 1000 {
		c.byID = map[string]*replay.Checks{}
	}
	c.byID[r.ID] = ch
	return ch, nil
}

func (c *checkCache) runChecks(r *Rollout) (*replay.Checks, error) {
	return c.get(r, replay.CompileRunChecks)
}

func (c *checkCache) replayChecks(r *Rollout) (*replay.Checks, error) {
	return c.get(r, func(s replay.Spec) (*replay.Checks, error) { return replay.CompileChecks(s, nil) })
}
