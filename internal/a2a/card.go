package a2a

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

// cardOf is the card of an agent version.
func (s *Server) cardOf(v *agent.Version, def agent.Definition) wire.AgentCard {
	url := s.d.PublicURL + "/a2a/" + v.Name
	desc := v.Description
	if desc == "" {
		desc = def.Purpose
	}
	if desc == "" {
		desc = "The agentplane agent " + v.Name + ": send a goal as text, and its context as a data part."
	}
	scopes := map[string]string{auth.ScopeAgentsInvoke: "send messages to agents and follow their tasks"}
	scheme := map[string]any{"oauth2SecurityScheme": map[string]any{
		"description": "OAuth 2.0 client credentials; the token needs the scope agents:invoke",
		"flows": map[string]any{"clientCredentials": map[string]any{
			"tokenUrl": s.d.PublicURL + "/oauth/token", "scopes": scopes}}}}
	if s.d.ExternalIssuer != "" {
		scheme = map[string]any{"openIdConnectSecurityScheme": map[string]any{
			"description":      "tokens of the external issuer, with the scope agents:invoke",
			"openIdConnectUrl": strings.TrimSuffix(s.d.ExternalIssuer, "/") + "/.well-known/openid-configuration"}}
	}
	in := []string{"text/plain", "application/json"}
	out := []string{"application/json", "text/plain"}
	return wire.AgentCard{
		Name: v.Name, Description: desc, Version: v.Version,
		SupportedInterfaces: []wire.AgentInterface{
			{URL: url, ProtocolBinding: wire.BindingJSONRPC, ProtocolVersion: wire.Version},
			{URL: url, ProtocolBinding: wire.BindingHTTPJSON, ProtocolVersion: wire.Version},
		},
		Provider:             &wire.AgentProvider{URL: s.d.PublicURL, Organization: "agentplane"},
		Capabilities:         wire.AgentCapabilities{Streaming: true, PushNotifications: s.d.Webhooks != nil},
		SecuritySchemes:      map[string]any{"agentplane": scheme},
		SecurityRequirements: []map[string]any{{"schemes": map[string]any{"agentplane": map[string]any{"list": []string{auth.ScopeAgentsInvoke}}}}},
		DefaultInputModes:    in, DefaultOutputModes: out,
		Skills: []wire.AgentSkill{{ID: v.Name, Name: v.Name, Description: desc, Tags: []string{"agentplane", "agent"},
			InputModes: in, OutputModes: out}},
	}
}

// Card serves the agent card of an agent's default version: to a
// caller with a token of its tenant, or to anyone when the version was
// deployed with a2a.public_card (the tenant named by ?tenant=). A request
// without a token has no tenant of its own: its record goes to the
// _system chain (its resource the agent, its details the tenant asked
// for), so that nobody writes into a tenant's chain by naming it.
func (s *Server) Card(w http.ResponseWriter, r *http.Request) error {
	info := frontdoor.InfoFrom(r.Context())
	name := r.PathValue("agent")
	info.ResourceID = name
	if _, ok := auth.BearerToken(r); ok {
		if err := s.d.Admit(w, r); err != nil {
			return err
		}
		return s.writeCard(w, r, frontdoor.Principal(r).Tenant, name, false)
	}
	tenant := r.URL.Query().Get("tenant")
	refused := problem.New(problem.Unauthenticated, "no bearer token: send Authorization: Bearer <access token> (this agent's card is not public)")
	if tenant == "" || len(tenant) > maxCardTenant {
		return refused
	}
	info.AddDetail("tenant", audit.Text(tenant))
	if err := s.writeCard(w, r, tenant, name, true); problem.Is(err, problem.AgentVersionNotFound) || problem.Is(err, problem.NotFound) {
		return refused
	} else {
		return err
	}
}

// maxCardTenant bounds the ?tenant= of an anonymous card request: a longer
// one names no tenant.
const maxCardTenant = 200

var errCardNotPublic = problem.New(problem.NotFound, "the card is not public")

func (s *Server) writeCard(w http.ResponseWriter, r *http.Request, tenant, name string, public bool) error {
	v, err := s.d.Agents.AgentVersion(r.Context(), tenant, name, "")
	if err != nil {
		return err
	}
	// An external version has no definition: no purpose, no public card.
	var def agent.Definition
	if v.External == nil {
		if err := json.Unmarshal(v.Definition, &def); err != nil {
			return fmt.Errorf("definition of %s: %w", v.Ref(), err)
		}
	}
	if public {
		if def.A2A == nil || !def.A2A.PublicCard {
			return errCardNotPublic
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
	} else {
		w.Header().Set("Cache-Control", "private, max-age=300")
	}
	w.Header().Set("ETag", strconv.Quote(v.Name+"@"+v.Version))
	return frontdoor.WriteJSON(w, http.StatusOK, s.cardOf(v, def))
}
