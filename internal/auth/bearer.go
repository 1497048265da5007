package auth

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
)

// The scopes of the API's endpoints (SPEC §2). A tool additionally needs
// ToolScope(name), or tool:*, in the caller's token.
const (
	ScopeToolsWrite      = "tools:write"
	ScopeToolsRead       = "tools:read"
	ScopeAgentsWrite     = "agents:write"
	ScopeAgentsRead      = "agents:read"
	ScopeAgentsInvoke    = "agents:invoke"
	ScopeWorkflowsRead   = "workflows:read"
	ScopeWorkflowsReplay = "workflows:replay"
	// ScopeWorkflowsApprove decides approvals; a step may require a scope
	// of its own besides.
	ScopeWorkflowsApprove = "workflows:approve"
	ScopeAuditRead        = "audit:read"
	// ScopeWorkflowsDelete deletes a finished workflow with its history.
	ScopeWorkflowsDelete = "workflows:delete"
	// ScopeMCPUse reaches the tenant's MCP server; each call there needs
	// its own scopes besides (agents:invoke, tool:<name>).
	ScopeMCPUse = "mcp:use"
	// ScopeModelsRead and ScopeModelsWrite read and manage the tenant's
	// models; ScopeUsageRead reads its token usage and cost.
	ScopeModelsRead  = "models:read"
	ScopeModelsWrite = "models:write"
	ScopeUsageRead   = "usage:read"
	// ScopeSchedulesRead and ScopeSchedulesWrite read and manage the
	// tenant's schedules.
	ScopeSchedulesRead  = "schedules:read"
	ScopeSchedulesWrite = "schedules:write"
	// ScopeWebhooksRead and ScopeWebhooksWrite read and manage the
	// tenant's webhooks and their deliveries.
	ScopeWebhooksRead  = "webhooks:read"
	ScopeWebhooksWrite = "webhooks:write"
	ScopeAllTools      = "tool:*"
)

// EndpointScopes lists the endpoint scopes, in the order of SPEC §2.
var EndpointScopes = []string{
	ScopeToolsWrite, ScopeToolsRead, ScopeAgentsWrite, ScopeAgentsRead,
	ScopeAgentsInvoke, ScopeWorkflowsRead, ScopeWorkflowsReplay, ScopeWorkflowsApprove, ScopeMCPUse, ScopeAuditRead,
	ScopeModelsRead, ScopeModelsWrite, ScopeUsageRead,
	ScopeSchedulesWrite, ScopeSchedulesRead, ScopeWebhooksWrite, ScopeWebhooksRead, ScopeWorkflowsDelete,
}

// Require returns nil when p holds scope, else an InsufficientScope error
// naming it.
func (p Principal) Require(scope string) error {
	if p.Has(scope) {
		return nil
	}
	return &problem.Error{
		Code:   problem.InsufficientScope,
		Detail: "this request needs the scope " + scope,
		Scope:  scope,
	}
}

// ValidScope reports whether s is a scope token of RFC 6749 §3.3:
// one or more of %x21 / %x23-5B / %x5D-7E.
func ValidScope(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// BearerToken returns the token of an RFC 6750 "Authorization: Bearer"
// header. The scheme is case-insensitive; the token must have the b64token
// syntax. It reports false when there is no such header, more than one, or
// a malformed one. Tokens in query strings or forms are not read: they end
// up in logs.
func BearerToken(r *http.Request) (string, bool) {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	if !isB64Token(token) {
		return "", false
	}
	return token, true
}

// isB64Token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// Challenge returns the WWW-Authenticate value for a refused request (SPEC
// §2, RFC 6750 §3). An InsufficientScope error gives
// `Bearer error="insufficient_scope", scope="<needed>"`, the needed scope
// being scope or, when that is empty, the error's Scope; anything else,
// including a missing token, gives `Bearer error="invalid_token"`.
func Challenge(err error, scope string) string {
	var pe *problem.Error
	if errors.As(err, &pe) && pe.Code == problem.InsufficientScope {
		if scope == "" {
			scope = pe.Scope
		}
		if scope != "" && validScopeList(scope) {
			return `Bearer error="insufficient_scope", scope="` + scope + `"`
		}
		return `Bearer error="insufficient_scope"`
	}
	return `Bearer error="invalid_token"`
}

// validScopeList reports whether s is space-separated valid scopes, safe to
// put in a quoted-string.
func validScopeList(s string) bool {
	for _, f := range strings.Split(s, " ") {
		if !ValidScope(f) {
			return false
		}
	}
	return true
}
