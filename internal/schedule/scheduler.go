package schedule

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Invoker starts a workflow, or finds the one its idempotency key made:
// *workflow.Invoker.
type Invoker interface {
	Invoke(ctx context.Context, in workflow.Invocation) (workflow.Invoked, error)
}

// Revocations tells which OAuth clients are revoked: *auth.Revocations,
// the list bearer tokens and console sessions are checked against.
type Revocations interface {
	Revoked(ctx context.Context, clientID string) (bool, error)
}

// SchedulerActor is the audit actor of what the scheduler does on its own.
var SchedulerActor = audit.Actor{Sub: "agentplane:scheduler"}

// errCreatorRevoked is the error of a run refused because the schedule's
// creator's client is revoked.
func errCreatorRevoked(sch *Schedule) error {
	return problem.New(problem.Conflict, "schedule %s is paused: %s", sch.ID, revokedReason(sch))
}

func revokedReason(sch *Schedule) string {
	return "its creator's client " + sch.Creator.ClientID + " is revoked; create the schedule again as an identity that may run it"
}

// DefaultTick is how often a Scheduler looks for due times.
const DefaultTick = 5 * time.Second

// Scheduler starts the workflows of every tenant's due schedules. Every
// replica runs one; the store's claims make each due time start one
// workflow across them.
type Scheduler struct {
	Store   Store
	Invoker Invoker
	// Now is the clock (time.Now when nil); Tick how often Run looks
	// (DefaultTick when zero).
	Now    func() time.Time
	Tick   time.Duration
	Logger *slog.Logger
	// Revocations is the client revocation list (nil: none is revoked). A
	// schedule whose creator's client is on it is paused, not run.
	Revocations Revocations

	mu      sync.Mutex
	timings map[string]cachedTiming
}

type cachedTiming struct {
	cron, tz string
	t        *Timing
}

func (s *Scheduler) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Scheduler) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

// Run looks for due times every tick until ctx is done.
func (s *Scheduler) Run(ctx context.Context) {
	tick := s.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			s.logger().Warn("scheduler pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce starts, for each active schedule, a workflow for its latest due
// time not yet claimed: after an outage, only the latest missed time runs.
func (s *Scheduler) RunOnce(ctx context.Context) error {
	all, err := s.Store.ActiveSchedules(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	live := make(map[string]bool, len(all))
	for _, sch := range all {
		live[sch.ID] = true
		if err := s.checkCreator(ctx, sch); err != nil {
			if ctx.Err() == nil && !problem.Is(err, problem.Conflict) {
				s.logger().Warn("schedule not run: its creator cannot be checked", "schedule_id", sch.ID, "error", err)
			}
			continue
		}
		t := s.timing(sch)
		if t == nil {
			continue
		}
		// Only times due since the schedule last changed: a PUT (a new
		// cron, or a paused schedule resumed by its whole body) never
		// starts a run for a time that passed before it.
		after := sch.LastDue
		for _, t := range []time.Time{sch.CreatedAt, sch.UpdatedAt} {
			if after.Before(t) {
				after = t
			}
		}
		due := t.Latest(after, now)
		if due.IsZero() {
			continue
		}
		// Another replica claiming the same due time first is the normal race.
		if _, err := s.fire(ctx, sch, due, false); err != nil && ctx.Err() == nil && !errors.Is(err, errAlreadyClaimed) {
			s.logger().Warn("scheduled run not started", "schedule_id", sch.ID, "due", due, "error", err)
		}
	}
	s.mu.Lock()
	for id := range s.timings {
		if !live[id] {
			delete(s.timings, id)
		}
	}
	s.mu.Unlock()
	return ctx.Err()
}

// timing parses a schedule's timing once per change of it.
func (s *Scheduler) timing(sch *Schedule) *Timing {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.timings[sch.ID]; ok && c.cron == sch.Cron && c.tz == sch.Timezone {
		return c.t
	}
	t, errs := ParseTiming(sch.Cron, sch.Timezone)
	if len(errs) > 0 {
		s.logger().Warn("schedule has an invalid timing", "schedule_id", sch.ID, "errors", errs)
	}
	if s.timings == nil {
		s.timings = map[string]cachedTiming{}
	}
	s.timings[sch.ID] = cachedTiming{cron: sch.Cron, tz: sch.Timezone, t: t}
	return t
}

// errAlreadyClaimed reports a due time another replica (or an earlier
// pass) claimed.
var errAlreadyClaimed = errors.New("due time already claimed")

// fire starts the schedule's workflow for due, as its creator, unless the
// due time is claimed already or, with overlap skip, the previous run is
// still going (the due time is then claimed without a workflow). A due
// time whose workflow cannot start (its agent was deleted, its context no
// longer fits) is claimed without one too, so it is not tried again.
func (s *Scheduler) fire(ctx context.Context, sch *Schedule, due time.Time, manual bool) (*workflow.Workflow, error) {
	if manual {
		if err := s.checkCreator(ctx, sch); err != nil {
			return nil, err
		}
	}
	if !manual && sch.Overlap != OverlapAllow {
		busy, err := s.Store.Busy(ctx, sch.ID)
		if err != nil {
			return nil, err
		}
		if busy {
			rec := s.skipRecord(sch, due, audit.Success, map[string]any{"reason": ReasonOverlap})
			_, err := s.Store.SkipDue(ctx, sch.ID, due, ReasonOverlap, rec)
			return nil, err
		}
	}
	input := contextOf(sch)
	// A manual run (due zero) is recorded as the schedule's without a due
	// time, and without a key: each trigger starts a workflow.
	caller := sch.Creator
	caller.Tenant = sch.Tenant
	var key string
	if !due.IsZero() {
		key = runKey(sch.ID, due)
	}
	run, err := s.Invoker.Invoke(ctx, workflow.Invocation{StartRequest: workflow.StartRequest{
		Tenant: sch.Tenant, Agent: sch.AgentName(), Version: sch.AgentVersion(), Goal: sch.Goal,
		Context: input, Caller: caller, MaxToolCalls: sch.MaxToolCalls,
		ScheduleID: sch.ID, DueAt: due, Created: s.runRecord(sch, due), IdempotencyKey: key,
	}})
	switch {
	case err == nil && run.Repeat:
		return nil, errAlreadyClaimed
	case err == nil:
		return run.Workflow, nil
	case problem.Is(err, problem.Conflict):
		return nil, errAlreadyClaimed
	case problem.Is(err, problem.ValidationFailed), problem.Is(err, problem.NotFound), problem.Is(err, problem.AgentVersionNotFound):
		if !manual {
			if _, serr := s.Store.SkipDue(ctx, sch.ID, due, refusal(err), s.skipRecord(sch, due, audit.Error, refusalDetails(err))); serr != nil {
				return nil, errors.Join(err, serr)
			}
		}
	}
	return nil, err
}

// skipRecord is the audit record of a due time the scheduler skipped, in
// the schedule's tenant's chain: outcome error when the invocation was
// refused, success for an overlap skip (the schedule's own policy).
func (s *Scheduler) skipRecord(sch *Schedule, due time.Time, outcome string, details map[string]any) *audit.Record {
	details["due_at"] = due.UTC().Format(time.RFC3339)
	return &audit.Record{
		Time: s.now().UTC(), Tenant: sch.Tenant, Action: "schedule.skip", Actor: SchedulerActor,
		Resource: audit.Resource{Type: "schedule", ID: sch.ID}, Outcome: outcome,
		Details: audit.Details(details),
	}
}

// refusalDetails are what an audit record keeps of a refusal: its code and
// the paths of the fields at fault, not the words, which may quote the
// context's values (a pattern's mismatch does).
func refusalDetails(err error) map[string]any {
	pe := problem.As(err)
	details := map[string]any{"code": string(pe.Code)}
	if len(pe.Errors) > 0 {
		fields := make([]string, len(pe.Errors))
		for i, f := range pe.Errors {
			fields[i] = f.Field
		}
		details["fields"] = fields
	}
	return details
}

// maxReason bounds the words a skip keeps of a refusal.
const maxReason = 2000

// refusal is an invocation's refusal in the words the API answers it
// with: its code, detail and the fields at fault the detail does not
// name, without its cause (which is logged, never shown).
func refusal(err error) string {
	pe := problem.As(err)
	words := string(pe.Code)
	if pe.Detail != "" {
		words += ": " + pe.Detail
	}
	var fields []string
	for _, f := range pe.Errors {
		if field := f.Field + ": " + f.Message; !strings.Contains(words, field) {
			fields = append(fields, field)
		}
	}
	if len(fields) > 0 {
		words += " (" + strings.Join(fields, "; ") + ")"
	}
	if len(words) > maxReason {
		words = strings.ToValidUTF8(words[:maxReason], "") + "…"
	}
	return words
}

// checkCreator refuses to run a schedule whose creator's client is
// revoked, and pauses it with the reason on the schedule and in its
// tenant's audit chain (once across replicas). A revocation list that
// cannot be read refuses too: the schedule is not run on a stale list.
func (s *Scheduler) checkCreator(ctx context.Context, sch *Schedule) error {
	if s.Revocations == nil || sch.Creator.ClientID == "" {
		return nil
	}
	revoked, err := s.Revocations.Revoked(ctx, sch.Creator.ClientID)
	if err != nil || !revoked {
		return err
	}
	now := s.now().UTC()
	reason := revokedReason(sch)
	rec := &audit.Record{
		Time: now, Tenant: sch.Tenant, Action: "schedule.pause", Actor: SchedulerActor,
		Resource: audit.Resource{Type: "schedule", ID: sch.ID}, Outcome: audit.Success,
		Details: audit.Details(map[string]any{"reason": reason, "client_id": sch.Creator.ClientID}),
	}
	if _, err := s.Store.PauseSchedule(ctx, sch.ID, reason, now, rec); err != nil {
		return err
	}
	sch.Paused, sch.PausedReason = true, reason
	return errCreatorRevoked(sch)
}

// runKey is the idempotency key of the workflow a schedule starts for a
// due time: a due time's run is started once, whichever replica fires it.
func runKey(scheduleID string, due time.Time) string {
	return "schedule:" + scheduleID + ":" + due.UTC().Format(time.RFC3339)
}

// Trigger starts a schedule's workflow now, whatever its timetable, pause
// or overlap policy. It claims no due time: the timetable goes on as if
// it had not been triggered.
func (s *Scheduler) Trigger(ctx context.Context, sch *Schedule) (*workflow.Workflow, error) {
	return s.fire(ctx, sch, time.Time{}, true)
}

// runRecord builds the audit record of a run the schedule starts, written
// with the workflow: it names the schedule, its creator (the actor) and
// the due time (none for a trigger).
func (s *Scheduler) runRecord(sch *Schedule, due time.Time) func(*workflow.Workflow) *audit.Record {
	return func(wf *workflow.Workflow) *audit.Record {
		details := map[string]any{"agent": wf.Agent, "agent_version": wf.AgentVersion}
		if !due.IsZero() {
			details["due_at"] = due.UTC().Format(time.RFC3339)
		}
		return &audit.Record{
			Time: wf.StartedAt, Tenant: sch.Tenant, Action: "schedule.run",
			Actor:    audit.Actor{Sub: sch.Creator.Sub, ClientID: sch.Creator.ClientID},
			Resource: audit.Resource{Type: "schedule", ID: sch.ID}, Outcome: audit.Success,
			WorkflowID: wf.ID, Details: audit.Details(details),
		}
	}
}
