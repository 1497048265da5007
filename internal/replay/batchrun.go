package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/workflow"
)

// itemJournal is the Journal of one workflow of a batch.
type itemJournal struct {
	store               BatchStore
	batchID, workflowID string
}

func (j *itemJournal) Journaled(ctx context.Context) ([]Completion, error) {
	rows, err := j.store.JournaledCompletions(ctx, j.batchID, j.workflowID)
	if err != nil {
		return nil, err
	}
	out := make([]Completion, len(rows))
	for i, raw := range rows {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("journaled completion of %s: %w", j.workflowID, err)
		}
	}
	return out, nil
}

func (j *itemJournal) Keep(ctx context.Context, c Completion) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return j.store.JournalCompletion(ctx, j.batchID, j.workflowID, c.N, c.RequestSHA256, raw)
}

// workers is how many of b's replays run at once: its concurrency, or by
// default 8 live and the runner's Workers served from the record.
func (r *BatchRunner) workers(b *Batch) int {
	switch {
	case b.Concurrency > 0:
		return b.Concurrency
	case b.Live():
		return DefaultConcurrency
	}
	return r.Workers
}

// BatchRunner replays batches in the background: the ones this replica accepts
// and, through leases, those another replica left unfinished.
type BatchRunner struct {
	Service *Service
	Store   BatchStore
	// Owner names this replica in leases.
	Owner string
	// Workers replay in parallel (default: the number of CPUs).
	Workers int
	// Lease is how long a batch stays leased without renewal (default 30 s).
	Lease time.Duration
	// Poll is how often to look for batches left unfinished (default Lease/2).
	Poll time.Duration
	// FollowPoll is how often Follow reads a batch's progress with no word
	// of a change (default DefaultFollowPoll).
	FollowPoll time.Duration
	Logger     *slog.Logger

	wake chan struct{}
	once sync.Once
	// hub wakes the followers of the batches this server changes.
	hub batchHub
}

func (r *BatchRunner) init() {
	r.once.Do(func() {
		r.wake = make(chan struct{}, 1)
		if r.Workers <= 0 {
			r.Workers = runtime.NumCPU()
		}
		if r.Lease <= 0 {
			r.Lease = 30 * time.Second
		}
		if r.Poll <= 0 {
			r.Poll = r.Lease / 2
		}
		if r.Logger == nil {
			r.Logger = slog.New(slog.DiscardHandler)
		}
	})
}

// LeaseUntil is the end of a lease taken now.
func (r *BatchRunner) LeaseUntil(now time.Time) time.Time {
	r.init()
	return now.Add(r.Lease)
}

// Wake makes Run look for work now (after a batch was created here).
func (r *BatchRunner) Wake() {
	r.init()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run replays batches until ctx ends, one at a time, each with Workers in
// parallel. When ctx ends, Run gives up the lease of the batch it was
// replaying, and returns once its workers have stopped.
func (r *BatchRunner) Run(ctx context.Context) {
	r.init()
	t := time.NewTicker(r.Poll)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			now := r.Service.now()
			b, err := r.Store.ClaimBatch(ctx, r.Owner, now, now.Add(r.Lease))
			if err != nil {
				if ctx.Err() == nil {
					r.Logger.Error("claim replay batch", "error", err)
				}
				break
			}
			if b == nil {
				break
			}
			if !r.runBatch(ctx, b) {
				break // wait before claiming again rather than spin on a failing store
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
	}
}

// errLost stops a batch whose lease is gone: cancelled, or taken over.
var errLost = errors.New("replay batch lease lost")

// runBatch replays the batch's pending workflows and finishes it; false
// when the batch could not be finished (it stays leased here, and Run
// tries again after Poll).
func (r *BatchRunner) runBatch(ctx context.Context, b *Batch) bool {
	log := r.Logger.With("batch", b.ID)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Keep the lease while working; a lost lease stops the workers. The
	// renewal stops, and is waited for, before the batch is finished or
	// its lease given up, so no renewal lands after either.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(r.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-t.C:
				if err := r.Store.RenewBatch(renewCtx, b.ID, r.Owner, r.Service.now().Add(r.Lease)); err != nil {
					if renewCtx.Err() == nil {
						cancel(errLost)
					}
					return
				}
			}
		}
	}()
	target, prog, err := r.target(ctx, b)
	if err == nil {
		b.checks, err = CompileChecks(b.Spec, r.Service.Judge)
	}
	if err == nil {
		err = r.replayPending(ctx, b, target, prog)
	}
	stopRenewing()
	<-renewed
	status, msg := BatchCompleted, ""
	switch {
	case errors.Is(context.Cause(ctx), errLost):
		log.Info("replay batch stopped: cancelled or taken over")
		return true
	case ctx.Err() != nil:
		// Shutting down: give the lease up, so a restart or another
		// replica resumes the batch at once rather than when it expires.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := r.Store.RenewBatch(rctx, b.ID, r.Owner, r.Service.now()); err != nil && !problem.Is(err, problem.Conflict) {
			log.Warn("release replay batch lease", "error", err)
		}
		return false
	case err != nil:
		status, msg = BatchFailed, err.Error()
		log.Error("replay batch failed", "error", err)
	}
	if _, err := r.Store.FinishBatch(context.WithoutCancel(ctx), b.ID, status, msg, r.Service.now()); err != nil {
		log.Error("finish replay batch", "error", err)
		return false
	}
	r.hub.notify(b.ID)
	return true
}

func (r *BatchRunner) target(ctx context.Context, b *Batch) (*agent.Version, *agent.Program, error) {
	name, version, err := ParseTarget(b.Target)
	if err != nil {
		return nil, nil, err
	}
	v, err := r.Service.Versions.AgentVersion(ctx, b.Tenant, name, version)
	if err != nil {
		return nil, nil, err
	}
	if err := v.CheckLive(); err != nil {
		return nil, nil, err
	}
	prog, err := r.Service.program(ctx, v)
	if err != nil {
		return nil, nil, err
	}
	return v, prog, nil
}

// replayPending feeds the pending workflows, a page at a time, to the
// workers, whose replays one writer stores a group at a time: memory holds
// a page and a group, whatever the batch's size.
func (r *BatchRunner) replayPending(ctx context.Context, b *Batch, v *agent.Version, prog *agent.Program) error {
	const pageSize, groupSize = 256, 256
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	items := make(chan BatchItem)
	replays := make(chan BatchReplay, groupSize)
	var workers sync.WaitGroup
	for range r.workers(b) {
		workers.Go(func() {
			for it := range items {
				rp, err := r.replayItem(ctx, b, v, prog, it)
				if err != nil {
					cancel(err)
					return
				}
				select {
				case replays <- BatchReplay{Position: it.Position, Replay: rp}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		r.storeReplays(ctx, cancel, b.ID, replays, groupSize)
	}()

	after := -1
feed:
	for ctx.Err() == nil {
		page, err := r.Store.PendingItems(ctx, b.ID, after, pageSize)
		if err != nil {
			cancel(err)
			break
		}
		for _, it := range page {
			select {
			case items <- it:
			case <-ctx.Done():
				break feed
			}
			after = it.Position
		}
		if len(page) < pageSize {
			break
		}
	}
	close(items)
	workers.Wait()
	close(replays)
	<-writerDone
	return context.Cause(ctx)
}

// storeReplays stores the replays as they come, each time all those
// waiting (up to limit): while one group is written the next gathers.
func (r *BatchRunner) storeReplays(ctx context.Context, fail context.CancelCauseFunc, batchID string, replays <-chan BatchReplay, limit int) {
	group := make([]BatchReplay, 0, limit)
	for first := range replays {
		group = append(group[:0], first)
	gather:
		for len(group) < limit {
			select {
			case br, ok := <-replays:
				if !ok {
					break gather
				}
				group = append(group, br)
			default:
				break gather
			}
		}
		if ctx.Err() != nil {
			continue // drain: the batch stops
		}
		if err := r.addReplays(ctx, batchID, group); err != nil {
			fail(err)
		}
	}
}

// addReplays stores a group of replays and wakes the batch's followers. A
// panic in the store fails the batch, which claimed again would panic
// again, and logs its stack.
func (r *BatchRunner) addReplays(ctx context.Context, batchID string, group []BatchReplay) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.Logger.Error("storing a replay batch's replays panicked; failing the batch", "batch", batchID,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = errors.New("the server failed while storing the batch's replays")
		}
	}()
	n, err := r.Store.AddBatchReplays(ctx, batchID, group)
	if n > 0 {
		r.hub.notify(batchID)
	}
	return err
}

// replayItem replays one workflow of the batch. A workflow that cannot be
// replayed gets a replay that says why. One whose replay panicked gets a
// failed replay with error code internal, and the batch goes on: claimed
// again, the batch would run into the same panic.
func (r *BatchRunner) replayItem(ctx context.Context, b *Batch, v *agent.Version, prog *agent.Program, it BatchItem) (rp *Replay, err error) {
	now := r.Service.now()
	rp = &Replay{ID: ids.NewAt(ids.Replay, now), Status: StatusCompleted, Tenant: b.Tenant, WorkflowID: it.WorkflowID, Target: v.Ref(),
		DryRun: true, Creator: b.Creator, CreatedAt: now}
	// The replay's span: its completions' spans and its evaluation events
	// are in it.
	ctx, span := tracer.Start(ctx, "replay "+v.Ref(), trace.WithAttributes(attribute.String("agentplane.replay_id", rp.ID),
		attribute.String("agentplane.batch_id", b.ID), attribute.String("agentplane.workflow_id", it.WorkflowID)))
	defer span.End()
	defer func() {
		if v := recover(); v != nil {
			r.Logger.Error("replay of a batch's workflow panicked; storing it failed", "batch", b.ID,
				"workflow_id", it.WorkflowID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			rp.ReplayOutcome, rp.ReplayError = agent.OutcomeFailed, "the server failed while replaying the workflow"
			rp.ReplayErrorCode, rp.Steps, rp.Delta, err = workflow.ErrorCodeInternal, []Entry{}, Delta{}, nil
		}
	}()
	wf, err := r.Service.Workflows.Workflow(ctx, b.Tenant, it.WorkflowID)
	if err != nil {
		return nil, err
	}
	rp.OriginalVersion, rp.OriginalOutcome, rp.Mode = wf.Agent+"@"+wf.AgentVersion, wf.Outcome, b.Mode.WithDefaults()
	rp.Faults = b.Spec.Faults
	var j Journal
	if rp.Live() {
		j = &itemJournal{store: r.Store, batchID: b.ID, workflowID: wf.ID}
	}
	err = r.Service.dryRun(ctx, wf, v, prog, rp, j)
	if p := problem.As(err); p != nil && p.Code == problem.WorkflowNotReplayable {
		rp.ReplayOutcome, rp.ReplayError, rp.Steps = agent.OutcomeFailed, p.Detail, []Entry{}
	} else if err != nil {
		return nil, err
	}
	rp.Checks = b.checks.Run(ctx, CaseOf(wf, rp, it.Expected))
	emitEvaluations(ctx, b, rp)
	return rp, nil
}

// emitEvaluations emits each check and judge result of rp as a
// gen_ai.evaluation.result log event (OpenTelemetry GenAI conventions,
// docs/observability.md): the check's name, the judge's score, "pass" or
// "fail" as label, the judge's reason or why the check errored as
// explanation, and the replayed workflow as the conversation.
func emitEvaluations(ctx context.Context, b *Batch, rp *Replay) {
	for _, c := range rp.Checks {
		ev := telemetry.Evaluation{Name: c.Name, Score: c.Score, Explanation: c.Reason, Attrs: []attribute.KeyValue{
			telemetry.KeyConversationID.String(rp.WorkflowID),
			attribute.String("agentplane.replay_id", rp.ID),
			attribute.String("agentplane.batch_id", b.ID),
			attribute.String("agentplane.tenant", rp.Tenant),
		}}
		switch c.Result() {
		case ResultPassed:
			ev.Label = "pass"
		case ResultFailed:
			ev.Label = "fail"
		default:
			ev.Explanation, ev.ErrorType = c.Error, EvaluationError
		}
		telemetry.EmitEvaluation(ctx, ev)
	}
}

var tracer = telemetry.Tracer("github.com/agentplane/agentplane/internal/replay")

// EvaluationError is the error.type of the evaluation event of a check
// that could not be evaluated.
const EvaluationError = "evaluation_error"

// dryRun replays wf against v (prog, when v is defined) from its record,
// or live as r.Mode says (journaled in j when set), and fills r's outcome,
// steps, delta, completions and usage.
func (s *Service) dryRun(ctx context.Context, wf *workflow.Workflow, v *agent.Version, prog *agent.Program, r *Replay, j Journal) error {
	if !wf.Done() {
		return problem.New(problem.WorkflowNotReplayable,
			"workflow %s is still %s: replay it once it has finished", wf.ID, wf.Status)
	}
	steps, err := s.Workflows.Steps(ctx, wf.ID, 0)
	if err != nil {
		return err
	}
	comps, err := s.Workflows.Completions(ctx, wf.ID)
	if err != nil {
		return err
	}
	if v.External != nil {
		return s.dryRunExternal(ctx, wf, v, r, steps, comps, j)
	}
	agentName, _, _ := strings.Cut(r.Target, "@")
	live := &Live{Mode: r.Mode.WithDefaults(), Tenant: wf.Tenant, Agent: agentName, Models: s.Models, Reader: s.Reader, Journal: j,
		Faults: r.Faults}
	if s.Masks != nil {
		var tools []string
		for _, st := range steps {
			if st.Tool != "" && !slices.Contains(tools, st.Tool) {
				tools = append(tools, st.Tool)
			}
		}
		if live.Mask, err = s.Masks.Masking(ctx, wf.Tenant, tools); err != nil {
			return err
		}
	}
	run, err := Rerun(ctx, prog, &History{Workflow: wf, Steps: steps, Completions: comps}, live)
	if errors.Is(err, ErrBadHistory) {
		return problem.Wrap(problem.WorkflowNotReplayable, err, "workflow %s cannot be replayed: %v", wf.ID, err)
	}
	if err != nil {
		return err
	}
	return r.fill(wf, steps, comps, run)
}

// fill fills r from the run that replayed wf (its recorded steps and
// completions comps): outcome, the step diff, usage and, for a live
// replay, both sides' completions.
func (r *Replay) fill(wf *workflow.Workflow, steps []workflow.Step, comps map[int]json.RawMessage, run *Run) error {
	r.ReplayOutcome, r.ReplayError, r.ReplayStatus, r.ReplayOutput = run.Outcome, run.Error, run.Status, run.Output
	r.Steps, r.Delta = Diff(steps, run.Steps)
	orig, err := originalCompletions(comps)
	if err != nil {
		return problem.Wrap(problem.WorkflowNotReplayable, err, "workflow %s cannot be replayed: %v", wf.ID, err)
	}
	r.Usage = Usages{Original: usageOf(orig), Replay: usageOf(run.Completions)}
	if r.Live() {
		r.OriginalCompletions, r.Completions = orig, run.Completions
	}
	return nil
}

// dryRunExternal replays wf against the external version v: the agent is
// invoked through a gateway serving wf's record (steps, comps), as r.Mode
// says, its live completions journaled in j when set, and r is filled as
// dryRun fills it.
func (s *Service) dryRunExternal(ctx context.Context, wf *workflow.Workflow, v *agent.Version, r *Replay, steps []workflow.Step, comps map[int]json.RawMessage, j Journal) error {
	mode := r.Mode.WithDefaults()
	req := workflow.ExternalReplay{ID: r.ID, Original: wf, Steps: steps, Completions: comps, Target: v,
		LiveLLM: mode.Live(), ReadUnrecorded: mode.UnrecordedCalls == UnrecordedRead, Faults: r.Faults}
	if j != nil && mode.Live() {
		journaled, err := j.Journaled(ctx)
		if err != nil {
			return err
		}
		for _, c := range journaled {
			req.Journaled = append(req.Journaled, workflow.ReplayCompletion{N: c.N, Step: c.Step, RequestSHA256: c.RequestSHA256,
				Request: c.Request, Response: c.Response, Cost: c.Cost, Wire: c.Wire})
		}
		req.Keep = func(ctx context.Context, c workflow.ReplayCompletion) error { return j.Keep(ctx, completionOf(c)) }
	}
	run, err := s.Externals.ReplayExternal(ctx, req)
	if err != nil {
		return err
	}
	kept := make([]Completion, len(run.Completions))
	for i, c := range run.Completions {
		kept[i] = completionOf(c)
	}
	return r.fill(wf, steps, comps, &Run{Outcome: run.Outcome, Error: run.Error, Status: run.Status, Output: run.Output,
		Steps: run.Steps, Completions: kept})
}

// completionOf is an external dry run's completion as a replay keeps it.
func completionOf(c workflow.ReplayCompletion) Completion {
	return Completion{N: c.N, Step: c.Step, RequestSHA256: c.RequestSHA256, Request: c.Request, Response: c.Response, Cost: c.Cost, Wire: c.Wire}
}
