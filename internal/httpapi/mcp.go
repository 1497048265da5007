package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// The tenant's MCP server (SPEC §4 MCP): POST /mcp, stateless Streamable
// HTTP. Every request builds a server of the caller's tenant holding
// search_operations, call_operation and one agent_<name> tool per deployed
// agent; the route's middleware has already authenticated, rate limited and
// audited the request.

const (
	mcpSearchTool = "search_operations"
	mcpCallTool   = "call_operation"
	mcpAgentTool  = "agent_"
	// mcpMaxAgents bounds the agents one tools/list shows.
	mcpMaxAgents = 1000
	// mcpSearchLimit is search_operations' default limit.
	mcpSearchLimit = 10
)

var mcpTracer = otel.Tracer("github.com/agentplane/agentplane/internal/httpapi/mcp")

// newMCPHandler is the SDK's Streamable HTTP handler, stateless: any
// replica answers any request, and nothing is kept between requests.
func (s *Server) newMCPHandler() http.Handler {
	s.mcpStatic = s.newMCPServer()
	return mcp.NewStreamableHTTPHandler(s.mcpServer, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       s.deps.Logger,
		// Every request carries a bearer token, and no answer depends on
		// the Host header: a rebound name gains nothing, while a proxy on
		// loopback forwarding the public host name must get through.
		DisableLocalhostProtection: true,
	})
}

// handleMCP reads the message first, with the API's own limits and errors
// (415, 413, 400), so that mcpServer knows which tools the message needs; the
// SDK then reads it again from memory.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) error {
	if err := frontdoor.RequireJSON(r); err != nil {
		return err
	}
	body, err := frontdoor.ReadBody(r)
	if err != nil {
		return err
	}
	// The API's rules for JSON text (one value, UTF-8, no NUL, bounded
	// depth) hold here too, and break with its problem documents.
	var raw json.RawMessage
	if err := jsonbody.Decode(body, &raw); err != nil {
		return err
	}
	m := &mcpMessage{r: r}
	_ = json.Unmarshal(raw, &m.msg) // the SDK answers a message of the wrong shape
	r = r.WithContext(context.WithValue(r.Context(), mcpMessageKey{}, m))
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mcp.ServeHTTP(w, r)
	return nil
}

// mcpMessage is an MCP message and the HTTP request it came in, found by
// the tool handlers in their context.
type mcpMessage struct {
	msg mcpRequest
	r   *http.Request
}

type mcpMessageKey struct{}

// mcpHTTPRequest is the request of the message a tool handler answers.
func mcpHTTPRequest(ctx context.Context) (*http.Request, error) {
	if m, ok := ctx.Value(mcpMessageKey{}).(*mcpMessage); ok {
		return m.r, nil
	}
	return nil, errors.New("mcp: a tool call outside of an HTTP request")
}

// mcpRequest is what mcpServer needs to know of a JSON-RPC message.
type mcpRequest struct {
	Method string `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// mcpServer is the server that answers a message. Agents are the tenant's,
// so the messages that need them (tools/list, and tools/call of an agent
// tool, that one agent) get a server of their own; every other message is
// answered by the one server of the tenant-independent tools, built once.
func (s *Server) mcpServer(r *http.Request) *mcp.Server {
	m, _ := r.Context().Value(mcpMessageKey{}).(*mcpMessage)
	if m == nil {
		return s.mcpStatic
	}
	switch {
	case m.msg.Method == "tools/list":
		srv := s.newMCPServer()
		s.addAgentTools(r, srv, "")
		return srv
	case m.msg.Method == "tools/call" && strings.HasPrefix(m.msg.Params.Name, mcpAgentTool):
		srv := s.newMCPServer()
		s.addAgentTools(r, srv, strings.TrimPrefix(m.msg.Params.Name, mcpAgentTool))
		return srv
	}
	return s.mcpStatic
}

// newMCPServer is a server holding search_operations and call_operation.
func (s *Server) newMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentplane", Title: "agentplane", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: "Tools of this agentplane tenant. search_operations finds operations of the registered APIs; " +
			"call_operation calls one as a recorded, audited workflow; each agent_<name> invokes a deployed agent with a goal.",
		Logger: s.deps.Logger,
		// Lists are the caller's tenant's: no shared cache may keep them.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
	})
	srv.AddTool(&mcp.Tool{
		Name:        mcpSearchTool,
		Title:       "Search operations",
		Description: "Ranked search over the operations of every API registered as a tool: words, not phrases. Returns each operation's tool, id, kind (read or write), summary and input_schema (the JSON Schema of its args); call one with call_operation.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","maxLength":200,"description":"words to look for, e.g. \"list pods\""},` +
			`"tool":{"type":"string","description":"only this tool's operations"},` +
			`"kind":{"type":"string","enum":["read","write"]},` +
			`"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.mcpSearch)
	srv.AddTool(&mcp.Tool{
		Name:  mcpCallTool,
		Title: "Call an operation",
		Description: "Calls one operation of a registered tool, as a one-step workflow: the token needs tool:<tool> (or tool:*), " +
			"the call is recorded, audited and replayable (agent mcp, version <tool>.<operation>).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"tool":{"type":"string","description":"the tool's name"},` +
			`"operation":{"type":"string","description":"the operation's id, as search_operations gives it"},` +
			`"args":{"type":"object","description":"the operation's arguments"}},"required":["tool","operation"]}`),
	}, s.mcpCall)
	return srv
}

// addAgentTools adds agent_<name> for each agent of the tenant with a
// default version, or for the one named only.
func (s *Server) addAgentTools(r *http.Request, srv *mcp.Server, only string) {
	ctx, tenant := r.Context(), frontdoor.Principal(r).Tenant
	var names []string
	if only != "" {
		names = []string{only}
	} else {
		after := ""
		for len(names) < mcpMaxAgents {
			page, err := s.deps.Agents.ListAgents(ctx, tenant, after, 200)
			if err != nil {
				s.deps.Logger.Warn("mcp: list agents", "tenant", tenant, "err", err)
				return
			}
			for _, a := range page {
				names = append(names, a.Name)
			}
			if len(page) < 200 {
				break
			}
			after = page[len(page)-1].Name
		}
	}
	for _, name := range names {
		v, err := s.deps.Agents.AgentVersion(ctx, tenant, name, "")
		if err != nil {
			if !problem.Is(err, problem.NotFound) && !problem.Is(err, problem.AgentVersionNotFound) {
				s.deps.Logger.Warn("mcp: read agent", "tenant", tenant, "agent", name, "err", err)
			}
			continue
		}
		srv.AddTool(agentTool(v), s.mcpInvoke(name))
	}
}

// agentTool describes an agent's default version as an MCP tool: a goal,
// and a context of the agent's inputs.
func agentTool(v *agent.Version) *mcp.Tool {
	contextSchema := json.RawMessage(`{"type":"object"}`)
	if def, errs := agent.DecodeDefinition(v.Definition); len(errs) == 0 && len(def.Inputs) > 0 {
		contextSchema = def.Inputs
	}
	schema := fmt.Sprintf(`{"type":"object","properties":{"goal":{"type":"string","minLength":1,"maxLength":8000,"description":"what the agent should achieve"},"context":%s},"required":["goal"]}`, contextSchema)
	desc := strings.TrimSpace(v.Description)
	switch {
	case desc == "":
		desc = "Runs the agent " + v.Name + "."
	case !strings.ContainsAny(desc[len(desc)-1:], ".!?"):
		desc += "." // the sentence added after it must not run on from it
	}
	return &mcp.Tool{
		Name:        mcpAgentTool + v.Name,
		Title:       v.Name,
		Description: desc + " Invokes version " + v.Version + " (the default) and answers with the finished workflow; needs the scope agents:invoke.",
		InputSchema: json.RawMessage(schema),
	}
}

// toolError is a refusal or failure the model should see: a tool result
// with isError, not a JSON-RPC error.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// problemText is an error as a tool error's text.
func problemText(err error) string {
	pe := problem.As(err)
	text := pe.Detail
	for _, fe := range pe.Errors {
		text += "; " + fe.Field + ": " + fe.Message
	}
	return text
}

// jsonResult is v as structured content and as its JSON text.
func jsonResult(v any, isError bool) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{IsError: isError, StructuredContent: json.RawMessage(b),
		Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
}

// decodeArgs decodes a call's arguments strictly.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// mcpTrace starts the call's span, a child of the trace context the client
// put in _meta (W3C traceparent and tracestate) when it did.
func mcpTrace(ctx context.Context, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	carrier := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := req.Params.Meta[k].(string); ok {
			carrier[k] = v
		}
	}
	if len(carrier) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	return mcpTracer.Start(ctx, "mcp tools/call "+req.Params.Name, trace.WithSpanKind(trace.SpanKindServer))
}

// mcpKeyMeta is the _meta member of a tools/call that carries its
// idempotency key (docs/mcp.md).
const mcpKeyMeta = "io.agentplane/idempotency-key"

// mcpReplayedMeta marks the result of a call that attached to the workflow
// its idempotency key made.
const mcpReplayedMeta = "io.agentplane/idempotent-replayed"

// mcpKey is the stored idempotency key of a tools/call and the fingerprint
// of the call, "" when it has none: the key is _meta's mcpKeyMeta or the
// Idempotency-Key header of its POST (both may be sent only if equal), and
// the fingerprint covers the tool's name and arguments.
func mcpKey(r *http.Request, call *mcp.CallToolRequest) (key, hash string, err error) {
	key = r.Header.Get("Idempotency-Key")
	if v, ok := call.Params.Meta[mcpKeyMeta]; ok {
		meta, isString := v.(string)
		switch {
		case !isString:
			return "", "", problem.New(problem.MalformedRequest, "_meta %q must be a string", mcpKeyMeta)
		case key != "" && meta != key:
			return "", "", problem.New(problem.MalformedRequest, "_meta %q differs from the Idempotency-Key header; send one or make them equal", mcpKeyMeta)
		}
		key = meta
	}
	if key == "" {
		return "", "", nil
	}
	if len(key) > maxIdempotencyKey {
		return "", "", problem.New(problem.MalformedRequest, "the idempotency key must be at most %d characters", maxIdempotencyKey)
	}
	canon, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{call.Params.Name, call.Params.Arguments})
	if err != nil {
		return "", "", err
	}
	return workflow.IdempotencyKey(frontdoor.Principal(r).ID(), r.URL.Path, key), workflow.Fingerprint(canon), nil
}

// mcpRun runs a workflow for an MCP call, or attaches to the one the
// call's idempotency key made (repeat), and waits until it has finished
// (or waits for an approval).
func (s *Server) mcpRun(ctx context.Context, r *http.Request, call *mcp.CallToolRequest, sr workflow.StartRequest) (
	wf *workflow.Workflow, steps []workflow.Step, repeat bool, err error) {
	p, info := frontdoor.Principal(r), frontdoor.InfoFrom(r.Context())
	if sr.IdempotencyKey, sr.RequestHash, err = mcpKey(r, call); err != nil {
		return nil, nil, false, err
	}
	sr.Caller = callerOf(p)
	sr.RequestID = info.RequestID
	sr.TraceID = info.TraceID
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		sr.TraceID = sc.TraceID().String()
	}
	in, err := s.invoker.Invoke(ctx, workflow.Invocation{StartRequest: sr, TTL: s.cfg.InvokeIdempotencyTTL})
	if errors.Is(err, workflow.ErrKeyReused) {
		return nil, nil, false, problem.New(problem.IdempotencyKeyReused,
			"this idempotency key was used with another call (a different tool or arguments); use a new key for a new call")
	}
	if err != nil {
		return nil, nil, false, err
	}
	info.WorkflowID = in.Workflow.ID
	if in.Repeat {
		info.Details = map[string]any{"idempotent_replayed": true}
	}
	wf, steps, err = s.deps.Runner.Finished(ctx, p.Tenant, in.Workflow.ID)
	return wf, steps, in.Repeat, err
}

// replayed marks res as the result of a call that attached to its key's
// workflow.
func replayed(res *mcp.CallToolResult, repeat bool) *mcp.CallToolResult {
	if repeat && res != nil {
		res.Meta = mcp.Meta{mcpReplayedMeta: true}
	}
	return res
}

func (s *Server) mcpInvoke(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r, err := mcpHTTPRequest(ctx)
		if err != nil {
			return nil, err
		}
		ctx, span := mcpTrace(ctx, req)
		defer span.End()
		if err := frontdoor.Principal(r).Require(auth.ScopeAgentsInvoke); err != nil {
			return toolError("%s needs the scope %s, which this token lacks", req.Params.Name, auth.ScopeAgentsInvoke), nil
		}
		var in struct {
			Goal    string         `json:"goal"`
			Context map[string]any `json:"context"`
		}
		if err := decodeArgs(req.Params.Arguments, &in); err != nil {
			return toolError("arguments: %v (want {\"goal\": \"…\", \"context\": {…}})", err), nil
		}
		wf, steps, repeat, err := s.mcpRun(ctx, r, req, workflow.StartRequest{Agent: name, Goal: in.Goal, Context: in.Context})
		if err != nil {
			return toolError("%s", problemText(err)), nil
		}
		v, err := s.workflowView(r, wf, steps, false)
		if err != nil {
			return toolError("%s", problemText(err)), nil
		}
		res, err := jsonResult(v, wf.Status == workflow.Failed)
		return replayed(res, repeat), err
	}
}

func (s *Server) mcpSearch(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, err := mcpHTTPRequest(ctx)
	if err != nil {
		return nil, err
	}
	var in struct {
		Query string `json:"query"`
		Tool  string `json:"tool"`
		Kind  string `json:"kind"`
		Limit int    `json:"limit"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return toolError("arguments: %v (want {\"query\": \"…\", \"tool\"?, \"kind\"?, \"limit\"?})", err), nil
	}
	// Full: each operation with its input schema, so a client knows the
	// arguments call_operation takes without another round trip.
	oq := opQuery{q: strings.TrimSpace(in.Query), kind: in.Kind, limit: in.Limit, full: true}
	if oq.limit == 0 {
		oq.limit = mcpSearchLimit
	}
	if errs := oq.check(); len(errs) > 0 {
		for i := range errs {
			if errs[i].Field == "q" {
				errs[i].Field = "query" // the input's name here
			}
		}
		return toolError("%s", problemText(problem.Validation(errs...))), nil
	}
	pg, err := s.searchOperations(ctx, frontdoor.Principal(r).Tenant, in.Tool, oq)
	if err != nil {
		return toolError("%s", problemText(err)), nil
	}
	return jsonResult(map[string]any{"operations": pg.Operations}, false)
}

// callResult is what call_operation answers: the call's step.
type callResult struct {
	WorkflowID string          `json:"workflow_id"`
	Status     string          `json:"status"`
	HTTPStatus int             `json:"http_status,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
}

func (s *Server) mcpCall(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, err := mcpHTTPRequest(ctx)
	if err != nil {
		return nil, err
	}
	ctx, span := mcpTrace(ctx, req)
	defer span.End()
	var in struct {
		Tool      string         `json:"tool"`
		Operation string         `json:"operation"`
		Args      map[string]any `json:"args"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil || in.Tool == "" || in.Operation == "" {
		return toolError("arguments: want {\"tool\": \"<name>\", \"operation\": \"<id>\", \"args\": {…}}, as search_operations lists them"), nil
	}
	one := 1
	wf, steps, repeat, err := s.mcpRun(ctx, r, req, workflow.StartRequest{
		Agent: agent.OperationAgent, Version: in.Tool + "." + in.Operation,
		Goal:    mcpCallTool + " " + in.Tool + "." + in.Operation,
		Context: map[string]any{"args": in.Args}, MaxToolCalls: &one,
	})
	if err != nil {
		text := problemText(err)
		if problem.Is(err, problem.ValidationFailed) {
			text += ": search_operations lists the operations there are"
		}
		return toolError("%s", text), nil
	}
	res := callResult{WorkflowID: wf.ID, Status: wf.Status}
	if len(steps) > 0 {
		st := steps[len(steps)-1]
		res.Status, res.HTTPStatus, res.Result = st.Status, st.HTTPStatus, st.Result
		if st.Error != "" {
			res.Error = st.Error
		}
	}
	out, err := jsonResult(res, res.Status != agent.StatusOK)
	return replayed(out, repeat), err
}

// protectedResource is the RFC 9728 metadata of the MCP endpoint.
func (s *Server) handleProtectedResource(w http.ResponseWriter, r *http.Request) error {
	md := oauthex.ProtectedResourceMetadata{
		Resource:               s.cfg.PublicURL + "/mcp",
		ResourceName:           "agentplane MCP server",
		ScopesSupported:        []string{auth.ScopeMCPUse, auth.ScopeAgentsInvoke, auth.ScopeAllTools},
		BearerMethodsSupported: []string{"header"},
	}
	if s.cfg.AuthorizationServer != "" {
		md.AuthorizationServers = []string{s.cfg.AuthorizationServer}
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	return frontdoor.WriteJSON(w, http.StatusOK, md)
}

// resourceMetadataURL is where a client refused at /mcp finds how to
// authenticate (RFC 9728 §5.1).
func (s *Server) resourceMetadataURL() string {
	return s.cfg.PublicURL + "/.well-known/oauth-protected-resource/mcp"
}
