package httpapi

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/rollout"
)

// rolloutOf is the rollout service and the agent a rollout route names.
func (s *Server) rolloutOf(r *http.Request) (*rollout.Service, string, error) {
	if s.deps.Rollouts == nil {
		return nil, "", problem.New(problem.Unavailable, "rollouts are not enabled on this server")
	}
	name, err := agent.UnpinnedName(r.PathValue("id"))
	return s.deps.Rollouts, name, err
}

// handlePutRollout starts a rollout of the agent's target version
// (docs/change-safety.md): 201 with the rollout, or 200 with the active one
// this same request started.
func (s *Server) handlePutRollout(w http.ResponseWriter, r *http.Request) error {
	svc, name, err := s.rolloutOf(r)
	if err != nil {
		return err
	}
	var req rollout.Request
	if err := frontdoor.DecodeJSON(r, &req); err != nil {
		return err
	}
	p := frontdoor.Principal(r)
	v, created, err := svc.Put(r.Context(), p.Tenant, name, req, p.Actor(), s.record(r, http.StatusCreated))
	if err != nil {
		return err
	}
	if !created {
		return frontdoor.WriteJSON(w, http.StatusOK, v)
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusCreated, v)
}

// handleGetRollout shows the agent's newest rollout, its arms side by side.
func (s *Server) handleGetRollout(w http.ResponseWriter, r *http.Request) error {
	svc, name, err := s.rolloutOf(r)
	if err != nil {
		return err
	}
	v, err := svc.Get(r.Context(), frontdoor.Principal(r).Tenant, name)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, v)
}

// handleEndRollout ends the agent's active rollout.
func (s *Server) handleEndRollout(w http.ResponseWriter, r *http.Request) error {
	svc, name, err := s.rolloutOf(r)
	if err != nil {
		return err
	}
	v, err := svc.End(r.Context(), frontdoor.Principal(r).Tenant, name, s.record(r, http.StatusOK))
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, v)
}
