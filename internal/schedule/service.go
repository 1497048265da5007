package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Input is the body of POST and PUT /v1/schedules.
type Input struct {
	Agent        string          `json:"agent"`
	Cron         string          `json:"cron"`
	Timezone     string          `json:"timezone"`
	Goal         string          `json:"goal"`
	Context      json.RawMessage `json:"context"`
	MaxToolCalls *int            `json:"max_tool_calls"`
	Overlap      string          `json:"overlap"`
	Paused       bool            `json:"paused"`
}

// Service creates, changes and triggers schedules for the API.
type Service struct {
	Store     Store
	Versions  agent.VersionStore
	Scheduler *Scheduler
	// MaxToolCalls is the largest max_tool_calls an invocation may set.
	MaxToolCalls int
	Now          func() time.Time
}

// check validates in into s, looking its agent (and version) up.
func (svc *Service) check(ctx context.Context, s *Schedule, in Input) error {
	s.Agent, s.Cron, s.Timezone, s.Goal, s.Context = in.Agent, in.Cron, in.Timezone, in.Goal, in.Context
	s.MaxToolCalls, s.Overlap, s.Paused = in.MaxToolCalls, in.Overlap, in.Paused
	s.PausedReason = "" // a person's settings replace agentplane's pause
	_, errs := Validate(s)
	if n := s.MaxToolCalls; n != nil && (*n < 1 || (svc.MaxToolCalls > 0 && *n > svc.MaxToolCalls)) {
		errs = append(errs, problem.FieldError{Field: "max_tool_calls", Message: fmt.Sprintf("must be from 1 to %d", max(1, svc.MaxToolCalls))})
	}
	if !hasField(errs, "agent") {
		v, err := svc.Versions.AgentVersion(ctx, s.Tenant, s.AgentName(), s.AgentVersion())
		switch {
		case problem.Is(err, problem.NotFound), problem.Is(err, problem.AgentVersionNotFound):
			errs = append(errs, problem.FieldError{Field: "agent", Message: fmt.Sprintf("%q is not a deployed agent or version of this tenant (GET /v1/agents lists them)", s.Agent)})
		case err != nil:
			return err
		case v.ArchivedAt != nil:
			errs = append(errs, problem.FieldError{Field: "agent", Message: fmt.Sprintf("%q is archived: name a live agent or version (GET /v1/agents lists them)", s.Agent)})
		case !hasField(errs, "context"):
			// As its runs will be checked, against the version it names
			// now (for an agent's name, its default version today).
			errs = append(errs, v.ValidateContext(contextOf(s))...)
		}
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	return nil
}

// contextOf is a schedule's context, {} when it is not an object (Validate
// refuses that).
func contextOf(s *Schedule) map[string]any {
	ctx, err := workflow.DecodeContext(s.Context)
	if err != nil {
		return map[string]any{}
	}
	return ctx
}

func hasField(errs []problem.FieldError, field string) bool {
	for _, e := range errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// Create stores a new schedule of the tenant, run as creator.
func (svc *Service) Create(ctx context.Context, tenant string, creator workflow.Caller, in Input, rec *audit.Record) (*Schedule, error) {
	now := svc.Now().UTC().Truncate(time.Microsecond)
	creator.Tenant = tenant
	s := &Schedule{ID: ids.NewAt(ids.Schedule, now), Tenant: tenant, Creator: creator, CreatedAt: now, UpdatedAt: now}
	if err := svc.check(ctx, s, in); err != nil {
		return nil, err
	}
	if rec != nil {
		rec.Resource = audit.Resource{Type: "schedule", ID: s.ID}
	}
	if err := svc.Store.CreateSchedule(ctx, s, rec); err != nil {
		return nil, err
	}
	return svc.withNext(s), nil
}

// Update replaces a schedule's settings; its creator stays.
func (svc *Service) Update(ctx context.Context, tenant, id string, in Input, rec *audit.Record) (*Schedule, error) {
	s, err := svc.Store.Schedule(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := svc.check(ctx, s, in); err != nil {
		return nil, err
	}
	s.UpdatedAt = svc.Now().UTC()
	if err := svc.Store.UpdateSchedule(ctx, s, rec); err != nil {
		return nil, err
	}
	return svc.withNext(s), nil
}

// SetPaused pauses or resumes a schedule. Resuming skips the due times
// missed while paused: the schedule runs again from its next due time.
func (svc *Service) SetPaused(ctx context.Context, tenant, id string, paused bool, rec *audit.Record) (*Schedule, error) {
	s, err := svc.Store.Schedule(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	now := svc.Now().UTC()
	if s.Paused && !paused {
		if t, errs := ParseTiming(s.Cron, s.Timezone); errs == nil {
			after := s.LastDue
			if after.Before(s.CreatedAt) {
				after = s.CreatedAt
			}
			if missed := t.Latest(after, now); !missed.IsZero() {
				if _, err := svc.Store.SkipDue(ctx, s.ID, missed, ReasonPaused, nil); err != nil {
					return nil, err
				}
			}
		}
	}
	s.Paused, s.PausedReason, s.UpdatedAt = paused, "", now
	if err := svc.Store.UpdateSchedule(ctx, s, rec); err != nil {
		return nil, err
	}
	return svc.withNext(s), nil
}

// Get returns a schedule with its next due time.
func (svc *Service) Get(ctx context.Context, tenant, id string) (*Schedule, error) {
	s, err := svc.Store.Schedule(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return svc.withNext(s), nil
}

// List returns the tenant's schedules with their next due times.
func (svc *Service) List(ctx context.Context, tenant string) ([]*Schedule, error) {
	all, err := svc.Store.ListSchedules(ctx, tenant)
	for _, s := range all {
		svc.withNext(s)
	}
	return all, err
}

// Trigger starts a schedule's workflow now.
func (svc *Service) Trigger(ctx context.Context, tenant, id string) (*workflow.Workflow, error) {
	s, err := svc.Store.Schedule(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return svc.Scheduler.Trigger(ctx, s)
}

// withNext fills in s.NextDue, unless s is paused.
func (svc *Service) withNext(s *Schedule) *Schedule {
	if t, errs := ParseTiming(s.Cron, s.Timezone); errs == nil && !s.Paused {
		s.NextDue = t.Next(svc.Now())
	}
	return s
}
