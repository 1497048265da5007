package sqlrow

import (
	"fmt"

	"github.com/agentplane/agentplane/internal/schedule"
)

// ScheduleColumns are a schedule's columns (s is the schedules table) with
// its last due time and its last skipped one with the reason, in the order
// of ScanSchedule.
const ScheduleColumns = `s.id, s.tenant, s.agent, s.cron, s.timezone, s.goal, s.context, s.max_tool_calls,
	s.overlap, s.paused, s.paused_reason, s.creator, s.created_at, s.updated_at,
	(SELECT max(due_at) FROM schedule_runs r WHERE r.schedule_id = s.id),
	(SELECT max(due_at) FROM schedule_runs r WHERE r.schedule_id = s.id AND r.workflow_id = ''),
	COALESCE((SELECT reason FROM schedule_runs r WHERE r.schedule_id = s.id AND r.workflow_id = ''
		AND r.due_at IS NOT NULL ORDER BY r.due_at DESC LIMIT 1), '')`

// ScanSchedule scans a row of ScheduleColumns; a missing row's error is
// returned as it is.
func ScanSchedule(row Scanner) (*schedule.Schedule, error) {
	var s schedule.Schedule
	var skip schedule.Skip
	err := row.Scan(&s.ID, &s.Tenant, &s.Agent, &s.Cron, &s.Timezone, &s.Goal, Raw(&s.Context), &s.MaxToolCalls,
		&s.Overlap, &s.Paused, &s.PausedReason, JSON(&s.Creator, "schedule creator"), Time(&s.CreatedAt),
		Time(&s.UpdatedAt), TimeOrZero(&s.LastDue), TimeOrZero(&skip.DueAt), &skip.Reason)
	if !skip.DueAt.IsZero() {
		s.LastSkip = &skip
	}
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan schedule: %w", err)
	}
	return &s, nil
}
