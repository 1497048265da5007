package httpapi

import (
	"bytes"
	"io"
	"net/http"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/workflow"
)

// replayRequest is the body of POST /v1/workflows/{id}/replay.
type replayRequest struct {
	WorkflowID         string `json:"workflow_id,omitempty"`
	TargetAgentVersion string `json:"target_agent_version"`
	DryRun             *bool  `json:"dry_run,omitempty"`
	// LLM and UnrecordedCalls say how a dry run is served (replay.Mode).
	LLM             string `json:"llm,omitempty"`
	UnrecordedCalls string `json:"unrecorded_calls,omitempty"`
	// Faults answer the calls they apply to instead of the record or the
	// tools, in dry and real replays (docs/change-safety.md).
	Faults []fault.Fault `json:"faults,omitempty"`
}

// replayView is a replay as the API shows it to one caller: tool bodies
// only for the tools the caller may use, and a viewer link signed for them.
type replayView struct {
	*replay.Replay
	// CreatedAt is written as every other API time (it shadows the replay's).
	CreatedAt string `json:"created_at"`
	ViewerURL string `json:"viewer_url"`
}

// handleReplay makes a replay. A dry run's Idempotency-Key keeps its
// response as any POST's does; a real replay's key is stored with the new
// workflow it creates, so a repeat finds that replay whatever became of the
// first request's connection.
func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) error {
	if err := frontdoor.RequireJSON(r); err != nil {
		return err
	}
	body, err := frontdoor.ReadBody(r)
	if err != nil {
		return err
	}
	var req replayRequest
	if err := jsonbody.Decode(body, &req); err != nil {
		return err
	}
	if req.DryRun == nil || *req.DryRun {
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.idempotent(frontdoor.Adapt(s.deps.Logger, func(w http.ResponseWriter, r *http.Request) error {
			return s.replay(w, r, req, "", "")
		})).ServeHTTP(w, r)
		return nil
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return s.replay(w, r, req, "", "")
	}
	if len(key) > maxIdempotencyKey {
		return problem.Field("Idempotency-Key", "must be at most %d characters", maxIdempotencyKey)
	}
	return s.replay(w, r, req, workflow.IdempotencyKey(frontdoor.Principal(r).ID(), r.URL.Path, key), workflow.Fingerprint(body))
}

// replay makes the replay req asks for; key and hash are a real replay's
// stored idempotency key and request hash, or "".
func (s *Server) replay(w http.ResponseWriter, r *http.Request, req replayRequest, key, hash string) error {
	id := r.PathValue("id")
	var errs []problem.FieldError
	if req.TargetAgentVersion == "" {
		errs = append(errs, problem.FieldError{Field: "target_agent_version", Message: "is required: name@version, for example fraud-triage@2"})
	} else if _, _, err := replay.ParseTarget(req.TargetAgentVersion); err != nil {
		errs = append(errs, problem.As(err).Errors...)
	}
	if req.WorkflowID != "" && req.WorkflowID != id {
		errs = append(errs, problem.FieldError{Field: "workflow_id", Message: "must equal the workflow id in the path (" + id + "), or be left out"})
	}
	dryRun := req.DryRun == nil || *req.DryRun
	mode := replay.Mode{LLM: req.LLM, UnrecordedCalls: req.UnrecordedCalls}
	errs = append(errs, s.checkMode(mode, dryRun)...)
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	p := frontdoor.Principal(r)
	if !dryRun && !p.Has(auth.ScopeAgentsInvoke) {
		return &problem.Error{Code: problem.InsufficientScope, Scope: auth.ScopeAgentsInvoke,
			Detail: "a replay with dry_run false runs a real workflow, so it needs the scope agents:invoke too"}
	}
	info := frontdoor.InfoFrom(r.Context())
	// respond-async applies to real replays only: a dry run is quick and
	// answers as always (docs/replay.md).
	async := !dryRun && prefers(r.Header, preferAsync)
	status := http.StatusCreated
	if async {
		status = http.StatusAccepted
	}
	rec := s.record(r, status)
	rp, err := s.deps.Replays.Replay(r.Context(), replay.Request{
		Tenant: p.Tenant, WorkflowID: id, Target: req.TargetAgentVersion, DryRun: dryRun, Mode: mode, Faults: req.Faults,
		Caller:    callerOf(p),
		RequestID: info.RequestID, TraceID: info.TraceID, Async: async,
		Stored:         func(rp *replay.Replay) { info.Audited, info.WorkflowID = true, rp.WorkflowID },
		IdempotencyKey: key, RequestHash: hash, KeyTTL: s.cfg.IdempotencyTTL,
	}, rec)
	if err != nil {
		if info.Audited && r.Context().Err() != nil {
			return nil // the client went away; the stored replay goes on
		}
		return err
	}
	if rp.Repeat {
		// The replay an earlier request with the key made: this request
		// is audited as itself, saying so.
		info.WorkflowID = rp.WorkflowID
		info.Details = map[string]any{"idempotent_replayed": true, "replay_id": rp.ID}
		w.Header().Set("Idempotent-Replayed", "true")
		return s.answerReplay(w, r, rp, status)
	}
	info.Audited, info.WorkflowID = true, rp.WorkflowID
	return s.answerReplay(w, r, rp, status)
}

// answerReplay writes rp with status: 202 with respond-async applied, or
// 201.
func (s *Server) answerReplay(w http.ResponseWriter, r *http.Request, rp *replay.Replay, status int) error {
	loc := "/v1/replays/" + rp.ID
	if status == http.StatusAccepted {
		applyAsync(w, loc)
	} else {
		w.Header().Set("Location", loc)
	}
	return frontdoor.WriteJSON(w, status, s.replayView(frontdoor.Principal(r), rp))
}

func (s *Server) handleGetReplay(w http.ResponseWriter, r *http.Request) error {
	p := frontdoor.Principal(r)
	rp, err := s.deps.ReplayStore.Replay(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, s.replayView(p, rp))
}

func (s *Server) handleListReplays(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := replay.ListFilter{WorkflowID: q.Get("workflow_id"), Target: q.Get("target"), Before: q.Get("cursor")}
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		return err
	}
	f.Limit = limit
	p := frontdoor.Principal(r)
	rps, err := s.deps.ReplayStore.ListReplays(r.Context(), p.Tenant, f)
	if err != nil {
		return err
	}
	next := ""
	if len(rps) == f.Limit {
		next = rps[len(rps)-1].ID
	}
	return frontdoor.WriteJSON(w, http.StatusOK, s.replayPage(p, rps, next))
}

// replayList is a page of replays.
type replayList struct {
	Replays    []replayView `json:"replays"`
	NextCursor *string      `json:"next_cursor"`
}

// replayPage shows rps to p; next is the cursor of the next page, "" at the end.
func (s *Server) replayPage(p auth.Principal, rps []*replay.Replay, next string) replayList {
	list := replayList{Replays: make([]replayView, 0, len(rps))}
	for _, rp := range rps {
		list.Replays = append(list.Replays, s.replayView(p, rp))
	}
	if next != "" {
		list.NextCursor = &next
	}
	return list
}

// replayView hides the bodies of tools p may not use and signs a viewer
// link that shows the bodies of the tools p may use.
func (s *Server) replayView(p auth.Principal, rp *replay.Replay) replayView {
	shown := *rp
	shown.Steps = make([]replay.Entry, len(rp.Steps))
	hidden := false
	for i, e := range rp.Steps {
		e.Original, e.Replay = workflow.HideBodies(p, e.Original), workflow.HideBodies(p, e.Replay)
		hidden = hidden || e.Original != rp.Steps[i].Original || e.Replay != rp.Steps[i].Replay
		shown.Steps[i] = e
	}
	if hidden {
		// A judge's exchange quotes the steps' bodies.
		shown.Checks = make([]replay.CheckResult, len(rp.Checks))
		for i, c := range rp.Checks {
			if c.Judge != nil {
				j := *c.Judge
				j.Request, j.Response = nil, nil
				c.Judge = &j
			}
			shown.Checks[i] = c
		}
	}
	shown.OriginalCompletions, shown.Completions = replay.HideMessages(p, rp.OriginalCompletions), replay.HideMessages(p, rp.Completions)
	if shown.Status == "" {
		shown.Status = replay.StatusCompleted // made before replays had statuses
	}
	if shown.DryRun && shown.LLM == "" {
		shown.Mode = shown.Mode.WithDefaults() // stored before replays had modes
	}
	return viewReplay(&shown, s.deps.Viewer.ReplayURL(s.cfg.PublicURL, rp.ID, p.Tools()))
}

func viewReplay(rp *replay.Replay, viewerURL string) replayView {
	return replayView{Replay: rp, CreatedAt: rp.CreatedAt.UTC().Format(timeFormat), ViewerURL: viewerURL}
}

// checkMode refuses a what-if mode the request cannot have: values other
// than the documented ones, live completions on a server without models,
// and a mode on a replay that is not a dry run (which calls everything).
func (s *Server) checkMode(m replay.Mode, dryRun bool) []problem.FieldError {
	errs := m.Check()
	if len(errs) > 0 {
		return errs
	}
	if !dryRun && (m.LLM != "" || m.UnrecordedCalls != "") {
		field := "llm"
		if m.LLM == "" {
			field = "unrecorded_calls"
		}
		return []problem.FieldError{{Field: field, Message: "applies to dry runs only: a replay with dry_run false requests every completion and makes every call for real; leave it out"}}
	}
	if m.Live() && s.deps.Replays.Models == nil {
		return []problem.FieldError{{Field: "llm", Message: "live needs models, and this server has none configured: replay with llm recorded"}}
	}
	return nil
}

// handleReplayPage serves a replay's signed viewer page; admit has checked
// the link's signature and left the tools it shows in the request's info.
func (s *Server) handleReplayPage(w http.ResponseWriter, r *http.Request) error {
	info := frontdoor.InfoFrom(r.Context())
	rp, err := s.deps.ReplayStore.ReplayByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	info.Tenant, info.WorkflowID = rp.Tenant, rp.WorkflowID
	pg := web.ReplayPage{Replay: rp, Tools: info.SignedTools}
	if wf, err := s.deps.Workflows.Workflow(r.Context(), rp.Tenant, rp.WorkflowID); err == nil {
		pg.Agent, pg.Goal = wf.Agent, wf.Goal
	}
	pg.TargetURL = web.TargetURL(r.Context(), s.deps.Agents, rp.Tenant, rp.Target)
	web.PageHeaders(w.Header())
	return web.RenderReplay(w, pg)
}
