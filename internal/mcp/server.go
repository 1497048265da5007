package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

const (
	searchTool = "search_operations"
	callTool   = "call_operation"
	agentTool  = "agent_"
	// maxAgents bounds the agents one tools/list shows.
	maxAgents = 1000
)

// Config is what the MCP server tells its clients of itself.
type Config struct {
	// Version is the server's, in its implementation info.
	Version string
	// PublicURL is the server's external base URL; the endpoint is
	// PublicURL/mcp.
	PublicURL string
	// AuthorizationServer is the issuer the metadata names, if any.
	AuthorizationServer string
	// KeyTTL is how long after its workflow started a call's idempotency
	// key is honoured (zero: as long as the workflow is kept).
	KeyTTL time.Duration
}

// Agents is what the server reads of the deployed agents.
type Agents interface {
	AgentVersion(ctx context.Context, tenant, name, version string) (*agent.Version, error)
	ListAgents(ctx context.Context, tenant, after string, limit int) ([]*agent.Agent, error)
}

// Runs waits for workflows (workflow.Runner).
type Runs interface {
	// Finished returns the workflow and its steps once it has finished or
	// waits for an approval.
	Finished(ctx context.Context, tenant, id string) (*workflow.Workflow, []workflow.Step, error)
	// Wait returns the workflow once it has finished.
	Wait(ctx context.Context, tenant, id string) (*workflow.Workflow, error)
	// Cancel cancels a workflow, as POST /v1/workflows/{id}/cancel.
	Cancel(ctx context.Context, tenant, id string) (*workflow.Workflow, error)
}

// Workflows reads the workflows a task's messages name (workflow.Store).
type Workflows interface {
	Workflow(ctx context.Context, tenant, id string) (*workflow.Workflow, error)
	Steps(ctx context.Context, workflowID string, afterSeq int) ([]workflow.Step, error)
	ListWorkflows(ctx context.Context, tenant string, f workflow.ListFilter) ([]*workflow.Workflow, error)
}

// Services are what the MCP server uses.
type Services struct {
	Agents Agents
	// Invoker starts the workflows of calls, or attaches to the one a
	// call's idempotency key made; Runner waits for them to finish.
	Invoker *workflow.Invoker
	Runner  Runs
	// Workflows reads the workflows of tasks.
	Workflows Workflows
	// Operations is the operation search of search_operations.
	Operations *tool.Finder
	// View is a finished workflow as the API shows it to r's caller, the
	// answer of an agent tool.
	View   func(r *http.Request, wf *workflow.Workflow, steps []workflow.Step) (any, error)
	Logger *slog.Logger
}

// Server is the tenant's MCP server.
type Server struct {
	cfg Config
	svc Services
	// sdk is the SDK's handler of POST /mcp; static the server of the
	// tools every tenant has, built once.
	sdk    http.Handler
	static *sdk.Server
}

// New builds the MCP server.
func New(cfg Config, svc Services) *Server {
	if svc.Logger == nil {
		svc.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, svc: svc}
	s.static = s.newServer()
	// Stateless: any replica answers any request, and nothing is kept
	// between requests.
	s.sdk = sdk.NewStreamableHTTPHandler(s.serverFor, &sdk.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       svc.Logger,
		// Every request carries a bearer token, and no answer depends on
		// the Host header: a rebound name gains nothing, while a proxy on
		// loopback forwarding the public host name must get through.
		DisableLocalhostProtection: true,
	})
	return s
}

// Handle answers POST /mcp. It reads the message first, with the API's own
// limits and errors (415, 413, 400), so that serverFor knows which tools
// the message needs; the SDK then reads it again from memory.
func (s *Server) Handle(w http.ResponseWriter, r *http.Request) error {
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
	m := &message{r: r}
	// The SDK answers a message of the wrong shape.
	if json.Unmarshal(raw, &m.msg) == nil && len(m.msg.RawParams) > 0 {
		_ = json.Unmarshal(m.msg.RawParams, &m.msg.Params)
	}
	r = r.WithContext(context.WithValue(r.Context(), messageKey{}, m))
	if s.serveTasks(w, r, &m.msg) {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if add := advertise(m.msg.Method); add != nil {
		rw := &recorder{header: http.Header{}}
		s.sdk.ServeHTTP(rw, r)
		rw.flush(w, add)
		return nil
	}
	s.sdk.ServeHTTP(w, r)
	return nil
}

// message is an MCP message and the HTTP request it came in, found by the
// tool handlers in their context.
type message struct {
	msg rpcRequest
	r   *http.Request
}

type messageKey struct{}

// httpRequest is the request of the message a tool handler answers.
func httpRequest(ctx context.Context) (*http.Request, error) {
	if m, ok := ctx.Value(messageKey{}).(*message); ok {
		return m.r, nil
	}
	return nil, errors.New("mcp: a tool call outside of an HTTP request")
}

// rpcRequest is what serverFor and the tasks need to know of a JSON-RPC
// message.
type rpcRequest struct {
	ID        json.RawMessage `json:"id"`
	Method    string          `json:"method"`
	RawParams json.RawMessage `json:"params"`
	Params    struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      map[string]any  `json:"_meta"`
		// Task asks for a task (revision 2025-11-25); its ttl is not
		// honoured, a workflow being kept as long as retention says.
		Task json.RawMessage `json:"task"`
	} `json:"-"`
}

// serverFor is the server that answers a message. Agents are the tenant's,
// so the messages that need them (tools/list, and tools/call of an agent
// tool, that one agent) get a server of their own; every other message is
// answered by the one server of the tenant-independent tools, built once.
func (s *Server) serverFor(r *http.Request) *sdk.Server {
	m, _ := r.Context().Value(messageKey{}).(*message)
	if m == nil {
		return s.static
	}
	switch {
	case m.msg.Method == "tools/list":
		srv := s.newServer()
		s.addAgentTools(r, srv, "")
		return srv
	case m.msg.Method == "tools/call" && strings.HasPrefix(m.msg.Params.Name, agentTool):
		srv := s.newServer()
		s.addAgentTools(r, srv, strings.TrimPrefix(m.msg.Params.Name, agentTool))
		return srv
	}
	return s.static
}

// newServer is a server holding search_operations and call_operation.
func (s *Server) newServer() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "agentplane", Title: "agentplane", Version: s.cfg.Version}, &sdk.ServerOptions{
		Instructions: "Tools of this agentplane tenant. search_operations finds operations of the registered APIs; " +
			"call_operation calls one as a recorded, audited workflow; each agent_<name> invokes a deployed agent with a goal.",
		Logger: s.svc.Logger,
		// Lists are the caller's tenant's: no shared cache may keep them.
		SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) { c.CacheScope = "private" },
	})
	srv.AddTool(&sdk.Tool{
		Name:        searchTool,
		Title:       "Search operations",
		Description: "Ranked search over the operations of every API registered as a tool: words, not phrases. Returns each operation's tool, id, kind (read or write), summary and input_schema (the JSON Schema of its args); call one with call_operation.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","maxLength":200,"description":"words to look for, e.g. \"list pods\""},` +
			`"tool":{"type":"string","description":"only this tool's operations"},` +
			`"kind":{"type":"string","enum":["read","write"]},` +
			`"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.search)
	srv.AddTool(&sdk.Tool{
		Name:  callTool,
		Title: "Call an operation",
		Description: "Calls one operation of a registered tool, as a one-step workflow: the token needs tool:<tool> (or tool:*), " +
			"the call is recorded, audited and replayable (agent mcp, version <tool>.<operation>).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"tool":{"type":"string","description":"the tool's name"},` +
			`"operation":{"type":"string","description":"the operation's id, as search_operations gives it"},` +
			`"args":{"type":"object","description":"the operation's arguments"}},"required":["tool","operation"]}`),
	}, s.call)
	return srv
}

// addAgentTools adds agent_<name> for each agent of the tenant with a
// default version, or for the one named only.
func (s *Server) addAgentTools(r *http.Request, srv *sdk.Server, only string) {
	ctx, tenant := r.Context(), frontdoor.Principal(r).Tenant
	var names []string
	if only != "" {
		names = []string{only}
	} else {
		after := ""
		for len(names) < maxAgents {
			page, err := s.svc.Agents.ListAgents(ctx, tenant, after, 200)
			if err != nil {
				s.svc.Logger.Warn("mcp: list agents", "tenant", tenant, "err", err)
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
		v, err := s.svc.Agents.AgentVersion(ctx, tenant, name, "")
		if err != nil {
			if !problem.Is(err, problem.NotFound) && !problem.Is(err, problem.AgentVersionNotFound) {
				s.svc.Logger.Warn("mcp: read agent", "tenant", tenant, "agent", name, "err", err)
			}
			continue
		}
		srv.AddTool(agentToolOf(v), s.invoke(name))
	}
}
