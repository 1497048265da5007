package mcp

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
)

// HandleResourceMetadata answers with the RFC 9728 metadata of the MCP
// endpoint as a protected resource.
func (s *Server) HandleResourceMetadata(w http.ResponseWriter, r *http.Request) error {
	md := oauthex.ProtectedResourceMetadata{
		Resource:               s.cfg.PublicURL + "/mcp",
		ResourceName:           "agentplane MCP server",
		ScopesSupported:        []string{auth.ScopeMCPUse, auth.ScopeAgentsInvoke, auth.ScopeAllTools},
		BearerMethodsSupported: []string{"header"},
	}
	if s.cfg.AuthorizationServer != "" {
		md.AuthorizationServers = []string{s.cfg.AuthorizationServer}
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	return frontdoor.WriteJSON(w, http.StatusOK, md)
}

// ResourceMetadataURL is where a client refused at /mcp finds how to
// authenticate (RFC 9728 §5.1).
func (s *Server) ResourceMetadataURL() string {
	return s.cfg.PublicURL + "/.well-known/oauth-protected-resource/mcp"
}
