// Package mcp is the tenant's MCP server (SPEC §4 MCP, docs/mcp.md): POST
// /mcp in stateless Streamable HTTP, built on the official go-sdk, with the
// tools search_operations, call_operation and one agent_<name> per deployed
// agent, and the RFC 9728 metadata of the endpoint as a protected resource.
//
// The routes that mount its handlers (internal/httpapi/routes.go) have
// already authenticated, rate limited and admitted the request, and audit
// it; each tool call is checked again here (agents:invoke for an agent
// tool; call_operation's tool:<name> by the workflow it starts). Calls that
// start workflows go through workflow.Invoker, with the idempotency key a
// client may send, so a retried call runs once.
package mcp
