package impact

import (
	"context"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Store reads what a revision of a tool may break.
type Store interface {
	// VersionsUsingTool returns the live (not archived) agent versions of
	// a tenant that name the tool, by agent name and then newest first.
	VersionsUsingTool(ctx context.Context, tenant, toolName string) ([]*agent.Version, error)
	// ToolCalls calls each with up to limit tool-call steps of the tool
	// that were sent by the tenant's workflows (not replays) started at or
	// after since, newest first, one at a time: a step's args and result
	// may be a MiB each, so they are not all held at once. An error of
	// each stops the listing and is returned.
	ToolCalls(ctx context.Context, tenant, toolName string, since time.Time, limit int, each func(*workflow.Step) error) error
}
