package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Programs compiles agent versions against the registered tools
// (workflow.Runner).
type Programs interface {
	Program(ctx context.Context, v *agent.Version) (*agent.Program, error)
}

// Runner starts real workflows and waits for them (workflow.Runner), for
// replays that are not dry runs.
type Runner interface {
	Start(ctx context.Context, req workflow.StartRequest) (*workflow.Workflow, error)
	Finished(ctx context.Context, tenant, id string) (*workflow.Workflow, []workflow.Step, error)
}

// Service makes replays.
type Service struct {
	Workflows workflow.Store
	Versions  agent.VersionStore
	Programs  Programs
	Runner    Runner
	Store     Store
	// Judge scores replays for batches' judge checks; nil refuses them.
	Judge Judge
	// Models requests live completions (llm: live); nil refuses them.
	Models Models
	// Reader makes unrecorded reads (unrecorded_calls: read); nil skips them.
	Reader Reader
	Now    func() time.Time
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
	// Caller is who replays: a real run runs under their scopes.
	Caller workflow.Caller
	// MaxToolCalls bounds a real run (the original's when 0).
	RequestID, TraceID string
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
	if errs := req.Mode.Check(); len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	if req.Mode.Live() && s.Models == nil {
		return nil, problem.Field("llm", "live replays need the server's model service, and this server has none: replay with llm recorded")
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
	now := s.now()
	r := &Replay{
		ID: ids.NewAt(ids.Replay, now), Tenant: req.Tenant, WorkflowID: wf.ID, Target: v.Ref(), DryRun: req.DryRun,
		OriginalVersion: wf.Agent + "@" + wf.AgentVersion, OriginalOutcome: wf.Outcome,
		Creator:   Creator{Sub: req.Caller.Sub, ClientID: req.Caller.ClientID, Scopes: req.Caller.Scopes},
		CreatedAt: now,
	}
	if req.DryRun {
		r.Mode = req.Mode.WithDefaults()
		prog, err := s.Programs.Program(ctx, v)
		if err != nil {
			return nil, err
		}
		if err := s.dryRun(ctx, wf, prog, r, nil); err != nil {
			return nil, err
		}
	} else {
		steps, err := s.Workflows.Steps(ctx, wf.ID, 0)
		if err != nil {
			return nil, err
		}
		var replayed []workflow.Step
		nw, err := s.Runner.Start(ctx, workflow.StartRequest{
			Tenant: req.Tenant, Agent: v.Name, Version: v.Version, Goal: wf.Goal, Context: wf.Input().Context,
			Caller: req.Caller, MaxToolCalls: &wf.MaxToolCalls, RequestID: req.RequestID, TraceID: req.TraceID,
			ReplayOf: wf.ID,
		})
		if problem.Is(err, problem.ValidationFailed) {
			// The target's inputs refuse the original context: nothing ran.
			r.ReplayOutcome, r.ReplayError = agent.OutcomeFailed, problem.As(err).Error()
			replayed = []workflow.Step{}
		} else if err != nil {
			return nil, err
		} else {
			done, got, err := s.Runner.Finished(ctx, req.Tenant, nw.ID)
			if err != nil {
				return nil, err
			}
			r.ReplayWorkflowID, r.ReplayOutcome, replayed = done.ID, done.Outcome, got
		}
		r.Steps, r.Delta = Diff(steps, replayed)
		if r.Usage, err = s.runUsage(ctx, wf.ID, r.ReplayWorkflowID); err != nil {
			return nil, err
		}
	}
	if rec != nil {
		rec.Resource = audit.Resource{Type: "replay", ID: r.ID}
		rec.WorkflowID = wf.ID
		rec.Details = audit.Details(map[string]any{
			"workflow_id": wf.ID, "target_agent_version": r.Target, "dry_run": r.DryRun,
			"original_outcome": r.OriginalOutcome, "replay_outcome": r.ReplayOutcome,
			"replay_workflow_id": r.ReplayWorkflowID, "llm": r.LLM, "unrecorded_calls": r.UnrecordedCalls,
		})
	}
	if err := s.Store.CreateReplay(ctx, r, rec); err != nil {
		return nil, err
	}
	return r, nil
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
