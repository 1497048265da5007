package httpapi

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/a2a"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
)

// problemKind is the kind of a code: the problem table's, or a protocol's
// own (A2A's).
func problemKind(c problem.Code) (problem.Kind, bool) {
	if k, ok := problem.Lookup(c); ok {
		return k, true
	}
	for _, k := range a2a.Kinds {
		if k.Code == c {
			return k, true
		}
	}
	return problem.Kind{}, false
}

// newA2A is the A2A server of s's agents (internal/a2a), given what it
// needs of the HTTP layer at request time: admission of a card request
// that brings a token, the tenant's stream slots, the audit record of a
// request and the drain.
func (s *Server) newA2A() *a2a.Server {
	issuer := ""
	if s.deps.Issuer == nil {
		issuer = s.cfg.AuthorizationServer
	}
	return a2a.New(a2a.Deps{
		Agents: s.deps.Agents, Workflows: s.deps.Workflows, Runner: s.deps.Runner, Invoker: s.invoker,
		Webhooks: s.deps.Webhooks, Now: s.deps.Now,
		PublicURL: s.cfg.PublicURL, ExternalIssuer: issuer, IdempotencyTTL: s.cfg.InvokeIdempotencyTTL,
		Admit: func(w http.ResponseWriter, r *http.Request) error {
			return s.admit(w, r, &route{scope: auth.ScopeAgentsInvoke})
		},
		Stream:   s.streams.acquire,
		Record:   s.record,
		Draining: s.draining,
	})
}
