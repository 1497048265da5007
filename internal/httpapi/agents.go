package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
)

type versionView struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Version     string          `json:"version"`
	Ref         string          `json:"ref"`
	Default     bool            `json:"default"`
	Description string          `json:"description,omitempty"`
	Tools       []string        `json:"tools"`
	DeployedAt  string          `json:"deployed_at"`
	Definition  json.RawMessage `json:"definition,omitempty"`
	// External is an external version's block, in every view of it (its
	// auth's secrets_ref is a reference, never a secret).
	External   *agent.External `json:"external,omitempty"`
	ArchivedAt *string         `json:"archived_at,omitempty"`
}

func viewVersion(v *agent.Version, withDefinition bool) versionView {
	vv := versionView{ID: v.Name, Name: v.Name, Version: v.Version, Ref: v.Ref(), Default: v.Default,
		Description: v.Description, Tools: v.Tools, DeployedAt: v.DeployedAt.UTC().Format(timeFormat), External: v.External}
	if vv.Tools == nil {
		vv.Tools = []string{}
	}
	if withDefinition {
		vv.Definition = v.Definition
	}
	vv.ArchivedAt = formatOptional(v.ArchivedAt)
	return vv
}

type agentView struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	DefaultVersion string  `json:"default_version"`
	LatestVersion  string  `json:"latest_version"`
	Versions       int     `json:"versions"`
	Description    string  `json:"description,omitempty"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
	ArchivedAt     *string `json:"archived_at,omitempty"`
}

func viewAgent(a *agent.Agent) agentView {
	return agentView{ID: a.Name, Name: a.Name, DefaultVersion: a.DefaultVersion, LatestVersion: a.LatestVersion,
		Versions: a.Versions, Description: a.Description,
		CreatedAt: a.CreatedAt.UTC().Format(timeFormat), UpdatedAt: a.UpdatedAt.UTC().Format(timeFormat),
		ArchivedAt: formatOptional(a.ArchivedAt)}
}

// formatOptional formats a time that may be unset.
func formatOptional(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(timeFormat)
	return &s
}

func (s *Server) handleDeployAgent(w http.ResponseWriter, r *http.Request) error {
	var d agent.Deployment
	if err := frontdoor.DecodeJSON(r, &d); err != nil {
		return err
	}
	tenant := frontdoor.Principal(r).Tenant
	v, err := agent.NewVersion(r.Context(), s.deps.Runner, tenant, d, s.deps.Now().UTC())
	if err != nil {
		return err
	}
	if err := s.deps.ExternalChecks.Check(r.Context(), tenant, v); err != nil {
		return err
	}
	rec := s.record(r, http.StatusCreated)
	rec.Resource.ID = d.Name
	if err := s.deps.Agents.DeployVersion(r.Context(), v, d.Promote, rec); err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, d.Name
	w.Header().Set("Location", "/v1/agents/"+v.Ref())
	return frontdoor.WriteJSON(w, http.StatusCreated, viewVersion(v, false))
}

// splitRef splits a path's name@version; version is "" for a bare name. An
// @ with no version after it names no version.
func splitRef(id string) (name, version string, err error) {
	name, version, pinned := strings.Cut(id, "@")
	if pinned && version == "" {
		return "", "", problem.New(problem.AgentVersionNotFound,
			"%q names no version: use %s for the default version, or %s@<version>", id, name, name)
	}
	return name, version, nil
}

func (s *Server) handleGetAgent(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	name, version, err := splitRef(r.PathValue("id"))
	if err != nil {
		return err
	}
	if version != "" {
		v, err := s.deps.Agents.AgentVersion(r.Context(), tenant, name, version)
		if err != nil {
			return err
		}
		return frontdoor.WriteJSON(w, http.StatusOK, viewVersion(v, true))
	}
	a, err := s.deps.Agents.Agent(r.Context(), tenant, name)
	if err != nil {
		return err
	}
	v, err := s.deps.Agents.AgentVersion(r.Context(), tenant, name, "")
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, struct {
		agentView
		Default versionView `json:"default"`
	}{viewAgent(a), viewVersion(v, true)})
}

func (s *Server) handleListAgents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		return err
	}
	list := s.deps.Agents.ListAgents
	switch q.Get("archived") {
	case "", "false":
	case "true":
		list = s.deps.Agents.ListAllAgents
	default:
		return problem.Field("archived", "must be true (archived agents too) or false (live agents only, the default)")
	}
	agents, err := list(r.Context(), frontdoor.Principal(r).Tenant, q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	doc := struct {
		Agents     []agentView `json:"agents"`
		NextCursor *string     `json:"next_cursor"`
	}{Agents: make([]agentView, len(agents))}
	for i, a := range agents {
		doc.Agents[i] = viewAgent(a)
	}
	if len(agents) == limit {
		c := agents[len(agents)-1].Name
		doc.NextCursor = &c
	}
	return frontdoor.WriteJSON(w, http.StatusOK, doc)
}

func (s *Server) handleListVersions(w http.ResponseWriter, r *http.Request) error {
	name, err := agent.UnpinnedName(r.PathValue("id"))
	if err != nil {
		return err
	}
	vs, err := s.deps.Agents.ListVersions(r.Context(), frontdoor.Principal(r).Tenant, name)
	if err != nil {
		return err
	}
	views := make([]versionView, len(vs))
	for i, v := range vs {
		views[i] = viewVersion(v, false)
	}
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"agent": name, "versions": views})
}

func (s *Server) handleSetDefault(w http.ResponseWriter, r *http.Request) error {
	name, err := agent.UnpinnedName(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req struct {
		Version string `json:"version"`
	}
	if err := frontdoor.DecodeJSON(r, &req); err != nil {
		return err
	}
	if req.Version == "" {
		return problem.Field("version", "is required")
	}
	tenant := frontdoor.Principal(r).Tenant
	if err := s.deps.Agents.SetDefault(r.Context(), tenant, name, req.Version, s.record(r, http.StatusOK)); err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	v, err := s.deps.Agents.AgentVersion(r.Context(), tenant, name, req.Version)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, viewVersion(v, false))
}

// handleArchiveAgent archives a version (name@version) or a whole agent
// (name) and answers with what it archived (docs/agents.md).
func (s *Server) handleArchiveAgent(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	name, version, err := splitRef(r.PathValue("id"))
	if err != nil {
		return err
	}
	rec := s.record(r, http.StatusOK)
	if version != "" {
		if err := s.deps.Agents.ArchiveVersion(r.Context(), tenant, name, version, rec); err != nil {
			return err
		}
		frontdoor.InfoFrom(r.Context()).Audited = true
		v, err := s.deps.Agents.AgentVersion(r.Context(), tenant, name, version)
		if err != nil {
			return err
		}
		return frontdoor.WriteJSON(w, http.StatusOK, viewVersion(v, false))
	}
	n, err := s.deps.Agents.ArchiveAgent(r.Context(), tenant, name, rec)
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	a, err := s.deps.Agents.Agent(r.Context(), tenant, name)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, struct {
		agentView
		VersionsArchived int `json:"versions_archived"`
	}{viewAgent(a), n})
}
