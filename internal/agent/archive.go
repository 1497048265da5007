package agent

import (
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// Archiving (SPEC §4 "Data lifecycle and governance", docs/agents.md).
//
// A VersionStore's ArchiveVersion archives one version in one transaction:
// problem.Conflict, saying why and how to fix it, when the version is its
// agent's default, when one of its workflows is running or waiting, or when
// a schedule invokes it; problem.NotFound / problem.AgentVersionNotFound
// when it does not exist. Archiving an archived version changes nothing.
// The version's row stays (history, replays and GET keep reading it) with
// its archived_at set; its tool and model references go, so DeleteTool and
// DeleteModel no longer count it.
//
// ArchiveAgent does the same for every version at once and marks the agent
// archived: ListAgents leaves it out (ListAllAgents shows it), and a later
// deployment of the name revives it with the next version number after
// every earlier one, becoming its default. It is refused while any of the
// agent's workflows is running or waiting, or any schedule invokes the
// agent.

// CheckLive refuses an archived version: the error of invoking or
// replaying against it (problem.AgentVersionArchived, 409).
func (v *Version) CheckLive() error {
	if v.ArchivedAt == nil {
		return nil
	}
	return problem.New(problem.AgentVersionArchived,
		"agent version %s was archived at %s and can no longer be invoked or replayed against: "+
			"deploy a new version (POST /v1/agents) or name a live one (GET /v1/agents/%s/versions)",
		v.Ref(), v.ArchivedAt.UTC().Format(time.RFC3339), v.Name)
}

// DefaultRefusal is the conflict of archiving an agent's default version.
func DefaultRefusal(name, version string) error {
	return problem.New(problem.Conflict,
		"%s@%s is the default version of agent %q: make another version the default first "+
			"(PUT /v1/agents/%s/default), or archive the whole agent (DELETE /v1/agents/%s)",
		name, version, name, name, name)
}

// RunningRefusal is the conflict of archiving while a workflow of ref
// (name or name@version) is running or waiting.
func RunningRefusal(ref, workflowID, status string) error {
	return problem.New(problem.Conflict,
		"workflow %s of %s is still %s: wait for it to finish or cancel it (POST /v1/workflows/%s/cancel), then archive again",
		workflowID, ref, status, workflowID)
}

// ScheduleRefusal is the conflict of archiving what a schedule invokes.
func ScheduleRefusal(ref, scheduleID, target string) error {
	return problem.New(problem.Conflict,
		"schedule %s invokes %s, which archiving %s would leave without a live version: "+
			"point it at another agent or version (PUT /v1/schedules/%s) or delete it (DELETE /v1/schedules/%s), then archive again",
		scheduleID, target, ref, scheduleID, scheduleID)
}
