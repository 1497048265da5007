package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Programs compiles agent versions against the registered tools
// (workflow.Runner).
type Programs interface {
	Program(ctx context.Context, v *agent.Version) (*agent.Program, error)
}

// Runner waits for the workflows of replays that are not dry runs
// (workflow.Runner).
type Runner interface {
	Finished(ctx context.Context, tenant, id string) (*workflow.Workflow, []workflow.Step, error)
}

// Invoker starts the workflows of replays that are not dry runs, or finds
// the one an idempotency key already made (workflow.Invoker): the invoke
// use case every front door shares.
type Invoker interface {
	Find(ctx context.Context, tenant, key, fingerprint string, ttl time.Duration) (*workflow.Workflow, error)
	Start(ctx context.Context, in workflow.Invocation) (workflow.Invoked, error)
}

// Service makes replays.
type Service struct {
	Workflows workflow.Store
	Versions  agent.VersionStore
	Programs  Programs
	Runner    Runner
	Invoker   Invoker
	Store     Store
	// Judge scores replays for batches' judge checks; nil refuses them.
	Judge Judge
	// Models requests live completions (llm: live); nil refuses them.
	Models Models
	// Reader makes unrecorded reads (unrecorded_calls: read); nil skips them.
	Reader Reader
	// Masks masks what a dry run compares with a masked history; nil
	// compares as it is.
	Masks Masks
	// Externals makes dry runs of external versions; nil refuses them.
	Externals Externals
	// Tools looks up the tools and operations a request's faults name;
	// nil refuses faults.
	Tools  fault.Tools
	Now    func() time.Time
	Logger *slog.Logger
}

// Externals makes dry runs of external versions (workflow.Runner): the
// agent is invoked through a gateway that serves the original's record.
type Externals interface {
	ReplayExternal(ctx context.Context, req workflow.ExternalReplay) (*workflow.ExternalReplayRun, error)
}

// Masks makes the Masking of a tenant's history that called tools.
type Masks interface {
	Masking(ctx context.Context, tenant string, tools []string) (Masking, error)
}

// Request asks for one replay.
type Request struct {
	Tenant     string
	WorkflowID string
	// Target is name@version.
	Target string
	DryRun bool
	// Mode says how a dry run serves completions and unrecorded calls.
	Mode Mode
	// Faults answer the calls they apply to, in a dry or a real replay,
	// instead of the record or the tools (see package fault).
	Faults []fault.Fault
	// Caller is who replays: a real run runs under their scopes.
	Caller workflow.Caller
	// MaxToolCalls bounds a real run (the original's when 0).
	RequestID, TraceID string
	// Async returns a real replay as soon as it is stored, running; it is
	// completed when its new workflow ends.
	Async bool
	// Stored, when set, is called once a real replay is stored running,
	// with the request's record, before its workflow starts.
	Stored func(r *Replay)
	// IdempotencyKey and RequestHash, when set, are stored with a real
	// replay's new workflow (workflow.Invocation): a repeat of the request
	// gets the replay the key made (Replay.Repeat), found through its
	// workflow (Store.ReplayOfWorkflow), and a request with the key and
	// another hash is refused (workflow.ErrKeyReused). KeyTTL is how long
	// after its workflow started a key is honoured (0: as long as it is
	// kept).
	IdempotencyKey, RequestHash string
	KeyTTL                      time.Duration
}

// ParseTarget splits name@version; both parts are required.
func ParseTarget(ref string) (name, version string, err error) {
	name, version, ok := strings.Cut(ref, "@")
	if !ok || !agent.NameRE.MatchString(name) || (!agent.VersionRE.MatchString(version) && name != agent.OperationAgent) {
		return "", "", problem.Validation(problem.FieldError{Field: "target_agent_version",
			Message: fmt.Sprintf("%q is not name@version (for example fraud-triage@2)", ref)})
	}
	return name, version, nil
}

// Replay replays a finished workflow of the tenant against the target
// version and stores the result with rec, its audit record. A dry run
// serves every call from the record; otherwise a real new workflow runs
// under the caller's scopes and the request waits for its end.
func (s *Service) Replay(ctx context.Context, req Request, rec *audit.Record) (*Replay, error) {
	name, version, err := ParseTarget(req.Target)
	if err != nil {
		return nil, err
	}
	if !req.DryRun && req.IdempotencyKey != "" {
		made, err := s.Invoker.Find(ctx, req.Tenant, req.IdempotencyKey, req.RequestHash, req.KeyTTL)
		if err != nil {
			return nil, err
		}
		if made != nil {
			return s.repeat(ctx, req, made)
		}
	}
	if errs := req.Mode.Check(); len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	if req.Mode.Live() && s.Models == nil {
		return nil, problem.Field("llm", "live replays need the server's model service, and this server has none: replay with llm recorded")
	}
	if err := s.CheckFaults(ctx, req.Tenant, req.Faults); err != nil {
		return nil, err
	}
	wf, err := s.Workflows.Workflow(ctx, req.Tenant, req.WorkflowID)
	if err != nil {
		return nil, err
	}
	if !wf.Done() {
		return nil, problem.New(problem.WorkflowNotReplayable,
			"workflow %s is still %s: replay it once it has finished", wf.ID, wf.Status)
	}
	v, err := agent.OperationVersions{VersionStore: s.Versions}.AgentVersion(ctx, req.Tenant, name, version)
	if problem.Is(err, problem.NotFound) {
		err = problem.New(problem.AgentVersionNotFound, "no agent version %s: deploy it first (POST /v1/agents)", req.Target)
	}
	if err != nil {
		return nil, err
	}
	if err := v.CheckLive(); err != nil {
		return nil, err
	}
	now := s.now()
	r := &Replay{
		ID: ids.NewAt(ids.Replay, now), Tenant: req.Tenant, WorkflowID: wf.ID, Target: v.Ref(), DryRun: req.DryRun,
		OriginalVersion: wf.Agent + "@" + wf.AgentVersion, OriginalOutcome: wf.Outcome,
		Creator:   Creator{Sub: req.Caller.Sub, ClientID: req.Caller.ClientID, Scopes: req.Caller.Scopes},
		CreatedAt: now, Faults: req.Faults,
	}
	if !req.DryRun {
		return s.realReplay(ctx, req, wf, v, r, rec)
	}
	r.Status = StatusCompleted
	r.Mode = req.Mode.WithDefaults()
	prog, err := s.program(ctx, v)
	if err != nil {
		return nil, err
	}
	if err := s.dryRun(ctx, wf, v, prog, r, nil); err != nil {
		return nil, err
	}
	s.describe(rec, r)
	if err := s.Store.CreateReplay(ctx, r, rec); err != nil {
		return nil, err
	}
	return r, nil
}

// CheckFaults refuses faults that do not compile or that name a tool or an
// operation the tenant does not have, naming the field (faults[i].…).
func (s *Service) CheckFaults(ctx context.Context, tenant string, faults []fault.Fault) error {
	if len(faults) == 0 {
		return nil
	}
	if s.Tools == nil {
		return problem.Field("faults", "this server injects no faults: replay without them")
	}
	errs, err := fault.Check(ctx, s.Tools, tenant, "faults", faults)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	return nil
}

// describe fills in rec, the audit record of the request that made r.
func (s *Service) describe(rec *audit.Record, r *Replay) {
	if rec == nil {
		return
	}
	rec.Resource = audit.Resource{Type: "replay", ID: r.ID}
	rec.WorkflowID = r.WorkflowID
	rec.Details = audit.Details(map[string]any{
		"workflow_id": r.WorkflowID, "target_agent_version": r.Target, "dry_run": r.DryRun,
		"original_outcome": r.OriginalOutcome, "replay_outcome": r.ReplayOutcome,
		"replay_workflow_id": r.ReplayWorkflowID, "llm": r.LLM, "unrecorded_calls": r.UnrecordedCalls,
		"faults": len(r.Faults),
	})
}

// realReplay runs a real new workflow for r. The replay is stored running,
// naming the workflow's id, before the workflow is: whichever replica
// finishes the workflow completes the replay (Finished), and one that
// crashed in between leaves a running replay whose workflow does not exist,
// which CompleteRunning fails. Unless req.Async, it waits for the end with
// ctx; a ctx that ends first loses nothing (the replay completes anyway).
func (s *Service) realReplay(ctx context.Context, req Request, wf *workflow.Workflow, v *agent.Version, r *Replay, rec *audit.Record) (*Replay, error) {
	// Detached from the request: what is stored is finished whatever the
	// client does.
	bg := context.WithoutCancel(ctx)
	r.Status, r.ReplayWorkflowID = StatusRunning, ids.NewAt(ids.Workflow, r.CreatedAt)
	s.describe(rec, r)
	if err := s.Store.CreateReplay(bg, r, rec); err != nil {
		return nil, err
	}
	if req.Stored != nil {
		req.Stored(r)
	}
	started, err := s.Invoker.Start(bg, workflow.Invocation{StartRequest: workflow.StartRequest{
		ID: r.ReplayWorkflowID, Tenant: req.Tenant, Agent: v.Name, Version: v.Version, Goal: wf.Goal, Context: wf.Input().Context,
		Caller: req.Caller, MaxToolCalls: &wf.MaxToolCalls, RequestID: req.RequestID, TraceID: req.TraceID,
		ReplayOf: wf.ID, Faults: req.Faults, IdempotencyKey: req.IdempotencyKey, RequestHash: req.RequestHash,
	}, TTL: req.KeyTTL})
	if err == nil && started.Repeat {
		// A request with the same key made its replay first: this one's
		// ends here, saying so, and the request gets that one's.
		s.fail(bg, r, fmt.Errorf("a request with the same Idempotency-Key made workflow %s first", started.Workflow.ID))
		return s.repeat(ctx, req, started.Workflow)
	}
	if err != nil {
		if problem.Is(err, problem.ValidationFailed) {
			// The target's inputs refuse the original context: nothing ran.
			c := *r
			c.ReplayWorkflowID, c.ReplayOutcome, c.ReplayError = "", agent.OutcomeFailed, problem.As(err).Error()
			return s.store(bg, &c, nil)
		}
		s.fail(bg, r, err)
		return nil, err
	}
	if req.Async {
		return r, nil
	}
	return s.Await(ctx, r)
}

// repeat returns the real replay that made wf, for a request repeating the
// one that made it (Replay.Repeat): at once when async, else once it has
// completed.
func (s *Service) repeat(ctx context.Context, req Request, wf *workflow.Workflow) (*Replay, error) {
	r, err := s.Store.ReplayOfWorkflow(ctx, wf.ID)
	if err != nil {
		return nil, err
	}
	if !req.Async {
		if r, err = s.Await(ctx, r); err != nil {
			return nil, err
		}
	}
	c := *r
	c.Repeat = true
	return &c, nil
}

// Await waits with ctx for the end of a real replay's workflow and returns
// the replay completed. ctx bounds the wait only: the replay completes
// when its workflow ends whether or not anyone waits.
func (s *Service) Await(ctx context.Context, r *Replay) (*Replay, error) {
	if r.Status != StatusRunning {
		return r, nil
	}
	if _, _, err := s.Runner.Finished(ctx, r.Tenant, r.ReplayWorkflowID); err != nil {
		return nil, err
	}
	return s.complete(context.WithoutCancel(ctx), r)
}

// fail ends a running replay whose workflow was not stored: failed, with
// why. Logged nowhere: the caller returns err to its client.
func (s *Service) fail(ctx context.Context, r *Replay, err error) {
	c := *r
	c.Status, c.ReplayOutcome, c.ReplayErrorCode = StatusFailed, agent.OutcomeFailed, "internal"
	c.ReplayError = "its workflow " + r.ReplayWorkflowID + " was not started: " + err.Error()
	_, _ = s.Store.CompleteReplay(ctx, &c)
}

// complete fills in a running replay from its new workflow once that has
// ended; it returns the replay as stored (another replica may have
// completed it first), or r when its workflow still runs.
func (s *Service) complete(ctx context.Context, r *Replay) (*Replay, error) {
	if r.Status != StatusRunning {
		return r, nil
	}
	nw, err := s.Workflows.Workflow(ctx, r.Tenant, r.ReplayWorkflowID)
	if err != nil {
		return nil, err
	}
	if !nw.Done() {
		return r, nil
	}
	replayed, err := s.Workflows.Steps(ctx, nw.ID, 0)
	if err != nil {
		return nil, err
	}
	c := *r
	c.ReplayOutcome = nw.Outcome
	return s.store(ctx, &c, replayed)
}

// store diffs a real replay's run (replayed, none when it did not start)
// with the original and stores it completed.
func (s *Service) store(ctx context.Context, r *Replay, replayed []workflow.Step) (*Replay, error) {
	steps, err := s.Workflows.Steps(ctx, r.WorkflowID, 0)
	if err != nil {
		return nil, err
	}
	if replayed == nil {
		replayed = []workflow.Step{}
	}
	r.Steps, r.Delta = Diff(steps, replayed)
	if r.Usage, err = s.runUsage(ctx, r.WorkflowID, r.ReplayWorkflowID); err != nil {
		return nil, err
	}
	r.Status = StatusCompleted
	done, err := s.Store.CompleteReplay(ctx, r)
	if err != nil {
		return nil, err
	}
	if !done {
		return s.Store.Replay(ctx, r.Tenant, r.ID)
	}
	return r, nil
}

// Finished completes the replay whose new workflow wf just ended, if any:
// the runner calls it wherever a workflow ends (Runner.OnFinish).
func (s *Service) Finished(ctx context.Context, wf *workflow.Workflow) {
	if wf.ReplayOf == "" {
		return
	}
	r, err := s.Store.ReplayOfWorkflow(ctx, wf.ID)
	if err != nil {
		if !problem.Is(err, problem.NotFound) {
			s.logger().Warn("replay of a finished workflow not found", "workflow_id", wf.ID, "err", err)
		}
		return
	}
	if _, err := s.complete(ctx, r); err != nil {
		s.logger().Warn("replay not completed; the sweep retries", "replay_id", r.ID, "err", err)
	}
}

// orphanAfter is how long a running replay may name a workflow that does
// not exist before it is failed: its replica crashed before storing it.
const orphanAfter = 5 * time.Minute

// CompleteRunning completes the running replays whose workflows have
// ended (their replica crashed between the workflow's end and the
// replay's), and fails those whose workflow was never stored.
func (s *Service) CompleteRunning(ctx context.Context) error {
	rs, err := s.Store.RunningReplays(ctx, 100)
	if err != nil {
		return err
	}
	for _, r := range rs {
		_, err := s.complete(ctx, r)
		if problem.Is(err, problem.NotFound) && s.now().Sub(r.CreatedAt) > orphanAfter {
			s.fail(ctx, r, errors.New("the replica making it stopped first; replay again"))
			continue
		}
		if err != nil && !problem.Is(err, problem.NotFound) {
			// One replay that cannot be completed must not hold up the
			// others behind it: the next sweep tries it again.
			s.logger().Warn("running replay not completed", "replay_id", r.ID, "error", err)
		}
	}
	return nil
}

// RunSweeper calls CompleteRunning every interval until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := s.CompleteRunning(ctx); err != nil && ctx.Err() == nil {
			s.logger().Warn("running replays not swept", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// runUsage is the usage of two workflows' recorded completions: the
// original and the real run of a replay (none when it did not start).
func (s *Service) runUsage(ctx context.Context, originalID, replayID string) (Usages, error) {
	var u Usages
	sides := [2]*Usage{&u.Original, &u.Replay}
	for i, id := range []string{originalID, replayID} {
		if id == "" {
			continue
		}
		recorded, err := s.Workflows.Completions(ctx, id)
		if err != nil {
			return Usages{}, err
		}
		cs, err := originalCompletions(recorded)
		if err != nil {
			return Usages{}, fmt.Errorf("completions of %s: %w", id, err)
		}
		*sides[i] = usageOf(cs)
	}
	return u, nil
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// program is the compiled program of a version a replay runs against;
// none for an external version, whose dry runs invoke the agent
// (problem.Conflict when this server makes none).
func (s *Service) program(ctx context.Context, v *agent.Version) (*agent.Program, error) {
	if v.External != nil {
		if s.Externals == nil {
			return nil, problem.New(problem.Conflict, "%s is an external agent version, and this server makes no dry runs of external agents", v.Ref())
		}
		return nil, nil
	}
	return s.Programs.Program(ctx, v)
}
