package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/impact"
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
	n, err := revisionNumber(r)
	if err != nil {
		return err
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

// handleToolRevisionImpact answers what a revision breaks: the deployed
// agent versions and the calls recorded since ?since= (default 7d).
func (s *Server) handleToolRevisionImpact(w http.ResponseWriter, r *http.Request) error {
	if s.deps.Impact == nil {
		return problem.New(problem.Unavailable, "the impact of tool revisions is not enabled on this server")
	}
	n, err := revisionNumber(r)
	if err != nil {
		return err
	}
	since, err := impact.ParseSince(r.URL.Query().Get("since"))
	if err != nil {
		return err
	}
	out, err := s.deps.Impact.Of(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), n, since)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, out)
}

// revisionNumber is the path's {n}: revisions are numbered from 1.
func revisionNumber(r *http.Request) (int, error) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		return 0, problem.New(problem.NotFound, "no revision %q: revisions are numbered from 1 (GET /v1/tools/%s/revisions lists them)", r.PathValue("n"), r.PathValue("id"))
	}
	return n, nil
}
