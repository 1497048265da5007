// Package schedule starts workflows on a timetable. A schedule names an
// agent (and optionally a version), a cron expression or an interval, a
// time zone and the invocation's goal and context. Every replica runs a
// Scheduler; each due time starts exactly one workflow across replicas
// because the store claims the due time (a unique (schedule, due time)
// row) in the transaction that creates the workflow. A due time skipped
// because the previous run is still going is claimed the same way, with
// no workflow.
package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Overlap policies: what a due time does while the schedule's previous
// workflow is still running or waiting.
const (
	OverlapSkip  = "skip"
	OverlapAllow = "allow"
)

// MinInterval is the shortest "@every" interval.
const MinInterval = time.Minute

// Schedule is a tenant's timetable for invoking one agent.
type Schedule struct {
	ID     string `json:"id"`
	Tenant string `json:"-"`
	// Agent is "name" (the default version at each due time) or
	// "name@version".
	Agent        string          `json:"agent"`
	Cron         string          `json:"cron"`
	Timezone     string          `json:"timezone"`
	Goal         string          `json:"goal"`
	Context      json.RawMessage `json:"context"`
	MaxToolCalls *int            `json:"max_tool_calls,omitempty"`
	Overlap      string          `json:"overlap"`
	Paused       bool            `json:"paused"`
	// PausedReason says why agentplane paused the schedule (its creator's
	// client was revoked); "" when a person paused it, or it runs.
	PausedReason string `json:"paused_reason,omitempty"`
	// Creator is who created the schedule, with the scopes of the token
	// used: its workflows run as Creator.
	Creator   workflow.Caller `json:"creator"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// LastDue is the latest claimed due time (zero if none), read only.
	LastDue time.Time `json:"last_due_at,omitzero"`
	// LastSkip is the latest due time that started no workflow, and why
	// (nil if none), read only.
	LastSkip *Skip `json:"last_skip,omitempty"`
	// NextDue is the next due time after now, filled in by the API.
	NextDue time.Time `json:"next_due_at,omitzero"`
}

// Skip is a due time claimed without a workflow.
type Skip struct {
	DueAt time.Time `json:"due_at"`
	// Reason says why no workflow started: a run still going (overlap
	// skip), the schedule paused, or the invocation's refusal in the
	// words the API would answer it with. "" for a skip stored before
	// reasons were.
	Reason string `json:"reason,omitempty"`
}

// Reasons a due time started no workflow, besides an invocation's refusal.
const (
	ReasonOverlap = "overlap skip: a workflow this schedule started is still running or waiting"
	ReasonPaused  = "the schedule was paused at this due time"
)

// NotFound is the error of a schedule the tenant does not have.
func NotFound(id string) error {
	return problem.New(problem.NotFound, "schedule %s not found", id)
}

// AgentName and AgentVersion split Agent.
func (s *Schedule) AgentName() string {
	name, _, _ := strings.Cut(s.Agent, "@")
	return name
}

// AgentVersion is "" for the agent's default version.
func (s *Schedule) AgentVersion() string {
	_, v, _ := strings.Cut(s.Agent, "@")
	return v
}

// Store keeps schedules and their claimed due times.
type Store interface {
	CreateSchedule(ctx context.Context, s *Schedule, rec *audit.Record) error
	// Schedule returns a schedule of the tenant, or problem.NotFound.
	Schedule(ctx context.Context, tenant, id string) (*Schedule, error)
	// ListSchedules returns the tenant's schedules, oldest first.
	ListSchedules(ctx context.Context, tenant string) ([]*Schedule, error)
	// UpdateSchedule replaces a schedule's settings (not its creator), or
	// returns problem.NotFound.
	UpdateSchedule(ctx context.Context, s *Schedule, rec *audit.Record) error
	// DeleteSchedule deletes a schedule and its claims, or returns
	// problem.NotFound.
	DeleteSchedule(ctx context.Context, tenant, id string, rec *audit.Record) error
	// PauseSchedule pauses a schedule that is not paused, with reason,
	// appending rec in the same transaction; false (and rec not appended)
	// when it was paused already or is gone.
	PauseSchedule(ctx context.Context, id, reason string, at time.Time, rec *audit.Record) (bool, error)
	// ActiveSchedules returns every tenant's schedules that are not paused,
	// each with its LastDue.
	ActiveSchedules(ctx context.Context) ([]*Schedule, error)
	// SkipDue claims a due time without a workflow, for reason,
	// appending rec (nil for none) in the same transaction; false (and rec
	// not appended) when it was already claimed.
	SkipDue(ctx context.Context, scheduleID string, due time.Time, reason string, rec *audit.Record) (bool, error)
	// Busy reports whether a workflow the schedule started is running or
	// waiting.
	Busy(ctx context.Context, scheduleID string) (bool, error)
	// ScheduleOf returns the id of the schedule that started a workflow,
	// "" when none did.
	ScheduleOf(ctx context.Context, workflowID string) (string, error)
}

// Timing is a parsed cron expression or interval in a time zone.
type Timing struct {
	every time.Duration
	spec  cron.Schedule
	loc   *time.Location
}

// parser accepts exactly five fields, and descriptors such as @daily.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// horizon bounds the search for an expression's next due time: one that
// does not fire within it never fires (February 30).
const horizon = 5 * 366 * 24 * time.Hour

// ParseTiming checks a cron expression (five fields, a descriptor, or
// "@every <duration>" of at least a minute) and an IANA time zone ("" is
// UTC); errors name the field.
func ParseTiming(expr, tz string) (*Timing, []problem.FieldError) {
	var errs []problem.FieldError
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		errs = append(errs, problem.FieldError{Field: "timezone", Message: fmt.Sprintf("%q is not an IANA time zone (such as UTC or Europe/Paris)", tz)})
		loc = time.UTC
	}
	t := &Timing{loc: loc}
	expr = strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(expr, "@every"):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every")))
		switch {
		case err != nil:
			errs = append(errs, problem.FieldError{Field: "cron", Message: `"@every" takes a duration such as 5m or 1h30m`})
		case d < MinInterval:
			errs = append(errs, problem.FieldError{Field: "cron", Message: fmt.Sprintf("@every %s is shorter than the minimum of 1m", d)})
		case d%time.Second != 0:
			errs = append(errs, problem.FieldError{Field: "cron", Message: "@every takes whole seconds"})
		}
		t.every = d
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		errs = append(errs, problem.FieldError{Field: "cron", Message: "set the time zone with the timezone field, not in the expression"})
	default:
		spec, err := parser.Parse(expr)
		if err != nil {
			errs = append(errs, problem.FieldError{Field: "cron", Message: fmt.Sprintf("is not a 5-field cron expression (minute hour day-of-month month day-of-week) or @every <duration>: %v", err)})
			break
		}
		t.spec = spec
		ref := time.Date(2000, 1, 1, 0, 0, 0, 0, loc)
		if next := spec.Next(ref); next.IsZero() || next.Sub(ref) > horizon {
			errs = append(errs, problem.FieldError{Field: "cron", Message: "never fires (no such date, as February 30)"})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// Next is the first due time strictly after t. Intervals are multiples of
// the interval since the zero time (for whole minutes, hours or days, the
// same as since the Unix epoch), so every replica computes the same due
// times.
func (t *Timing) Next(after time.Time) time.Time {
	if t.every > 0 {
		n := after.Truncate(t.every)
		for !n.After(after) {
			n = n.Add(t.every)
		}
		return n.UTC()
	}
	n := t.spec.Next(after.In(t.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// maxSteps bounds the walk from a schedule's last due time to now.
const maxSteps = 1 << 20

// Latest is the latest due time in (after, now], zero when none.
func (t *Timing) Latest(after, now time.Time) time.Time {
	if t.every > 0 {
		n := now.Truncate(t.every)
		if !n.After(after) {
			return time.Time{}
		}
		return n.UTC()
	}
	var latest time.Time
	for i, n := 0, t.Next(after); i < maxSteps && !n.IsZero() && !n.After(now); i, n = i+1, t.Next(n) {
		latest = n
	}
	return latest
}

// Validate checks a schedule's fields (not its agent, which the caller
// looks up), filling in defaults.
func Validate(s *Schedule) (*Timing, []problem.FieldError) {
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	if s.Overlap == "" {
		s.Overlap = OverlapSkip
	}
	t, errs := ParseTiming(s.Cron, s.Timezone)
	if name, v, ok := strings.Cut(s.Agent, "@"); name == "" || (ok && v == "") {
		errs = append(errs, problem.FieldError{Field: "agent", Message: "is required: an agent name, or name@version"})
	}
	if n := utf8.RuneCountInString(s.Goal); n < 1 || n > 8000 {
		errs = append(errs, problem.FieldError{Field: "goal", Message: "is required: 1 to 8000 characters"})
	}
	if s.Overlap != OverlapSkip && s.Overlap != OverlapAllow {
		errs = append(errs, problem.FieldError{Field: "overlap", Message: `must be "skip" or "allow"`})
	}
	if len(s.Context) == 0 || string(s.Context) == "null" {
		s.Context = json.RawMessage("{}")
	}
	if _, err := workflow.DecodeContext(s.Context); err != nil {
		errs = append(errs, problem.FieldError{Field: "context", Message: "must be a JSON object"})
	}
	return t, errs
}
