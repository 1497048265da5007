package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/idempotency"
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

func (s *Server) handleInvoke(w http.ResponseWriter, r *http.Request) error {
	var req invokeRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	p := principalOf(r)
	name, version, err := splitRef(r.PathValue("id"))
	if err != nil {
		return err
	}
	info := infoFrom(r.Context())
	info.resourceID = name
	// A stream is itself an answer that does not wait for the end, so it
	// wins over respond-async (docs/workflows.md).
	async := !wantsStream(r, req) && prefers(r.Header, preferAsync)
	var offered *workflow.RequestRecord
	switch {
	case async:
		// Answered at once with 202, the status the middleware records.
	case wantsStream(r, req):
		// Refused before the workflow starts: nothing runs unfollowed.
		release, err := s.streams.acquire(p.Tenant)
		if err != nil {
			return err
		}
		defer release()
	default:
		// A sync invoke answers 200 once its workflow has ended: its record
		// can be written with that end instead of in a transaction of its
		// own. Built from what is known now (the execution runs on another
		// goroutine), with the workflow's id.
		snap := *info
		offered = workflow.NewRequestRecord(func(workflowID string) *audit.Record {
			c := snap
			c.workflowID = workflowID
			return s.recordOf(r, &c, http.StatusOK)
		})
		info.offered = offered
	}
	wf, err := s.deps.Runner.Start(r.Context(), workflow.StartRequest{
		Tenant: p.Tenant, Agent: name, Version: version, Goal: req.Goal, Context: req.Context,
		Caller:       workflow.Caller{Sub: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes},
		MaxToolCalls: req.MaxToolCalls, MaxLLMTokens: req.MaxLLMTokens, RequestID: info.requestID, TraceID: info.traceID,
		Record: offered,
	})
	if err != nil {
		return err
	}
	info.workflowID = wf.ID
	if k := info.idemKey; k != nil {
		if err := s.deps.Store.SetIdempotentWorkflow(context.WithoutCancel(r.Context()), *k, wf.ID); err != nil {
			s.deps.Logger.Warn("link idempotency key to workflow", "workflow_id", wf.ID, "err", err)
		} else {
			info.idemLinked = true
		}
	}
	w.Header().Set("Workflow-Id", wf.ID)
	if async {
		v, err := s.workflowView(r, wf, nil, true)
		if err != nil {
			return err
		}
		applyAsync(w, "/v1/workflows/"+wf.ID)
		return writeJSON(w, http.StatusAccepted, v)
	}
	if wantsStream(r, req) {
		return s.stream(w, r, p.Tenant, wf.ID, 0)
	}
	return s.respondFinished(w, r, p.Tenant, wf.ID)
}

// attachInvoke answers a repeat of a still-running invoke by attaching to
// its workflow: a sync repeat waits for it, a stream follows it.
func (s *Server) attachInvoke(w http.ResponseWriter, r *http.Request, e idempotency.Entry, body []byte) error {
	var req invokeRequest
	_ = json.Unmarshal(body, &req)
	p := principalOf(r)
	infoFrom(r.Context()).workflowID = e.WorkflowID
	w.Header().Set("Workflow-Id", e.WorkflowID)
	w.Header().Set("Idempotent-Replayed", "true")
	if wantsStream(r, req) {
		release, err := s.streams.acquire(p.Tenant)
		if err != nil {
			return err
		}
		defer release()
		return s.stream(w, r, p.Tenant, e.WorkflowID, 0)
	}
	return s.respondFinished(w, r, p.Tenant, e.WorkflowID)
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
	return writeJSON(w, http.StatusOK, v)
}

// stream sends the workflow's events after afterID, live, ending with its
// complete event. A failure once the stream has begun is reported as a
// complete event with outcome failed and the problem in error.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, tenant, id string, afterID int) error {
	start := s.deps.Now()
	sse, ctx := s.startSSE(w, r)
	defer sse.close()
	last := afterID
	for ev, err := range s.deps.Runner.Follow(ctx, tenant, id, afterID) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // the client went away, or the server drains
			}
			info := infoFrom(r.Context())
			info.unfinished = true
			pe := problem.As(err)
			doc := pe.Doc(r.URL.Path, info.requestID, info.traceID)
			b, _ := json.Marshal(map[string]any{"event": "complete", "workflow_id": id, "outcome": workflow.OutcomeFailed,
				"status": workflow.Failed, "duration_ms": s.deps.Now().Sub(start).Milliseconds(), "error": doc})
			sse.send(last+1, b)
			return fmt.Errorf("stream of %s: %w", id, err)
		}
		if err := sse.send(ev.ID, ev.Data); err != nil {
			return nil // the client went away
		}
		last = ev.ID
	}
	return nil
}
