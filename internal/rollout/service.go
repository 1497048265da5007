package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Service starts, shows and ends rollouts, chooses each invocation's arm
// (workflow.ArmChooser) and counts each finished run (Finished).
type Service struct {
	Store    Store
	Versions agent.VersionStore
	// Workflows reads a finished workflow's steps and completions.
	Workflows RunReader
	// Shadows replays a workflow against a shadow rollout's target as a
	// dry run; nil makes no shadow runs.
	Shadows ShadowRunner
	Now     func() time.Time
	Logger  *slog.Logger
	// MaxShadows bounds the shadow replays running at once on this
	// replica (DefaultMaxShadows when 0); more wait for a place.
	MaxShadows int
	// MaxShadowsWaiting bounds the shadow replays waiting for a place on
	// this replica (DefaultMaxShadowsWaiting when 0); past it a finished
	// workflow's replay is not made, and logged.
	MaxShadowsWaiting int

	sticky programs
	checks checkCache

	shadowOnce  sync.Once
	shadowSlots chan struct{}
	shadowQueue chan struct{}
	shadowing   sync.WaitGroup
}

// DefaultMaxShadows is how many shadow replays a replica runs at once.
const DefaultMaxShadows = 16

// DefaultMaxShadowsWaiting is how many shadow replays may wait for a place
// on a replica.
const DefaultMaxShadowsWaiting = 1024

// RunReader reads what checks see of a finished workflow.
type RunReader interface {
	Steps(ctx context.Context, workflowID string, afterSeq int) ([]workflow.Step, error)
	WorkflowCompletions(ctx context.Context, workflowID string) ([]workflow.Completion, error)
}

// Put starts a rollout of the agent, or returns the active one this same
// request started (created false). Another active rollout is a
// problem.Conflict; bad input a validation problem naming each field.
func (s *Service) Put(ctx context.Context, tenant, agentName string, req Request, actor audit.Actor, rec *audit.Record) (v *View, created bool, err error) {
	hash, err := requestHash(req)
	if err != nil {
		return nil, false, err
	}
	a, err := s.Versions.Agent(ctx, tenant, agentName)
	if err != nil {
		return nil, false, err
	}
	if active, err := s.Store.ActiveRollout(ctx, tenant, agentName); err == nil {
		if active.RequestHash == hash {
			v, err := s.view(ctx, active)
			return v, false, err
		}
		// Bad input is named before the conflict, whose fix it would not be.
		if _, err := s.validate(ctx, a, req); err != nil {
			return nil, false, err
		}
		return nil, false, conflict(active)
	} else if !problem.Is(err, problem.NotFound) {
		return nil, false, err
	}
	r, err := s.validate(ctx, a, req)
	if err != nil {
		return nil, false, err
	}
	now := s.now()
	r.ID, r.Tenant, r.RequestHash, r.CreatedBy, r.CreatedAt = ids.NewAt(ids.Rollout, now), tenant, hash, actor.Sub, now
	addDetails(rec, map[string]any{"rollout_id": r.ID, "target": r.Target, "percent": r.Percent, "mode": r.Mode})
	if err := s.Store.CreateRollout(ctx, r, rec, event(r, webhook.RolloutStarted, now)); err != nil {
		if problem.Is(err, problem.Conflict) {
			if active, aerr := s.Store.ActiveRollout(ctx, tenant, agentName); aerr == nil && active.RequestHash == hash {
				v, err := s.view(ctx, active)
				return v, false, err
			}
		}
		return nil, false, err
	}
	v, err = s.view(ctx, r)
	return v, true, err
}

// addDetails adds to a request's audit record's details what the rollout
// is.
func addDetails(rec *audit.Record, add map[string]any) {
	if rec == nil {
		return
	}
	details := map[string]any{}
	_ = json.Unmarshal(rec.Details, &details) // a record's details are an object or none
	for k, v := range add {
		details[k] = v
	}
	rec.Details = audit.Details(details)
}

func conflict(active *Rollout) error {
	return problem.New(problem.Conflict, "agent %s has an active rollout %s of version %s: end it first (DELETE /v1/agents/%s/rollout)",
		active.Agent, active.ID, active.Target, active.Agent)
}

// requestHash identifies a request by its JSON, defaults filled in.
func requestHash(req Request) (string, error) {
	if req.Mode == "" {
		req.Mode = Canary
	}
	if req.MinRuns == nil {
		n := DefaultMinRuns
		req.MinRuns = &n
	}
	b, err := json.Marshal(req)
	if err != nil {
		return "", problem.Wrap(problem.ValidationFailed, err, "the rollout is not JSON")
	}
	return workflow.Fingerprint(b), nil
}

// validate checks a request against the agent and makes its rollout.
func (s *Service) validate(ctx context.Context, a *agent.Agent, req Request) (*Rollout, error) {
	var errs []problem.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, problem.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	r := &Rollout{Agent: a.Name, BaseVersion: a.DefaultVersion, Sticky: req.Sticky, Mode: req.Mode, State: Active,
		Spec: replay.Spec{Checks: req.Checks, Gate: req.Gate}, MinRuns: DefaultMinRuns, AutoPromote: req.AutoPromote}
	if r.Mode == "" {
		r.Mode = Canary
	}
	if a.ArchivedAt != nil {
		return nil, problem.New(problem.AgentVersionArchived, "agent %s is archived: it takes no rollout", a.Name)
	}
	s.checkTarget(ctx, a, req.Target, r, add)
	switch {
	case req.Percent == nil:
		add("percent", "is required: the share of invocations (canary) or finished workflows (shadow), from 0 to 100")
	case !validPercent(*req.Percent):
		add("percent", "must be from 0 to 100")
	default:
		r.Percent = *req.Percent
	}
	if req.Sticky != "" {
		if _, msg := s.sticky.compile(req.Sticky); msg != "" {
			add("sticky", "%s", msg)
		}
	}
	if n := req.MinRuns; n != nil {
		if *n < 1 || *n > MaxMinRuns {
			add("min_runs", "must be from 1 to %d (default %d)", MaxMinRuns, DefaultMinRuns)
		}
		r.MinRuns = *n
	}
	switch r.Mode {
	case Canary:
		if _, err := replay.CompileRunChecks(r.Spec); err != nil {
			errs = append(errs, fieldErrors(err)...)
		}
	case Shadow:
		if req.Sticky != "" {
			add("sticky", "applies to a canary only: a shadow replays a share of the finished workflows, chosen by their ids")
		}
		if _, err := replay.CompileChecks(r.Spec, nil); err != nil {
			errs = append(errs, fieldErrors(err)...)
		}
	default:
		add("mode", "must be %q (a share of invocations runs the target) or %q (finished workflows are replayed against the target as dry runs)", Canary, Shadow)
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	return r, nil
}

// checkTarget checks that target names a live version of the agent other
// than its default, and sets it on r.
func (s *Service) checkTarget(ctx context.Context, a *agent.Agent, target string, r *Rollout, add func(field, format string, args ...any)) {
	if target == "" {
		add("target", "is required: the version to roll out (GET /v1/agents/%s/versions lists them)", a.Name)
		return
	}
	version, own := splitTarget(a.Name, target)
	if !own {
		add("target", "%q is a version of another agent: name a version of %s", target, a.Name)
		return
	}
	v, err := s.Versions.AgentVersion(ctx, a.Tenant, a.Name, version)
	switch {
	case problem.Is(err, problem.NotFound), problem.Is(err, problem.AgentVersionNotFound):
		add("target", "agent %s has no version %q: GET /v1/agents/%s/versions lists them", a.Name, version, a.Name)
		return
	case err != nil:
		add("target", "cannot be read: %v", err)
		return
	case v.ArchivedAt != nil:
		add("target", "%s is archived: deploy a new version to roll out", v.Ref())
		return
	case v.Version == a.DefaultVersion:
		add("target", "%s is the default version already: roll out another version", v.Ref())
		return
	}
	r.Target = v.Version
}

// fieldErrors are the field errors of a validation problem.
func fieldErrors(err error) []problem.FieldError {
	if pe := problem.As(err); len(pe.Errors) > 0 {
		return pe.Errors
	}
	return []problem.FieldError{{Field: "checks", Message: err.Error()}}
}

// Get returns the agent's newest rollout with its arms side by side.
func (s *Service) Get(ctx context.Context, tenant, agentName string) (*View, error) {
	if _, err := s.Versions.Agent(ctx, tenant, agentName); err != nil {
		return nil, err
	}
	r, err := s.Store.LatestRollout(ctx, tenant, agentName)
	if problem.Is(err, problem.NotFound) {
		return nil, problem.New(problem.NotFound, "agent %s has no rollout: start one with PUT /v1/agents/%s/rollout", agentName, agentName)
	}
	if err != nil {
		return nil, err
	}
	return s.view(ctx, r)
}

// End ends the agent's active rollout: the default version takes every
// invocation again.
func (s *Service) End(ctx context.Context, tenant, agentName string, rec *audit.Record) (*View, error) {
	r, err := s.Store.ActiveRollout(ctx, tenant, agentName)
	if problem.Is(err, problem.NotFound) {
		if _, aerr := s.Versions.Agent(ctx, tenant, agentName); aerr != nil {
			return nil, aerr
		}
		return nil, problem.New(problem.NotFound, "agent %s has no active rollout", agentName)
	}
	if err != nil {
		return nil, err
	}
	now := s.now()
	r.State, r.EndedAt = Ended, now
	addDetails(rec, map[string]any{"rollout_id": r.ID, "target": r.Target})
	ok, err := s.Store.EndRollout(ctx, tenant, r.ID, Ended, "", now, rec, event(r, webhook.RolloutEnded, now))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, problem.New(problem.Conflict, "rollout %s ended meanwhile: GET /v1/agents/%s/rollout shows how", r.ID, agentName)
	}
	return s.Get(ctx, tenant, agentName)
}

// view is a rollout with its arms.
func (s *Service) view(ctx context.Context, r *Rollout) (*View, error) {
	totals, counts, err := s.Store.RolloutTotals(ctx, r.Tenant, r.ID)
	if err != nil {
		return nil, err
	}
	def := r.BaseVersion
	if a, err := s.Versions.Agent(ctx, r.Tenant, r.Agent); err == nil && r.State == Active {
		def = a.DefaultVersion
	}
	return viewOf(r, def, totals, counts), nil
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Microsecond)
	}
	return time.Now().UTC().Truncate(time.Microsecond)
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
