package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// invokeRequest is the body of POST /v1/agents/{id}/invoke.
type invokeRequest struct {
	Goal           string         `json:"goal"`
	Context        map[string]any `json:"context,omitempty"`
	Stream         *bool          `json:"stream,omitempty"`
	MaxToolCalls   *int           `json:"max_tool_calls,omitempty"`
	MaxLLMTokens   *int64         `json:"max_llm_tokens,omitempty"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
}

// wantsStream reports whether an invoke is answered with events: as its
// stream field says when given, else as its Accept header asks.
func wantsStream(r *http.Request, req invokeRequest) bool {
	if req.Stream != nil {
		return *req.Stream
	}
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// handleInvoke starts a workflow, or, for a repeat of an invoke with the
// same idempotency key, attaches to the workflow the first one created: the
// key is stored with the workflow, so a repeat finds it whatever became of
// the first request's connection (SPEC §4 "Asynchronous invocations").
func (s *Server) handleInvoke(w http.ResponseWriter, r *http.Request) error {
	if err := frontdoor.RequireJSON(r); err != nil {
		return err
	}
	body, err := frontdoor.ReadBody(r)
	if err != nil {
		return err
	}
	key, err := invokeKey(r, body)
	if err != nil {
		return err
	}
	p := frontdoor.Principal(r)
	info := frontdoor.InfoFrom(r.Context())
	hash := fingerprint(body)
	if key != "" {
		wf, err := s.keyedWorkflow(r, key, s.cfg.InvokeIdempotencyTTL)
		if err != nil {
			return err
		}
		if wf != nil {
			return s.attachInvoke(w, r, body, hash, wf)
		}
	}
	var req invokeRequest
	if err := jsonbody.Decode(body, &req); err != nil {
		return err
	}
	name, version, err := splitRef(r.PathValue("id"))
	if err != nil {
		return err
	}
	info.ResourceID = name
	// A stream is itself an answer that does not wait for the end, so it
	// wins over respond-async (docs/workflows.md).
	stream := wantsStream(r, req)
	async := !stream && prefers(r.Header, preferAsync)
	release := func() {}
	if stream {
		// Refused before the workflow starts: nothing runs unfollowed.
		if release, err = s.streams.acquire(p.Tenant); err != nil {
			return err
		}
		release = sync.OnceFunc(release)
		defer release()
	}
	start := startRequest(r, name, version, req, key, hash)
	if async {
		// The answer is 202 whatever follows the creation, so the
		// request's record is written in the transaction that creates the
		// workflow.
		snap := *info
		start.Created = func(wf *workflow.Workflow) *audit.Record {
			c := snap
			c.WorkflowID = wf.ID
			return s.recordOf(r, &c, http.StatusAccepted)
		}
	}
	wf, taken, err := s.startInvoke(r, start)
	if err != nil {
		return err
	}
	if taken {
		// A repeat that came while the first was being created: it
		// attaches as any repeat does, its stream counted there.
		release()
		return s.attachInvoke(w, r, body, hash, wf)
	}
	info.WorkflowID = wf.ID
	w.Header().Set("Workflow-Id", wf.ID)
	switch {
	case async:
		info.Audited = true
		return s.respondAccepted(w, r, wf)
	case stream:
		return s.stream(w, r, p.Tenant, wf.ID, 0)
	}
	return s.respondFinished(w, r, p.Tenant, wf.ID)
}

// startRequest is the start of the workflow of an invocation of the agent
// name@version by r's caller, keyed by key and hash when key is not "".
func startRequest(r *http.Request, name, version string, req invokeRequest, key, hash string) workflow.StartRequest {
	p := frontdoor.Principal(r)
	info := frontdoor.InfoFrom(r.Context())
	return workflow.StartRequest{
		Tenant: p.Tenant, Agent: name, Version: version, Goal: req.Goal, Context: req.Context,
		Caller:       workflow.Caller{Sub: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes},
		MaxToolCalls: req.MaxToolCalls, MaxLLMTokens: req.MaxLLMTokens, RequestID: info.RequestID, TraceID: info.TraceID,
		IdempotencyKey: key, RequestHash: hash,
	}
}

// startInvoke starts the workflow of an invocation. One that loses the race
// for its idempotency key to a request with the same key gets that
// request's workflow instead, with taken set.
func (s *Server) startInvoke(r *http.Request, start workflow.StartRequest) (wf *workflow.Workflow, taken bool, err error) {
	wf, err = s.deps.Runner.Start(r.Context(), start)
	if errors.Is(err, workflow.ErrKeyTaken) {
		wf, err = s.deps.Workflows.WorkflowByKey(r.Context(), start.Tenant, start.IdempotencyKey)
		return wf, err == nil, err
	}
	return wf, false, err
}

// keyedWorkflow returns the workflow of the caller's tenant created with
// the stored idempotency key key, nil if none was or if it started longer
// than ttl ago (its key is then taken off it, for a new workflow to take).
func (s *Server) keyedWorkflow(r *http.Request, key string, ttl time.Duration) (*workflow.Workflow, error) {
	tenant := frontdoor.Principal(r).Tenant
	wf, err := s.deps.Workflows.WorkflowByKey(r.Context(), tenant, key)
	if problem.Is(err, problem.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if expiry := s.deps.Now().Add(-ttl); wf.StartedAt.Before(expiry) {
		return nil, s.deps.Workflows.ExpireKey(r.Context(), tenant, key, expiry)
	}
	return wf, nil
}

// invokeKey is the stored form of an invoke's idempotency key (header or
// body field), "" when it has none.
func invokeKey(r *http.Request, body []byte) (string, error) {
	key, err := bodyIdempotencyKey(r.Header.Get("Idempotency-Key"), body)
	if err != nil || key == "" {
		return "", err
	}
	if len(key) > maxIdempotencyKey {
		return "", problem.Field("Idempotency-Key", "must be at most %d characters", maxIdempotencyKey)
	}
	return workflow.IdempotencyKey(frontdoor.Principal(r).ID(), r.URL.Path, key), nil
}

// attachInvoke answers a repeat of an invoke with the workflow the first
// one created: at once with respond-async, by its events with a stream,
// else once it has ended. A repeat with another body is refused.
func (s *Server) attachInvoke(w http.ResponseWriter, r *http.Request, body []byte, hash string, wf *workflow.Workflow) error {
	if wf.RequestHash != hash {
		return problem.New(problem.IdempotencyKeyReused,
			"this Idempotency-Key was used with a different request; use a new key for a new request")
	}
	var req invokeRequest
	_ = json.Unmarshal(body, &req) // it decoded when the workflow was created
	p := frontdoor.Principal(r)
	info := frontdoor.InfoFrom(r.Context())
	info.ResourceID, info.WorkflowID = wf.Agent, wf.ID
	info.Details = map[string]any{"idempotent_replayed": true}
	w.Header().Set("Workflow-Id", wf.ID)
	w.Header().Set("Idempotent-Replayed", "true")
	switch {
	case wantsStream(r, req):
		release, err := s.streams.acquire(p.Tenant)
		if err != nil {
			return err
		}
		defer release()
		return s.stream(w, r, p.Tenant, wf.ID, 0)
	case prefers(r.Header, preferAsync):
		return s.respondAccepted(w, r, wf)
	}
	return s.respondFinished(w, r, p.Tenant, wf.ID)
}

// respondAccepted answers 202 with the workflow as it is.
func (s *Server) respondAccepted(w http.ResponseWriter, r *http.Request, wf *workflow.Workflow) error {
	v, err := s.workflowView(r, wf, nil, true)
	if err != nil {
		// Still 202, as the record written with the workflow says: the
		// view lacks only the usage a later GET shows.
		s.deps.Logger.Warn("workflow usage not read", "workflow_id", wf.ID, "err", err)
	}
	applyAsync(w, "/v1/workflows/"+wf.ID)
	return frontdoor.WriteJSON(w, http.StatusAccepted, v)
}

// respondFinished waits for the workflow and answers with it.
func (s *Server) respondFinished(w http.ResponseWriter, r *http.Request, tenant, id string) error {
	wf, steps, err := s.deps.Runner.Finished(r.Context(), tenant, id)
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client went away; the workflow goes on
		}
		return err
	}
	v, err := s.workflowView(r, wf, steps, false)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, v)
}

// stream sends the workflow's events after afterID, live, ending with its
// complete event. A failure once the stream has begun is reported as a
// complete event with outcome failed and the problem in error.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, tenant, id string, afterID int) error {
	start := s.deps.Now()
	sse, ctx := frontdoor.StartSSE(w, r, s.draining)
	defer sse.Close()
	last := afterID
	for ev, err := range s.deps.Runner.Follow(ctx, tenant, id, afterID) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // the client went away, or the server drains
			}
			info := frontdoor.InfoFrom(r.Context())
			pe := problem.As(err)
			doc := pe.Doc(r.URL.Path, info.RequestID, info.TraceID)
			b, _ := json.Marshal(map[string]any{"event": "complete", "workflow_id": id, "outcome": workflow.OutcomeFailed,
				"status": workflow.Failed, "duration_ms": s.deps.Now().Sub(start).Milliseconds(), "error": doc})
			sse.Send(last+1, b)
			return fmt.Errorf("stream of %s: %w", id, err)
		}
		if err := sse.Send(ev.ID, ev.Data); err != nil {
			return nil // the client went away
		}
		last = ev.ID
	}
	return nil
}
