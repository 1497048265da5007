package httpapi

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// toolView is a tool as the API shows it: the seed's five fields, SPEC's extras.
type toolView struct {
	ID                 string                 `json:"id"`
	Name               string                 `json:"name"`
	Type               string                 `json:"type"`
	Operations         int                    `json:"operations"`
	IndexedAt          string                 `json:"indexed_at"`
	ScopeRequired      string                 `json:"scope_required"`
	SpecURL            string                 `json:"spec_url,omitempty"`
	EndpointURL        string                 `json:"endpoint_url,omitempty"`
	BaseURL            string                 `json:"base_url,omitempty"`
	Auth               authView               `json:"auth"`
	PolicyClass        string                 `json:"policy_class"`
	SideEffects        []string               `json:"side_effects"`
	IdempotencySupport bool                   `json:"idempotency_support"`
	Limits             *tool.Limits           `json:"limits,omitempty"`
	OperationLimits    map[string]tool.Limits `json:"operation_limits,omitempty"`
	Redact             *redact.Config         `json:"redact,omitempty"`
	Refresh            string                 `json:"refresh,omitempty"`
	SpecSHA256         string                 `json:"spec_sha256"`
	Revision           int                    `json:"revision"`
	CreatedAt          string                 `json:"created_at"`
	UpdatedAt          string                 `json:"updated_at"`
	OperationList      []opSummary            `json:"operation_list,omitempty"`
	Warnings           []string               `json:"warnings,omitempty"`
}

// authView shows how a tool authenticates; secrets_ref is a reference, not a secret.
type authView struct {
	Type       string   `json:"type"`
	SecretsRef string   `json:"secrets_ref,omitempty"`
	ClientID   string   `json:"client_id,omitempty"`
	TokenURL   string   `json:"token_url,omitempty"`
	Scopes     []string `json:"scopes,omitempty"`
	Header     string   `json:"header,omitempty"`
	In         string   `json:"in,omitempty"`
	Name       string   `json:"name,omitempty"`
}

type opSummary struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Summary string `json:"summary,omitempty"`
}

// timeFormat writes API timestamps: ISO 8601 UTC with a Z.
const timeFormat = "2006-01-02T15:04:05.000Z"

func viewTool(t *tool.Tool) toolView {
	v := toolView{
		ID: t.ID, Name: t.Name, Type: t.Type, Operations: t.OperationCount,
		IndexedAt: t.IndexedAt.UTC().Format(timeFormat), ScopeRequired: t.ScopeRequired(),
		SpecURL: t.SpecURL, EndpointURL: t.EndpointURL, BaseURL: t.BaseURL,
		Auth: authView{Type: t.Auth.Type, SecretsRef: t.Auth.SecretsRef, ClientID: t.Auth.ClientID,
			TokenURL: t.Auth.TokenURL, Scopes: t.Auth.Scopes, Header: t.Auth.Header, In: t.Auth.In, Name: t.Auth.Name},
		PolicyClass: t.PolicyClass, SideEffects: t.SideEffects, IdempotencySupport: t.IdempotencySupport,
		Limits: t.Limits, OperationLimits: t.OperationLimits, Redact: t.Redact, Refresh: t.Refresh,
		SpecSHA256: t.SpecSHA256, Revision: t.Revision,
		CreatedAt: t.CreatedAt.UTC().Format(timeFormat), UpdatedAt: t.UpdatedAt.UTC().Format(timeFormat),
		Warnings: t.Warnings,
	}
	if v.SideEffects == nil {
		v.SideEffects = []string{}
	}
	return v
}

func (s *Server) handleRegisterTool(w http.ResponseWriter, r *http.Request) error {
	var reg tool.Registration
	if err := frontdoor.DecodeJSON(r, &reg); err != nil {
		return err
	}
	p := frontdoor.Principal(r)
	rec := s.record(r, http.StatusCreated)
	t, err := s.deps.Tools.Register(r.Context(), p.Tenant, reg, rec)
	if err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, t.ID
	w.Header().Set("Location", "/v1/tools/"+t.ID)
	return frontdoor.WriteJSON(w, http.StatusCreated, viewTool(t))
}

func (s *Server) handleUpdateTool(w http.ResponseWriter, r *http.Request) error {
	var reg tool.Registration
	if err := frontdoor.DecodeJSON(r, &reg); err != nil {
		return err
	}
	rec := s.record(r, http.StatusOK)
	t, err := s.deps.Tools.Update(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), reg, rec)
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, viewTool(t))
}

func (s *Server) handleDeleteTool(w http.ResponseWriter, r *http.Request) error {
	rec := s.record(r, http.StatusOK)
	if err := s.deps.Tools.Delete(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), rec); err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("id"), "deleted": true})
}

func (s *Server) handleGetTool(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	t, err := s.deps.ToolStore.Tool(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	ops, err := s.deps.ToolStore.Operations(r.Context(), tenant, t.ID, "")
	if err != nil {
		return err
	}
	v := viewTool(t)
	v.OperationList = make([]opSummary, len(ops))
	for i, op := range ops {
		v.OperationList[i] = opSummary{ID: op.ID, Kind: op.Kind, Summary: op.Summary}
	}
	return frontdoor.WriteJSON(w, http.StatusOK, v)
}

type toolPage struct {
	Tools      []toolView `json:"tools"`
	NextCursor *string    `json:"next_cursor"`
}

func (s *Server) handleListTools(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		return err
	}
	opt := tool.ListOptions{Limit: limit, After: q.Get("cursor")}
	tools, err := s.deps.ToolStore.ListTools(r.Context(), frontdoor.Principal(r).Tenant, opt)
	if err != nil {
		return err
	}
	list := toolPage{Tools: make([]toolView, len(tools))}
	for i, t := range tools {
		list.Tools[i] = viewTool(t)
	}
	if len(tools) == opt.Limit {
		c := tools[len(tools)-1].ID
		list.NextCursor = &c
	}
	return frontdoor.WriteJSON(w, http.StatusOK, list)
}
