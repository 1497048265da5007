package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// handleRefreshTool fetches a tool's spec_url again and answers the diff
// with the current operations (SPEC §4 "Tool drift").
func (s *Server) handleRefreshTool(w http.ResponseWriter, r *http.Request) error {
	rec := s.record(r, http.StatusOK)
	res, err := s.deps.Tools.Refresh(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), rec)
	if err != nil {
		return err
	}
	// An unchanged description stores nothing, so it is audited as any
	// request is; a stored revision carries its record.
	frontdoor.InfoFrom(r.Context()).Audited = res.Status != tool.RefreshUnchanged
	return frontdoor.WriteJSON(w, http.StatusOK, res)
}

// handleApplyToolRevision applies a pending revision.
func (s *Server) handleApplyToolRevision(w http.ResponseWriter, r *http.Request) error {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		return problem.New(problem.NotFound, "no revision %q: revisions are numbered from 1 (GET /v1/tools/%s/revisions lists them)", r.PathValue("n"), r.PathValue("id"))
	}
	rec := s.record(r, http.StatusOK)
	ref, err := s.deps.Tools.ApplyRefresh(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), n, rec)
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, ref)
}

// revisionView is a revision in the list: its diff in counts.
type revisionView struct {
	Revision     int              `json:"revision"`
	Status       string           `json:"status"`
	BaseRevision int              `json:"base_revision"`
	ToolRevision int              `json:"tool_revision,omitempty"`
	CreatedAt    time.Time        `json:"created_at"`
	AppliedAt    *time.Time       `json:"applied_at,omitempty"`
	Summary      tool.DiffSummary `json:"summary"`
	Diff         tool.Diff        `json:"diff"`
}

// handleToolRevisions lists a tool's revisions, newest first.
func (s *Server) handleToolRevisions(w http.ResponseWriter, r *http.Request) error {
	refs, err := s.deps.Tools.Refreshes(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := make([]revisionView, len(refs))
	for i, ref := range refs {
		out[i] = revisionView{Revision: ref.N, Status: ref.Status, BaseRevision: ref.BaseRevision, ToolRevision: ref.ToolRevision,
			CreatedAt: ref.CreatedAt, AppliedAt: ref.AppliedAt, Summary: ref.Diff.Summary(), Diff: ref.Diff}
	}
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"revisions": out})
}
