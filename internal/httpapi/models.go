package httpapi

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/page"
)

// The model registry (SPEC §4 "Models and LLM agents"). A model is shown
// as model.Model encodes itself: the secrets reference, never a secret.

func (s *Server) handleRegisterModel(w http.ResponseWriter, r *http.Request) error {
	var reg model.Registration
	if err := frontdoor.DecodeJSON(r, &reg); err != nil {
		return err
	}
	rec := s.record(r, http.StatusCreated)
	m, err := s.deps.Models.Register(r.Context(), frontdoor.Principal(r).Tenant, reg, rec)
	if err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, m.ID
	w.Header().Set("Location", "/v1/models/"+m.Name)
	return frontdoor.WriteJSON(w, http.StatusCreated, m)
}

func (s *Server) handleUpdateModel(w http.ResponseWriter, r *http.Request) error {
	var reg model.Registration
	if err := frontdoor.DecodeJSON(r, &reg); err != nil {
		return err
	}
	rec := s.record(r, http.StatusOK)
	m, err := s.deps.Models.Update(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("name"), reg, rec)
	if err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, m.ID
	return frontdoor.WriteJSON(w, http.StatusOK, m)
}

func (s *Server) handleDeleteModel(w http.ResponseWriter, r *http.Request) error {
	rec := s.record(r, http.StatusOK)
	if err := s.deps.Models.Delete(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("name"), rec); err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, rec.Resource.ID
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"id": rec.Resource.ID, "name": r.PathValue("name"), "deleted": true})
}

func (s *Server) handleGetModel(w http.ResponseWriter, r *http.Request) error {
	m, err := s.deps.Models.Get(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("name"))
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).ResourceID = m.ID
	return frontdoor.WriteJSON(w, http.StatusOK, m)
}

type modelPage struct {
	Models     []*model.Model `json:"models"`
	NextCursor *string        `json:"next_cursor"`
}

func (s *Server) handleListModels(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		return err
	}
	opt := model.ListOptions{Limit: limit, After: q.Get("cursor")}
	ms, err := s.deps.Models.List(r.Context(), frontdoor.Principal(r).Tenant, opt)
	if err != nil {
		return err
	}
	list := modelPage{Models: ms}
	if list.Models == nil {
		list.Models = []*model.Model{}
	}
	if len(ms) == opt.Limit {
		c := ms[len(ms)-1].Name
		list.NextCursor = &c
	}
	return frontdoor.WriteJSON(w, http.StatusOK, list)
}
