package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/workflow"
)

// VersionsUsingTool returns the live agent versions naming the tool, by
// agent and newest first (an archived version no longer holds its tools).
func (db *DB) VersionsUsingTool(ctx context.Context, tenant, toolName string) ([]*agent.Version, error) {
	var vs []*agent.Version
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT v.version, v.description, v.definition, v.external, v.tools, v.deployed_at,
				v.version = a.default_version, v.archived_at, v.name
			FROM agent_version_tools t
			JOIN agent_versions v ON v.tenant = t.tenant AND v.name = t.agent AND v.version = t.version
			JOIN agents a ON a.tenant = v.tenant AND a.name = v.name
			WHERE t.tenant = ? AND t.tool_name = ? AND v.archived_at = ''
			ORDER BY v.name, v.seq DESC`, tenant, toolName)
		if err != nil {
			return fmt.Errorf("list versions using tool: %w", err)
		}
		vs, err = collect(rows, func(s sqlrow.Scanner) (*agent.Version, error) { return sqlrow.ScanNamedVersion(s, tenant) })
		return err
	})
	return vs, err
}

// toolCalls lists what ToolCalls returns.
const toolCalls = `SELECT ` + sqlrow.StepColumns + ` FROM workflow_steps
	WHERE tool = ? AND kind = 'call' AND sent = 1 AND workflow_id IN
		(SELECT id FROM workflows WHERE tenant = ? AND id >= ? AND started_at >= ? AND replay_of = '')
	ORDER BY started_at DESC, workflow_id, seq LIMIT ?`

// ToolCalls returns the tool's sent calls of the tenant's workflows
// (replays left out) started at or after since, newest first. The
// tenant's workflows are ranged by id (workflows_tenant) from sqlrow.WorkflowIDSince, not
// read since the first.
func (db *DB) ToolCalls(ctx context.Context, tenant, toolName string, since time.Time, limit int, each func(*workflow.Step) error) error {
	return db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, toolCalls, toolName, tenant, sqlrow.WorkflowIDSince(since), fmtTimeCeil(since), limit)
		if err != nil {
			return fmt.Errorf("list tool calls: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			st, err := sqlrow.ScanStep(rows)
			if err != nil {
				return err
			}
			if err := each(&st); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}
