// Package gateway is the run gateway of external agents (SPEC §4 "External
// agents"): an OpenAI-compatible and an Anthropic-compatible model endpoint
// and an MCP server, each bound to one attempt of one run by the run's
// token. Every request is handed to the run's execution (workflow.GatewayRun),
// which governs, makes, records and journals it; this package speaks the
// wire formats.
package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Runs finds the attempt a run token was issued to (*workflow.Runner).
type Runs interface {
	Gateway(token string) (*workflow.GatewayRun, bool)
}

// Gateway serves the run gateway's routes.
type Gateway struct {
	runs   Runs
	mcp    *mcpServer
	logger *slog.Logger
	limit  Limit
}

// Limit admits a request that carries no valid run token, which is
// unauthenticated traffic: nil, or the refusal its handler returns (a
// rate limit's, which the front door writes).
type Limit func(w http.ResponseWriter, r *http.Request) error

// New returns the gateway of the runs runs finds; limit, when set, admits
// each request without a valid run token before it is answered 401.
func New(runs Runs, version string, logger *slog.Logger, limit Limit) *Gateway {
	if logger == nil {
		logger = slog.Default()
	}
	g := &Gateway{runs: runs, logger: logger, limit: limit}
	g.mcp = newMCP(g, version, logger)
	return g
}

// tokens are the run tokens a request may carry: Authorization's bearer
// token, and x-api-key (as Anthropic's SDKs send it). Both are tried: an
// SDK may send one from its environment beside the key it was given
// (Anthropic's sends ANTHROPIC_AUTH_TOKEN as a bearer token beside it).
func tokens(r *http.Request) []string {
	var out []string
	if tok, ok := auth.BearerToken(r); ok {
		out = append(out, tok)
	}
	if tok := strings.TrimSpace(r.Header.Get("X-Api-Key")); tok != "" {
		out = append(out, tok)
	}
	return out
}

// lookup finds the attempt of the run token r carries.
func (g *Gateway) lookup(r *http.Request) (*workflow.GatewayRun, bool) {
	for _, tok := range tokens(r) {
		if run, ok := g.runs.Gateway(tok); ok {
			return run, true
		}
	}
	return nil, false
}

// run authenticates a request by its run token and notes the run in the
// request's audit record. A request without a valid one is
// unauthenticated traffic: nil and the limit's refusal, which the handler
// returns, or nil and nil, when the handler answers 401.
func (g *Gateway) run(w http.ResponseWriter, r *http.Request) (*workflow.GatewayRun, error) {
	run, ok := g.lookup(r)
	if !ok {
		if g.limit == nil {
			return nil, nil
		}
		return nil, g.limit(w, r)
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Tenant, info.WorkflowID, info.ResourceID = run.Tenant(), run.WorkflowID(), run.WorkflowID()
	info.AddDetail("attempt", run.Attempt())
	return run, nil
}

// Endpoints are what the gateway serves, as a request to another path is
// told.
const Endpoints = "POST …/openai/v1/chat/completions, POST …/openai/v1/responses, GET …/openai/v1/models, " +
	"POST …/anthropic/v1/messages and POST …/mcp"

// Problem writes a refusal of the front door's (a rate limit) to a request
// to the gateway in the shape of the provider its path is (a
// frontdoor.Info.ProblemPage).
func Problem(w http.ResponseWriter, r *http.Request, pe *problem.Error, status int) {
	if pe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(frontdoor.CeilSeconds(pe.RetryAfter.Seconds())))
	}
	api := llm.ChatCompletions
	if strings.Contains(r.URL.Path, "/anthropic/") {
		api = llm.Messages
	}
	writeError(w, api, status, pe.Detail, string(pe.Code))
}

// unauthenticated is the words of a request without a valid run token.
const unauthenticated = "no valid run token: send the token agentplane gave this run (gateway.token) as the API key, " +
	"Authorization: Bearer <token> or x-api-key; it is valid while the run's attempt lasts"

// ChatCompletions serves POST …/openai/v1/chat/completions.
func (g *Gateway) ChatCompletions(w http.ResponseWriter, r *http.Request) error {
	return g.complete(w, r, llm.ChatCompletions)
}

// Responses serves POST …/openai/v1/responses.
func (g *Gateway) Responses(w http.ResponseWriter, r *http.Request) error {
	return g.complete(w, r, llm.Responses)
}

// Messages serves POST …/anthropic/v1/messages.
func (g *Gateway) Messages(w http.ResponseWriter, r *http.Request) error {
	return g.complete(w, r, llm.Messages)
}

// Models serves GET …/openai/v1/models: the models the run may name.
func (g *Gateway) Models(w http.ResponseWriter, r *http.Request) error {
	run, err := g.run(w, r)
	if run == nil {
		if err == nil {
			writeError(w, llm.ChatCompletions, http.StatusUnauthorized, unauthenticated, "invalid_api_key")
		}
		return err
	}
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for _, m := range run.Models() {
		list.Data = append(list.Data, entry{ID: m, Object: "model", OwnedBy: "agentplane"})
	}
	frontdoor.WriteJSON(w, http.StatusOK, list)
	return nil
}

// complete relays a model request through the run.
func (g *Gateway) complete(w http.ResponseWriter, r *http.Request, api string) error {
	run, err := g.run(w, r)
	if run == nil {
		if err == nil {
			writeError(w, api, http.StatusUnauthorized, unauthenticated, "invalid_api_key")
		}
		return err
	}
	body, err := frontdoor.ReadBody(r)
	if err != nil {
		pe := problem.As(err) // too large (413) or cut off (400)
		writeError(w, api, problem.Status(pe.Code), pe.Detail, workflow.GatewayInvalidRequest)
		return nil
	}
	stream := &relayStream{w: w, rc: http.NewResponseController(w)}
	resp, err := run.Complete(r.Context(), api, body, passHeaders(r.Header), stream.send)
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the agent went: no one reads an answer
		}
		status, message, code := http.StatusServiceUnavailable, "the request was not answered: "+err.Error(), workflow.GatewayUnavailable
		if ge, ok := err.(*workflow.GatewayError); ok {
			status, message, code = ge.Status, ge.Message, ge.Code
		}
		if stream.started {
			// The answer was cut short: the stream ends with an error
			// event, as a provider's own failing stream does, so that the
			// agent's SDK fails it rather than take what came for the
			// whole answer.
			_ = stream.send(streamError(api, status, message, code))
			return nil
		}
		writeError(w, api, status, message, code)
		return nil
	}
	if stream.started {
		return nil
	}
	if len(resp.Events) > 0 {
		// A journal's stream, all at once.
		for _, ev := range resp.Events {
			_ = stream.send(ev)
		}
		return nil
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
	return nil
}

// passHeaders are the request headers a provider reads besides the body.
func passHeaders(h http.Header) http.Header {
	out := http.Header{}
	for _, k := range []string{"Anthropic-Version", "Anthropic-Beta", "Openai-Beta"} {
		if v := h.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// relayStream writes a streamed answer's events to the agent as they come.
type relayStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (s *relayStream) send(event []byte) error {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if _, err := s.w.Write(event); err != nil {
		return err
	}
	if _, err := s.w.Write([]byte("\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}

// streamError is the event that ends a stream cut short: an error event
// whose data is the error in the shape of api (OpenAI's SDKs fail a stream
// at an event whose data has an "error" member, Anthropic's at an event
// named error).
func streamError(api string, status int, message, code string) []byte {
	return append([]byte("event: error\ndata: "), llm.ErrorBody(api, status, message, code)...)
}

// writeError writes a refusal in the shape the provider's SDKs parse.
func writeError(w http.ResponseWriter, api string, status int, message, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b := llm.ErrorBody(api, status, message, code)
	if len(b) == 0 {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": message, "code": code}})
	}
	_, _ = w.Write(b)
}
