package agent

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
)

// OperationAgent is the reserved agent whose versions are single
// operations: version "<tool>.<operation>" calls that operation once with
// context.args. It is how a direct call (MCP's call_operation) runs as a
// workflow, checked, recorded, audited and replayable like any other. Its
// versions are not stored: they follow from their names, so a tool called
// this way stays free to be deleted.
const OperationAgent = "mcp"

// OperationAction is the action of an operation version's one step.
const OperationAction = "call_operation"

// OperationVersion returns the version of OperationAgent named
// "<tool>.<operation>", or problem.AgentVersionNotFound when the name is
// not of that form.
func OperationVersion(tenant, version string) (*Version, error) {
	toolName, op, ok := strings.Cut(version, ".")
	if !ok || toolName == "" || op == "" {
		return nil, problem.New(problem.AgentVersionNotFound,
			"%s@%s: the versions of %s are <tool>.<operation>, the operation a direct call runs", OperationAgent, version, OperationAgent)
	}
	// Written out rather than marshalled from maps: a direct call builds
	// its version on every call.
	toolJSON, _ := json.Marshal(toolName)
	callJSON, _ := json.Marshal(toolName + "." + op)
	data := []byte(`{"tools":[` + string(toolJSON) + `],` +
		`"inputs":{"type":"object","properties":{"args":{"type":"object"}}},` +
		`"steps":[{"action":"` + OperationAction + `","call":` + string(callJSON) + `,` +
		`"args":"has(context.args) ? context.args : {}","save_as":"result"}],"output":"result"}`)
	return &Version{Tenant: tenant, Name: OperationAgent, Version: version, Description: "a direct call of " + version,
		Definition: data, Tools: []string{toolName}, Default: false}, nil
}

// OperationVersions serves OperationAgent's versions over a VersionStore
// holding the deployed ones.
type OperationVersions struct{ VersionStore }

// AgentVersion returns an operation version for OperationAgent and asks the
// store for every other agent.
func (o OperationVersions) AgentVersion(ctx context.Context, tenant, name, version string) (*Version, error) {
	if name != OperationAgent {
		return o.VersionStore.AgentVersion(ctx, tenant, name, version)
	}
	if version == "" {
		return nil, problem.New(problem.AgentVersionNotFound,
			"%s has no default version: it runs one operation, named %s@<tool>.<operation>", OperationAgent, OperationAgent)
	}
	return OperationVersion(tenant, version)
}
