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
	// ToolCalls returns up to limit tool-call steps of the tool that were
	// sent by the tenant's workflows (not replays) started at or after
	// since, newest first.
	ToolCalls(ctx context.Context, tenant, toolName string, since time.Time, limit int) ([]workflow.Step, error)
}
