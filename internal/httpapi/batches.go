package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/web"
)

// batchRequest is the body of POST /v1/replay-batches.
type batchRequest struct {
	TargetAgentVersion string          `json:"target_agent_version"`
	Workflows          *batchSelection `json:"workflows,omitempty"`
	WorkflowIDs        []string        `json:"workflow_ids,omitempty"`
	// Dataset is name[@version], instead of a filter or ids.
	Dataset string             `json:"dataset,omitempty"`
	Checks  []replay.CheckSpec `json:"checks,omitempty"`
	Judge   *replay.JudgeSpec  `json:"judge,omitempty"`
	Gate    map[string]float64 `json:"gate,omitempty"`
	// LLM, UnrecordedCalls and Concurrency say how the replays run.
	LLM             string `json:"llm,omitempty"`
	UnrecordedCalls string `json:"unrecorded_calls,omitempty"`
	Concurrency     int    `json:"concurrency,omitempty"`
	// Faults are injected into every replay of the batch.
	Faults []fault.Fault `json:"faults,omitempty"`
}

type batchSelection struct {
	Agent        string `json:"agent,omitempty"`
	AgentVersion string `json:"agent_version,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	Since        string `json:"since,omitempty"`
	Until        string `json:"until,omitempty"`
	Limit        int    `json:"limit,omitempty"`
}

// batchView is a batch as the API shows it.
type batchView struct {
	*replay.Batch
	CreatedAt  string  `json:"created_at"`
	FinishedAt *string `json:"finished_at"`
	ViewerURL  string  `json:"viewer_url"`
	// Faults are those the batch injects (kept with its checks).
	Faults []fault.Fault `json:"faults,omitempty"`
}

// batchView shows b to p with a report link signed for p's tools.
func (s *Server) batchView(p auth.Principal, b *replay.Batch) batchView {
	v := viewBatch(b)
	v.ViewerURL = s.deps.Viewer.BatchURL(s.cfg.PublicURL, b.ID, p.Tools())
	return v
}

func viewBatch(b *replay.Batch) batchView {
	v := batchView{Batch: b, CreatedAt: b.CreatedAt.UTC().Format(timeFormat), Faults: b.Spec.Faults}
	if b.FinishedAt != nil {
		f := b.FinishedAt.UTC().Format(timeFormat)
		v.FinishedAt = &f
	}
	return v
}

// selection checks the body's choice of workflows: a dataset (when the
// request may name one), a filter or ids.
func (req *batchRequest) selection() (replay.Selection, []problem.FieldError) {
	if req.Dataset != "" {
		if req.Workflows != nil || len(req.WorkflowIDs) > 0 {
			return replay.Selection{}, []problem.FieldError{{Field: "dataset", Message: "give a dataset, workflows (a filter) or workflow_ids, only one"}}
		}
		if _, _, err := replay.ParseDatasetRef("dataset", req.Dataset); err != nil {
			return replay.Selection{}, problem.As(err).Errors
		}
		return replay.Selection{}, nil
	}
	return selectionOf(req.Workflows, req.WorkflowIDs, true)
}

// selectionOf checks a choice of workflows by filter or ids; a batch may
// name a dataset instead.
func selectionOf(filter *batchSelection, workflowIDs []string, batch bool) (replay.Selection, []problem.FieldError) {
	var errs []problem.FieldError
	add := func(field, msg string) { errs = append(errs, problem.FieldError{Field: field, Message: msg}) }
	var sel replay.Selection
	switch {
	case filter != nil && len(workflowIDs) > 0:
		add("workflow_ids", "give workflows (a filter) or workflow_ids, not both")
	case len(workflowIDs) > 0:
		if len(workflowIDs) > replay.MaxBatch {
			add("workflow_ids", "lists "+strconv.Itoa(len(workflowIDs))+" workflows, over the limit of "+strconv.Itoa(replay.MaxBatch))
		}
		sel.IDs = workflowIDs
	case filter != nil:
		w := filter
		sel = replay.Selection{Agent: w.Agent, AgentVersion: w.AgentVersion, Outcome: w.Outcome, Limit: w.Limit}
		if w.Limit < 0 || w.Limit > replay.MaxBatch {
			add("workflows.limit", "must be from 1 to "+strconv.Itoa(replay.MaxBatch)+" (default 1000)")
		}
		for _, t := range []struct {
			name, v string
			out     *time.Time
		}{{"workflows.since", w.Since, &sel.Since}, {"workflows.until", w.Until, &sel.Until}} {
			if t.v == "" {
				continue
			}
			tm, err := time.Parse(time.RFC3339Nano, t.v)
			if err != nil {
				add(t.name, "must be an RFC 3339 time, for example 2026-11-17T00:00:00Z")
			}
			*t.out = tm
		}
	case batch:
		add("workflows", "is required: a filter ({agent, agent_version, outcome, since, until, limit}), workflow_ids or a dataset (name[@version])")
	default:
		add("workflows", "is required: a filter ({agent, agent_version, outcome, since, until, limit}) or workflow_ids")
	}
	return sel, errs
}

func (s *Server) handleCreateBatch(w http.ResponseWriter, r *http.Request) error {
	var req batchRequest
	if err := frontdoor.DecodeJSON(r, &req); err != nil {
		return err
	}
	var errs []problem.FieldError
	name, version, err := replay.ParseTarget(req.TargetAgentVersion)
	if req.TargetAgentVersion == "" {
		errs = append(errs, problem.FieldError{Field: "target_agent_version", Message: "is required: name@version, for example fraud-triage@2"})
	} else if err != nil {
		errs = append(errs, problem.As(err).Errors...)
	}
	sel, selErrs := req.selection()
	mode := replay.Mode{LLM: req.LLM, UnrecordedCalls: req.UnrecordedCalls}
	errs = append(append(errs, s.checkMode(mode, true)...), replay.CheckConcurrency(req.Concurrency)...)
	errs = append(errs, selErrs...)
	spec := replay.Spec{Checks: req.Checks, Judge: req.Judge, Gate: req.Gate, Faults: req.Faults}
	if _, err := replay.CompileChecks(spec, s.deps.Replays.Judge); err != nil {
		p := problem.As(err)
		if p == nil {
			return err
		}
		errs = append(errs, p.Errors...)
	}
	p := frontdoor.Principal(r)
	if err := s.deps.Replays.CheckFaults(r.Context(), p.Tenant, req.Faults); err != nil {
		pe := problem.As(err)
		if pe.Code != problem.ValidationFailed {
			return err
		}
		errs = append(errs, pe.Errors...)
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	if mc, ok := s.deps.Replays.Judge.(replay.ModelChecker); ok && req.Judge != nil {
		if err := mc.CheckModel(r.Context(), p.Tenant, req.Judge.Model); problem.Is(err, problem.NotFound) {
			return problem.Field("judge.model", "no model %s in this tenant: register it (POST /v1/models) or name another", req.Judge.Model)
		} else if err != nil {
			return err
		}
	}
	v, err := s.deps.Agents.AgentVersion(r.Context(), p.Tenant, name, version)
	if problem.Is(err, problem.NotFound) {
		return problem.New(problem.AgentVersionNotFound, "no agent version %s: deploy it first (POST /v1/agents)", req.TargetAgentVersion)
	}
	if err != nil {
		return err
	}
	if err := v.CheckLive(); err != nil {
		return err
	}
	var (
		wfs []string
		ds  *replay.Dataset
	)
	if req.Dataset != "" {
		name, version, _ := replay.ParseDatasetRef("dataset", req.Dataset)
		if ds, err = s.deps.Datasets.Dataset(r.Context(), p.Tenant, name, version); problem.Is(err, problem.NotFound) {
			return problem.Field("dataset", "%s", problem.As(err).Detail)
		} else if err != nil {
			return err
		}
		wfs = ds.WorkflowIDs
	} else if wfs, err = s.deps.Replays.Select(r.Context(), p.Tenant, sel); err != nil {
		return err
	}
	now := s.deps.Now().UTC()
	b := replay.NewBatch(p.Tenant, v.Ref(), len(wfs), replay.Creator{Sub: p.Subject, ClientID: p.ClientID, Scopes: p.Scopes}, now)
	b.Spec = spec
	if ds != nil {
		b.Dataset, b.Expectations = ds.Ref(), ds.Expectations
	}
	b.CountChecks(nil)
	b.Mode, b.Concurrency = mode.WithDefaults(), req.Concurrency
	rec := s.record(r, http.StatusAccepted)
	rec.Resource = audit.Resource{Type: "replay_batch", ID: b.ID}
	rec.Details = audit.Details(map[string]any{"target_agent_version": b.Target, "total": b.Total,
		"dataset": b.Dataset, "checks": b.Spec.Names(), "llm": b.LLM, "unrecorded_calls": b.UnrecordedCalls,
		"faults": len(b.Spec.Faults)})
	if err := s.deps.BatchStore.CreateBatch(r.Context(), b, wfs, s.deps.Batches.Owner, s.deps.Batches.LeaseUntil(now), rec); err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, b.ID
	s.deps.Batches.Wake()
	w.Header().Set("Location", "/v1/replay-batches/"+b.ID)
	return frontdoor.WriteJSON(w, http.StatusAccepted, s.batchView(p, b))
}

func (s *Server) handleGetBatch(w http.ResponseWriter, r *http.Request) error {
	p := frontdoor.Principal(r)
	b, err := s.deps.BatchStore.Batch(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, s.batchView(p, b))
}

// batchSummary is a batch as GET /v1/replay-batches lists it: its counts,
// not its outcome matrix (GET /v1/replay-batches/{id} has that).
type batchSummary struct {
	ID         string  `json:"id"`
	Target     string  `json:"target_agent_version"`
	Status     string  `json:"status"`
	Error      string  `json:"error,omitempty"`
	Total      int     `json:"total"`
	Done       int     `json:"done"`
	Changed    int     `json:"changed"`
	Dataset    string  `json:"dataset,omitempty"`
	CreatedAt  string  `json:"created_at"`
	FinishedAt *string `json:"finished_at"`
	ViewerURL  string  `json:"viewer_url"`
}

func (s *Server) handleListBatches(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := replay.BatchListFilter{Target: q.Get("target"), Before: q.Get("cursor")}
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		return err
	}
	f.Limit = limit
	p := frontdoor.Principal(r)
	bs, err := s.deps.BatchStore.ListBatches(r.Context(), p.Tenant, f)
	if err != nil {
		return err
	}
	list := struct {
		Batches    []batchSummary `json:"batches"`
		NextCursor *string        `json:"next_cursor"`
	}{Batches: make([]batchSummary, 0, len(bs))}
	for _, b := range bs {
		v := s.batchView(p, b)
		list.Batches = append(list.Batches, batchSummary{ID: b.ID, Target: b.Target, Status: b.Status, Error: b.Error,
			Total: b.Total, Done: b.Done, Changed: b.Changed, Dataset: b.Dataset, CreatedAt: v.CreatedAt, FinishedAt: v.FinishedAt, ViewerURL: v.ViewerURL})
	}
	if len(bs) == f.Limit {
		list.NextCursor = &bs[len(bs)-1].ID
	}
	return frontdoor.WriteJSON(w, http.StatusOK, list)
}

func (s *Server) handleBatchReplays(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var errs []problem.FieldError
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		errs = append(errs, problem.As(err).Errors...)
	}
	offset := 0
	if c := q.Get("cursor"); c != "" {
		if offset, err = strconv.Atoi(c); err != nil || offset < 0 {
			errs = append(errs, problem.FieldError{Field: "cursor", Message: "is not a cursor of this list: pass next_cursor as it was returned"})
		}
	}
	changed, failed := false, false
	for _, f := range []struct {
		name string
		v    *bool
	}{{"changed", &changed}, {"failed", &failed}} {
		switch q.Get(f.name) {
		case "", "false":
		case "true":
			*f.v = true
		default:
			errs = append(errs, problem.FieldError{Field: f.name, Message: "must be true or false"})
		}
	}
	if changed && failed {
		errs = append(errs, problem.FieldError{Field: "failed", Message: "give changed=true or failed=true, not both"})
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	p := frontdoor.Principal(r)
	b, err := s.deps.BatchStore.Batch(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	var rps []*replay.Replay
	if failed {
		rps, err = s.deps.BatchStore.FailedCheckReplays(r.Context(), b.ID, offset, limit)
	} else {
		rps, err = s.deps.BatchStore.BatchReplays(r.Context(), b.ID, changed, offset, limit)
	}
	if err != nil {
		return err
	}
	next := ""
	if len(rps) == limit {
		next = strconv.Itoa(offset + limit)
	}
	return frontdoor.WriteJSON(w, http.StatusOK, s.replayPage(p, rps, next))
}

func (s *Server) handleCancelBatch(w http.ResponseWriter, r *http.Request) error {
	p := frontdoor.Principal(r)
	b, err := s.deps.BatchStore.Batch(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	ok, err := s.deps.BatchStore.FinishBatch(r.Context(), b.ID, replay.BatchCancelled, "", s.deps.Now().UTC())
	if err != nil {
		return err
	}
	if !ok {
		return problem.New(problem.Conflict, "replay batch %s is %s already", b.ID, b.Status)
	}
	s.deps.Batches.Changed(b.ID)
	if b, err = s.deps.BatchStore.Batch(r.Context(), p.Tenant, b.ID); err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, s.batchView(p, b))
}

// batchEvent is one event of a batch's stream: progress {done, total,
// changed} while it runs, then complete with the whole batch.
type batchEvent struct {
	Event   string     `json:"event"`
	Done    int        `json:"done"`
	Total   int        `json:"total"`
	Changed int        `json:"changed"`
	Batch   *batchView `json:"batch,omitempty"`
}

// handleBatchEvents streams a batch's progress. Each progress event's id is
// the number of workflows replayed so far and the complete event's is one
// more, so a client that reconnects with Last-Event-ID gets only news. The
// stream takes one of the tenant's stream slots, as every event stream does.
func (s *Server) handleBatchEvents(w http.ResponseWriter, r *http.Request) error {
	p, id := frontdoor.Principal(r), r.PathValue("id")
	pr, err := s.deps.BatchStore.BatchProgress(r.Context(), p.Tenant, id)
	if err != nil {
		return err
	}
	last := -1
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return problem.Field("Last-Event-ID", "must be an event id this stream sent")
		}
		last = n
	}
	if !pr.Running() && last > pr.Done {
		// Complete was sent already: nothing more will come.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	release, err := s.streams.acquire(p.Tenant)
	if err != nil {
		return err
	}
	defer release()
	sse, ctx := frontdoor.StartSSE(w, r, s.draining)
	defer sse.Close()
	for pr, err := range s.deps.Batches.Follow(ctx, p.Tenant, id) {
		if err != nil {
			return fmt.Errorf("follow replay batch %s: %w", id, err)
		}
		if pr.Running() {
			if pr.Done > last {
				ev, _ := json.Marshal(batchEvent{Event: "progress", Done: pr.Done, Total: pr.Total, Changed: pr.Changed})
				if sse.Send(pr.Done, ev) != nil {
					return nil // the client went away
				}
				last = pr.Done
			}
			continue
		}
		// Ended: the whole batch, once, for the last progress and complete.
		b, err := s.deps.Batches.Ended(ctx, p.Tenant, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow replay batch %s: %w", id, err)
		}
		if b.Done > last {
			ev, _ := json.Marshal(batchEvent{Event: "progress", Done: b.Done, Total: b.Total, Changed: b.Changed})
			if sse.Send(b.Done, ev) != nil {
				return nil
			}
		}
		v := s.batchView(p, b)
		ev, _ := json.Marshal(batchEvent{Event: "complete", Done: b.Done, Total: b.Total, Changed: b.Changed, Batch: &v})
		sse.Send(b.Done+1, ev)
	}
	return nil
}

// handleBatchPage serves a batch's signed report page; admit has checked
// the link and left the tools its replay links may show in the request's info.
func (s *Server) handleBatchPage(w http.ResponseWriter, r *http.Request) error {
	info := frontdoor.InfoFrom(r.Context())
	b, err := s.deps.BatchStore.BatchByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	info.Tenant = b.Tenant
	changed, err := s.deps.BatchStore.BatchReplays(r.Context(), b.ID, true, 0, web.MaxBatchRows)
	if err != nil {
		return err
	}
	var failed []*replay.Replay
	if !b.Spec.Empty() {
		if failed, err = s.deps.BatchStore.FailedCheckReplays(r.Context(), b.ID, 0, web.MaxBatchRows); err != nil {
			return err
		}
	}
	tools := []string(info.SignedTools)
	web.PageHeaders(w.Header())
	return web.RenderBatch(w, web.BatchPage{Batch: b, Changed: changed, Failed: failed,
		TargetURL: web.TargetURL(r.Context(), s.deps.Agents, b.Tenant, b.Target), Link: func(id string) string {
			return s.deps.Viewer.ReplayURL("", id, tools)
		}})
}
