package httpapi

import (
	"net/url"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/gateway"
	"github.com/agentplane/agentplane/internal/web"
)

// route is one entry of the API: its pattern, the scope it needs, and how
// its requests are audited. The table below is the API's security review.
type route struct {
	pattern string
	// scope is required of the caller's token; "" with public false means
	// any valid token.
	scope string
	// public routes are served without a bearer token (SPEC §2).
	public bool
	// signed names the kind of page (web.KindReplay) whose signed link
	// stands in for a bearer token: a link that is badly signed, expired
	// or for another page is a 404. Signed routes are public.
	signed string
	// action and resource name the audit record of each request.
	action   string
	resource string
	// idempotent routes honour Idempotency-Key (every POST but the token
	// endpoint), with a stored response unless ownKeys.
	idempotent bool
	// ownKeys: the handler keeps the keys itself, with the workflows it
	// creates (invoke, replay).
	ownKeys bool
	// noAudit: requests are not audited one by one (health and metrics probes).
	noAudit bool
	// console routes are the web console's (internal/console; admitted in
	// console.go): authenticated by the session cookie rather than a
	// bearer token, each POST also by the session's CSRF token; their
	// errors are pages.
	console bool
	// same names the API route a console action is: the row takes that
	// route's scope, audit action, idempotency and handler; form turns the
	// submitted form into that handler's JSON body.
	same string
	form func(url.Values) (any, error)
	// gateway routes are the run gateway's (internal/gateway): the handler
	// authenticates the run's own token, the run's limits apply instead of
	// the tenant's rate limit, and bodies may be as large as a long
	// conversation (gatewayMaxBody).
	gateway bool
	h       frontdoor.HandlerFunc
}

// gatewayMaxBody bounds a request to the run gateway.
const gatewayMaxBody = gateway.MaxRequestBody

func (s *Server) routeTable() []route {
	d := s.deps
	return []route{
		{pattern: "GET /healthz", public: true, noAudit: true, h: handleHealth(s.cfg.Version)},
		{pattern: "GET /readyz", public: true, noAudit: true, h: s.handleReady},
		{pattern: "GET /metrics", public: true, noAudit: true, h: handleMetrics(d.Metrics)},
		{pattern: "GET /problems/{code}", public: true, noAudit: true, h: handleProblemPage},
		{pattern: "GET /v1/openapi.json", public: true, noAudit: true, h: handleOpenAPI},

		{pattern: "GET /.well-known/openid-configuration", public: true, action: "oauth.discovery", resource: "issuer", h: handleDiscovery(d.Issuer)},
		{pattern: "GET /.well-known/jwks.json", public: true, action: "oauth.jwks", resource: "issuer", h: handleJWKS(d.Issuer)},
		{pattern: "POST /oauth/token", public: true, action: "oauth.token", resource: "client", h: handleToken(d.Issuer)},
		{pattern: "GET /.well-known/oauth-protected-resource", public: true, action: "mcp.resource_metadata", resource: "mcp", h: s.mcp.HandleResourceMetadata},
		{pattern: "GET /.well-known/oauth-protected-resource/mcp", public: true, action: "mcp.resource_metadata", resource: "mcp", h: s.mcp.HandleResourceMetadata},
		{pattern: "GET /.well-known/mcp/server-card.json", public: true, action: "mcp.server_card", resource: "mcp", h: s.mcp.HandleServerCard},

		// The tenant's MCP server; each tool call there is checked again
		// (agents:invoke for agent tools, tool:<name> for call_operation).
		{pattern: "POST /mcp", scope: auth.ScopeMCPUse, action: "mcp.request", resource: "mcp", h: s.mcp.Handle},

		{pattern: "POST /v1/tools", scope: auth.ScopeToolsWrite, action: "tool.create", resource: "tool", idempotent: true, h: s.handleRegisterTool},
		{pattern: "GET /v1/tools", scope: auth.ScopeToolsRead, action: "tool.list", resource: "tool", h: s.handleListTools},
		{pattern: "GET /v1/tools/{id}", scope: auth.ScopeToolsRead, action: "tool.read", resource: "tool", h: s.handleGetTool},
		{pattern: "GET /v1/tools/{id}/operations", scope: auth.ScopeToolsRead, action: "tool.operations", resource: "tool", h: s.handleToolOperations},
		{pattern: "GET /v1/operations", scope: auth.ScopeToolsRead, action: "operation.search", resource: "tool", h: s.handleSearchOperations},
		{pattern: "PUT /v1/tools/{id}", scope: auth.ScopeToolsWrite, action: "tool.update", resource: "tool", h: s.handleUpdateTool},
		{pattern: "DELETE /v1/tools/{id}", scope: auth.ScopeToolsWrite, action: "tool.delete", resource: "tool", h: s.handleDeleteTool},
		{pattern: "POST /v1/tools/{id}/refresh", scope: auth.ScopeToolsWrite, action: "tool.refresh", resource: "tool", idempotent: true, h: s.handleRefreshTool},
		{pattern: "GET /v1/tools/{id}/revisions", scope: auth.ScopeToolsRead, action: "tool.revisions", resource: "tool", h: s.handleToolRevisions},
		{pattern: "GET /v1/tools/{id}/revisions/{n}/impact", scope: auth.ScopeToolsRead, action: "tool.revision.impact", resource: "tool", h: s.handleToolRevisionImpact},
		{pattern: "POST /v1/tools/{id}/revisions/{n}/apply", scope: auth.ScopeToolsWrite, action: "tool.revision.apply", resource: "tool", idempotent: true, h: s.handleApplyToolRevision},

		{pattern: "POST /v1/models", scope: auth.ScopeModelsWrite, action: "model.create", resource: "model", idempotent: true, h: s.handleRegisterModel},
		{pattern: "GET /v1/models", scope: auth.ScopeModelsRead, action: "model.list", resource: "model", h: s.handleListModels},
		{pattern: "GET /v1/models/{name}", scope: auth.ScopeModelsRead, action: "model.read", resource: "model", h: s.handleGetModel},
		{pattern: "PUT /v1/models/{name}", scope: auth.ScopeModelsWrite, action: "model.update", resource: "model", h: s.handleUpdateModel},
		{pattern: "DELETE /v1/models/{name}", scope: auth.ScopeModelsWrite, action: "model.delete", resource: "model", h: s.handleDeleteModel},

		{pattern: "POST /v1/agents", scope: auth.ScopeAgentsWrite, action: "agent.deploy", resource: "agent", idempotent: true, h: s.handleDeployAgent},
		{pattern: "GET /v1/agents", scope: auth.ScopeAgentsRead, action: "agent.list", resource: "agent", h: s.handleListAgents},
		{pattern: "GET /v1/agents/{id}", scope: auth.ScopeAgentsRead, action: "agent.read", resource: "agent", h: s.handleGetAgent},
		{pattern: "GET /v1/agents/{id}/versions", scope: auth.ScopeAgentsRead, action: "agent.versions", resource: "agent", h: s.handleListVersions},
		{pattern: "DELETE /v1/agents/{id}", scope: auth.ScopeAgentsWrite, action: "agent.archive", resource: "agent", h: s.handleArchiveAgent},
		{pattern: "PUT /v1/agents/{id}/default", scope: auth.ScopeAgentsWrite, action: "agent.set_default", resource: "agent", h: s.handleSetDefault},
		{pattern: "PUT /v1/agents/{id}/rollout", scope: auth.ScopeAgentsWrite, action: "agent.rollout.start", resource: "agent", h: s.handlePutRollout},
		{pattern: "GET /v1/agents/{id}/rollout", scope: auth.ScopeAgentsRead, action: "agent.rollout.read", resource: "agent", h: s.handleGetRollout},
		{pattern: "DELETE /v1/agents/{id}/rollout", scope: auth.ScopeAgentsWrite, action: "agent.rollout.end", resource: "agent", h: s.handleEndRollout},
		{pattern: "POST /v1/agents/{id}/invoke", scope: auth.ScopeAgentsInvoke, action: "agent.invoke", resource: "agent", idempotent: true, ownKeys: true, h: s.handleInvoke},

		// Each agent's A2A server (docs/a2a.md): the card, the JSON-RPC
		// binding and the HTTP+JSON binding. Messages are invokes: their
		// messageId is the idempotency key, kept with the workflow.
		{pattern: "GET /a2a/{agent}/.well-known/agent-card.json", public: true, action: "a2a.card", resource: "agent", h: s.a2a.Card},
		{pattern: "POST /a2a/{agent}", scope: auth.ScopeAgentsInvoke, action: "a2a.request", resource: "agent", idempotent: true, ownKeys: true, h: s.a2a.JSONRPC},
		{pattern: "POST /a2a/{agent}/message:send", scope: auth.ScopeAgentsInvoke, action: "a2a.send", resource: "agent", idempotent: true, ownKeys: true, h: s.a2a.SendMessage},
		{pattern: "POST /a2a/{agent}/message:stream", scope: auth.ScopeAgentsInvoke, action: "a2a.stream", resource: "agent", idempotent: true, ownKeys: true, h: s.a2a.SendStreamingMessage},
		{pattern: "GET /a2a/{agent}/tasks", scope: auth.ScopeAgentsInvoke, action: "a2a.task_list", resource: "agent", h: s.a2a.ListTasks},
		{pattern: "GET /a2a/{agent}/tasks/{task}", scope: auth.ScopeAgentsInvoke, action: "a2a.task_read", resource: "agent", h: s.a2a.Task},
		{pattern: "POST /a2a/{agent}/tasks/{task}", scope: auth.ScopeAgentsInvoke, action: "a2a.task_update", resource: "agent", idempotent: true, ownKeys: true, h: s.a2a.Task},
		{pattern: "POST /a2a/{agent}/tasks/{task}/pushNotificationConfigs", scope: auth.ScopeAgentsInvoke, action: "a2a.push_config_create", resource: "agent", idempotent: true, h: s.a2a.PushConfigs},
		{pattern: "GET /a2a/{agent}/tasks/{task}/pushNotificationConfigs", scope: auth.ScopeAgentsInvoke, action: "a2a.push_config_list", resource: "agent", h: s.a2a.PushConfigs},
		{pattern: "GET /a2a/{agent}/tasks/{task}/pushNotificationConfigs/{config}", scope: auth.ScopeAgentsInvoke, action: "a2a.push_config_read", resource: "agent", h: s.a2a.PushConfigs},
		{pattern: "DELETE /a2a/{agent}/tasks/{task}/pushNotificationConfigs/{config}", scope: auth.ScopeAgentsInvoke, action: "a2a.push_config_delete", resource: "agent", h: s.a2a.PushConfigs},
		{pattern: "GET /a2a/{agent}/extendedAgentCard", scope: auth.ScopeAgentsInvoke, action: "a2a.extended_card", resource: "agent", h: s.a2a.ExtendedCard},

		{pattern: "GET /v1/workflows", scope: auth.ScopeWorkflowsRead, action: "workflow.list", resource: "workflow", h: s.handleListWorkflows},
		{pattern: "GET /v1/workflows/{id}", scope: auth.ScopeWorkflowsRead, action: "workflow.read", resource: "workflow", h: s.handleGetWorkflow},
		{pattern: "GET /v1/workflows/{id}/events", scope: auth.ScopeWorkflowsRead, action: "workflow.events", resource: "workflow", h: s.handleWorkflowEvents},
		{pattern: "DELETE /v1/workflows/{id}", scope: auth.ScopeWorkflowsDelete, action: "workflow.delete", resource: "workflow", h: s.handleDeleteWorkflow},
		{pattern: "POST /v1/workflows/{id}/cancel", scope: auth.ScopeAgentsInvoke, action: "workflow.cancel", resource: "workflow", idempotent: true, h: s.handleCancelWorkflow},
		{pattern: "GET /v1/usage", scope: auth.ScopeUsageRead, action: "usage.read", resource: "usage", h: s.handleUsage},
		{pattern: "GET /v1/approvals", scope: auth.ScopeWorkflowsApprove, action: "approval.list", resource: "approval", h: s.handleListApprovals},
		{pattern: "POST /v1/workflows/{id}/approvals/{step}", scope: auth.ScopeWorkflowsApprove, action: "workflow.decide", resource: "workflow", idempotent: true, h: s.handleDecide},

		{pattern: "POST /v1/schedules", scope: auth.ScopeSchedulesWrite, action: "schedule.create", resource: "schedule", idempotent: true, h: s.handleCreateSchedule},
		{pattern: "GET /v1/schedules", scope: auth.ScopeSchedulesRead, action: "schedule.list", resource: "schedule", h: s.handleListSchedules},
		{pattern: "GET /v1/schedules/{id}", scope: auth.ScopeSchedulesRead, action: "schedule.read", resource: "schedule", h: s.handleGetSchedule},
		{pattern: "PUT /v1/schedules/{id}", scope: auth.ScopeSchedulesWrite, action: "schedule.update", resource: "schedule", h: s.handleUpdateSchedule},
		{pattern: "DELETE /v1/schedules/{id}", scope: auth.ScopeSchedulesWrite, action: "schedule.delete", resource: "schedule", h: s.handleDeleteSchedule},
		{pattern: "POST /v1/schedules/{id}/pause", scope: auth.ScopeSchedulesWrite, action: "schedule.pause", resource: "schedule", idempotent: true, h: s.handlePauseSchedule(true)},
		{pattern: "POST /v1/schedules/{id}/resume", scope: auth.ScopeSchedulesWrite, action: "schedule.resume", resource: "schedule", idempotent: true, h: s.handlePauseSchedule(false)},
		{pattern: "POST /v1/schedules/{id}/trigger", scope: auth.ScopeSchedulesWrite, action: "schedule.trigger", resource: "schedule", idempotent: true, h: s.handleTriggerSchedule},

		{pattern: "POST /v1/webhooks", scope: auth.ScopeWebhooksWrite, action: "webhook.create", resource: "webhook", idempotent: true, h: s.handleCreateWebhook},
		{pattern: "GET /v1/webhooks", scope: auth.ScopeWebhooksRead, action: "webhook.list", resource: "webhook", h: s.handleListWebhooks},
		{pattern: "GET /v1/webhooks/{id}", scope: auth.ScopeWebhooksRead, action: "webhook.read", resource: "webhook", h: s.handleGetWebhook},
		{pattern: "DELETE /v1/webhooks/{id}", scope: auth.ScopeWebhooksWrite, action: "webhook.delete", resource: "webhook", h: s.handleDeleteWebhook},
		{pattern: "GET /v1/webhooks/{id}/deliveries", scope: auth.ScopeWebhooksRead, action: "webhook.deliveries", resource: "webhook", h: s.handleListDeliveries},
		{pattern: "POST /v1/webhooks/{id}/deliveries/{dlv}/retry", scope: auth.ScopeWebhooksWrite, action: "webhook.retry", resource: "webhook", idempotent: true, h: s.handleRetryDelivery},
		{pattern: "POST /v1/webhooks/{id}/rotate-secret", scope: auth.ScopeWebhooksWrite, action: "webhook.rotate_secret", resource: "webhook", idempotent: true, h: s.handleRotateSecret},

		{pattern: "POST /v1/workflows/{id}/replay", scope: auth.ScopeWorkflowsReplay, action: "workflow.replay", resource: "workflow", idempotent: true, ownKeys: true, h: s.handleReplay},
		{pattern: "GET /v1/replays", scope: auth.ScopeWorkflowsReplay, action: "replay.list", resource: "replay", h: s.handleListReplays},
		{pattern: "GET /v1/replays/{id}", scope: auth.ScopeWorkflowsReplay, action: "replay.read", resource: "replay", h: s.handleGetReplay},
		{pattern: "POST /v1/replay-batches", scope: auth.ScopeWorkflowsReplay, action: "replay_batch.create", resource: "replay_batch", idempotent: true, h: s.handleCreateBatch},
		{pattern: "GET /v1/replay-batches", scope: auth.ScopeWorkflowsReplay, action: "replay_batch.list", resource: "replay_batch", h: s.handleListBatches},
		{pattern: "GET /v1/replay-batches/{id}", scope: auth.ScopeWorkflowsReplay, action: "replay_batch.read", resource: "replay_batch", h: s.handleGetBatch},
		{pattern: "GET /v1/replay-batches/{id}/replays", scope: auth.ScopeWorkflowsReplay, action: "replay_batch.replays", resource: "replay_batch", h: s.handleBatchReplays},
		{pattern: "GET /v1/replay-batches/{id}/events", scope: auth.ScopeWorkflowsReplay, action: "replay_batch.events", resource: "replay_batch", h: s.handleBatchEvents},
		{pattern: "POST /v1/replay-batches/{id}/cancel", scope: auth.ScopeWorkflowsReplay, action: "replay_batch.cancel", resource: "replay_batch", idempotent: true, h: s.handleCancelBatch},
		{pattern: "POST /v1/datasets", scope: auth.ScopeWorkflowsReplay, action: "dataset.create", resource: "dataset", idempotent: true, h: s.handleCreateDataset},
		{pattern: "GET /v1/datasets", scope: auth.ScopeWorkflowsReplay, action: "dataset.list", resource: "dataset", h: s.handleListDatasets},
		{pattern: "GET /v1/datasets/{name}", scope: auth.ScopeWorkflowsReplay, action: "dataset.read", resource: "dataset", h: s.handleGetDataset},
		{pattern: "PUT /v1/datasets/{name}", scope: auth.ScopeWorkflowsReplay, action: "dataset.update", resource: "dataset", idempotent: true, h: s.handleUpdateDataset},
		{pattern: "GET /replays/{id}", public: true, signed: web.KindReplay, action: "replay.view", resource: "replay", h: s.handleReplayPage},
		{pattern: "GET /replay-batches/{id}", public: true, signed: web.KindBatch, action: "replay_batch.view", resource: "replay_batch", h: s.handleBatchPage},
		{pattern: "GET " + web.AssetsPath + "{file}", public: true, noAudit: true, h: handleAssets},

		// The web console. Pages need the scope of the API reads they show
		// and are audited as those reads; actions are the API routes named.
		{pattern: "POST /v1/console/links", action: "console.link", resource: "console", h: s.console.CreateSignInLink},
		{pattern: "GET /console/signin", public: true, console: true, action: "console.signin", resource: "console", h: s.console.SignIn},
		{pattern: "POST /console/signin", console: true, action: "console.signin", resource: "console", h: s.console.ConfirmSignIn},
		{pattern: "GET /console/oidc/login", public: true, console: true, action: "console.signin", resource: "console", h: s.console.OIDCLogin},
		{pattern: "GET " + console.OIDCCallbackPath, public: true, console: true, action: "console.signin", resource: "console", h: s.console.OIDCCallback},
		{pattern: "POST /console/signout", console: true, action: "console.signout", resource: "console", h: s.console.SignOut},
		{pattern: "GET " + console.AssetsPath + "{file}", public: true, noAudit: true, h: console.ServeAssets},
		{pattern: "GET /console/{$}", console: true, action: "console.home", resource: "console", h: s.console.Home},
		{pattern: "GET /console/workflows", console: true, scope: auth.ScopeWorkflowsRead, action: "workflow.list", resource: "workflow", h: s.console.Workflows},
		{pattern: "GET /console/workflows/{id}", console: true, scope: auth.ScopeWorkflowsRead, action: "workflow.read", resource: "workflow", h: s.console.Workflow},
		{pattern: "GET /console/workflows/{id}/events", console: true, scope: auth.ScopeWorkflowsRead, action: "workflow.events", resource: "workflow", h: s.handleWorkflowEvents},
		{pattern: "POST /console/workflows/{id}/cancel", console: true, same: "POST /v1/workflows/{id}/cancel", form: formNone},
		{pattern: "POST /console/workflows/{id}/replay", console: true, same: "POST /v1/workflows/{id}/replay", form: formReplay},
		{pattern: "GET /console/approvals", console: true, scope: auth.ScopeWorkflowsApprove, action: "approval.list", resource: "approval", h: s.console.Approvals},
		{pattern: "POST /console/workflows/{id}/approvals/{step}", console: true, same: "POST /v1/workflows/{id}/approvals/{step}", form: formDecide},
		{pattern: "GET /console/agents", console: true, scope: auth.ScopeAgentsRead, action: "agent.list", resource: "agent", h: s.console.Agents},
		{pattern: "GET /console/agents/{id}", console: true, scope: auth.ScopeAgentsRead, action: "agent.versions", resource: "agent", h: s.console.Agent},
		{pattern: "GET /console/agents/{id}/diff", console: true, scope: auth.ScopeAgentsRead, action: "agent.diff", resource: "agent", h: s.console.AgentDiff},
		{pattern: "POST /console/agents/{id}/default", console: true, same: "PUT /v1/agents/{id}/default", form: formDefault},
		{pattern: "GET /console/tools", console: true, scope: auth.ScopeToolsRead, action: "operation.search", resource: "tool", h: s.console.Tools},
		{pattern: "GET /console/usage", console: true, scope: auth.ScopeUsageRead, action: "usage.read", resource: "usage", h: s.console.Usage},
		{pattern: "GET /console/audit", console: true, scope: auth.ScopeAuditRead, action: "audit.query", resource: "audit", h: s.console.Audit},
		{pattern: "GET /console/audit/verify", console: true, scope: auth.ScopeAuditRead, action: "audit.verify", resource: "audit", h: s.console.AuditVerify},
		{pattern: "GET /console/schedules", console: true, scope: auth.ScopeSchedulesRead, action: "schedule.list", resource: "schedule", h: s.console.Schedules},
		{pattern: "POST /console/schedules/{id}/pause", console: true, same: "POST /v1/schedules/{id}/pause", form: formNone},
		{pattern: "POST /console/schedules/{id}/resume", console: true, same: "POST /v1/schedules/{id}/resume", form: formNone},
		{pattern: "GET /console/webhooks", console: true, scope: auth.ScopeWebhooksRead, action: "webhook.list", resource: "webhook", h: s.console.Webhooks},
		{pattern: "GET /console/webhooks/{id}", console: true, scope: auth.ScopeWebhooksRead, action: "webhook.deliveries", resource: "webhook", h: s.console.Webhook},
		{pattern: "POST /console/webhooks/{id}/deliveries/{dlv}/retry", console: true, same: "POST /v1/webhooks/{id}/deliveries/{dlv}/retry", form: formNone},

		// The run gateway of external agents (docs/external-agents.md):
		// authenticated by the run's token, audited in the run's tenant.
		{pattern: "POST /gateway/openai/v1/chat/completions", gateway: true, action: "gateway.chat", resource: "workflow", h: s.gateway.ChatCompletions},
		{pattern: "POST /gateway/openai/v1/responses", gateway: true, action: "gateway.chat", resource: "workflow", h: s.gateway.Responses},
		{pattern: "GET /gateway/openai/v1/models", gateway: true, action: "gateway.models", resource: "workflow", h: s.gateway.Models},
		{pattern: "POST /gateway/anthropic/v1/messages", gateway: true, action: "gateway.chat", resource: "workflow", h: s.gateway.Messages},
		{pattern: "POST /gateway/mcp", gateway: true, action: "gateway.mcp", resource: "workflow", h: s.gateway.MCP},

		{pattern: "GET /v1/audit/query", scope: auth.ScopeAuditRead, action: "audit.query", resource: "audit", h: handleAuditQuery(d.Store)},
		{pattern: "POST /v1/audit/query", scope: auth.ScopeAuditRead, action: "audit.query", resource: "audit", idempotent: true, h: handleAuditQuery(d.Store)},
		{pattern: "GET /v1/audit/verify", scope: auth.ScopeAuditRead, action: "audit.verify", resource: "audit", h: handleAuditVerify(d.Store)},
		{pattern: "GET /v1/audit/export", scope: auth.ScopeAuditRead, action: "audit.export", resource: "audit", h: handleAuditExport(d.Store, s.cfg.Version)},
	}
}
