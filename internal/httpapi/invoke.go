package httpapi

import (
	"encoding/json"
	"fmt"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"net/http"
	"strings"
	"sync"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// invokeRequest is the body of POST /v1/agents/{id}/invoke.
type invokeRequest struct {
	Goal         string         `json:"goal"`
	Context      map[string]any `json:"context,omitempty"`
	Stream       *bool          `json:"stream,omitempty"`
	MaxToolCalls *int           `json:"max_tool_calls,omitempty"`
	MaxLLMTokens *int64         `json:"max_llm_tokens,omitempty"`
	OnExhausted  string         `json:"on_exhausted,omitempty"`
	// IdempotencyKey is a pointer so that an empty key sent beside the
	// header is told apart from no key (they must then agree).
	IdempotencyKey *string `json:"idempotency_key,omitempty"`
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
	// Decoded once: a repeat's body is the first's (the fingerprint
	// says so), so it decodes as the first one did.
	var req invokeRequest
	if err := jsonbody.Decode(body, &req); err != nil {
		return err
	}
	key, err := invokeKey(r, req.IdempotencyKey)
	if err != nil {
		return err
	}
	p := frontdoor.Principal(r)
	info := frontdoor.InfoFrom(r.Context())
	hash := workflow.Fingerprint(body)
	if key != "" {
		wf, err := s.invoker.Find(r.Context(), p.Tenant, key, hash, s.cfg.InvokeIdempotencyTTL)
		if err != nil {
			return err
		}
		if wf != nil {
			return s.attachInvoke(w, r, req, wf)
		}
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
	start := invocation(r, name, version, req, key, hash)
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
	started, err := s.invoker.Start(r.Context(), start)
	if err != nil {
		return err
	}
	wf := started.Workflow
	if started.Repeat {
		// A repeat that came while the first was being created: it
		// attaches as any repeat does, its stream counted there.
		release()
		return s.attachInvoke(w, r, req, wf)
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

// invocation is an invocation of the agent name@version by r's caller,
// keyed by key and hash when key is not "".
func invocation(r *http.Request, name, version string, req invokeRequest, key, hash string) workflow.Invocation {
	info := frontdoor.InfoFrom(r.Context())
	return workflow.Invocation{StartRequest: workflow.StartRequest{
		Agent: name, Version: version, Goal: req.Goal, Context: req.Context, Caller: callerOf(frontdoor.Principal(r)),
		MaxToolCalls: req.MaxToolCalls, MaxLLMTokens: req.MaxLLMTokens, OnExhausted: req.OnExhausted, RequestID: info.RequestID, TraceID: info.TraceID,
		IdempotencyKey: key, RequestHash: hash,
	}}
}

// callerOf is the principal as the caller of the workflows it starts.
func callerOf(p auth.Principal) workflow.Caller {
	return workflow.Caller{Sub: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes}
}

// invokeKey is the stored form of an invoke's idempotency key (header or
// body field), "" when it has none.
func invokeKey(r *http.Request, field *string) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if field != nil {
		if key != "" && *field != key {
			return "", problem.Field("idempotency_key", "differs from the Idempotency-Key header; send one or make them equal")
		}
		key = *field
	}
	if key == "" {
		return "", nil
	}
	if len(key) > maxIdempotencyKey {
		return "", problem.Field("Idempotency-Key", "must be at most %d characters", maxIdempotencyKey)
	}
	return workflow.IdempotencyKey(frontdoor.Principal(r).ID(), r.URL.Path, key), nil
}

// attachInvoke answers a repeat of an invoke with the workflow the first
// one created: at once with respond-async, by its events with a stream,
// else once it has ended.
func (s *Server) attachInvoke(w http.ResponseWriter, r *http.Request, req invokeRequest, wf *workflow.Workflow) error {
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
	v, err := s.workflowView(r, wf, nil, true, true)
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
	v, err := s.workflowView(r, wf, steps, false, false)
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
