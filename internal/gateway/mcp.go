package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// mcpServer is the gateway's MCP server: the tools of each attempt are the
// operations of its version's tools, named <tool>__<operation>.
type mcpServer struct {
	g       *Gateway
	version string
	logger  *slog.Logger
	handler http.Handler
	// attempts keeps each attempt's tools and SDK server, made at its
	// first request.
	attempts *lru.Cache[string, *attemptMCP]
}

// MaxRequestBody bounds a request to the gateway: a completion's body may
// be as large as a long conversation.
const MaxRequestBody = 32 << 20

// maxAttempts bounds the attempts kept.
const maxAttempts = 4096

type runKey struct{}

// mcpRun is what the MCP server uses of an attempt (a *workflow.GatewayRun).
type mcpRun interface {
	WorkflowID() string
	Attempt() int
	Agent() string
	Operations() []agent.GatewayOperation
	Call(ctx context.Context, name string, args map[string]any) (workflow.CallAnswer, error)
}

func newMCP(g *Gateway, version string, logger *slog.Logger) *mcpServer {
	m := &mcpServer{g: g, version: version, logger: logger}
	m.attempts, _ = lru.New[string, *attemptMCP](maxAttempts)
	m.handler = sdk.NewStreamableHTTPHandler(m.serverFor, &sdk.StreamableHTTPOptions{
		// Each request carries the run token; nothing is kept between
		// requests beyond the attempt's tool list.
		Stateless:    true,
		JSONResponse: true,
		Logger:       logger,
		// Every request carries the run token, and no answer depends on
		// the Host header.
		DisableLocalhostProtection: true,
		// The route bounds a body (MaxRequestBody) before the SDK reads
		// it: a message the fast path takes, the SDK takes too.
		MaxRequestBodyBytes: MaxRequestBody,
	})
	return m
}

// MCP serves POST …/gateway/mcp (a GET for a stream, or a DELETE, is 405:
// the server is stateless).
func (g *Gateway) MCP(w http.ResponseWriter, r *http.Request) error {
	run, err := g.run(w, r)
	if run == nil {
		if err == nil {
			writeMCPError(w, http.StatusUnauthorized, workflow.GatewayRunEnded, unauthenticated)
		}
		return err
	}
	g.mcp.serve(w, r, run)
	return nil
}

// writeMCPError writes a refusal of a request to the MCP endpoint that no
// JSON-RPC message answers (no run token, a body too large).
func writeMCPError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": message}})
}

// sdkServe answers a request through the SDK's handler.
func (m *mcpServer) sdkServe(w http.ResponseWriter, r *http.Request, run mcpRun) {
	m.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), runKey{}, run)))
}

// attemptMCP is what the MCP server keeps of an attempt: its tools, and
// its SDK server once a request needs it.
type attemptMCP struct {
	tools  []*sdk.Tool
	names  map[string]bool
	once   sync.Once
	server *sdk.Server
}

func (a *attemptMCP) has(name string) bool { return a.names[name] }

// attemptOf is what the server keeps of run's attempt, made at its first
// request.
func (m *mcpServer) attemptOf(run mcpRun) *attemptMCP {
	key := run.WorkflowID() + "." + strconv.Itoa(run.Attempt())
	if a, ok := m.attempts.Get(key); ok {
		return a
	}
	ops := run.Operations()
	a := &attemptMCP{names: make(map[string]bool, len(ops))}
	for _, op := range ops {
		schema := op.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		t := &sdk.Tool{Name: op.Name, Description: op.Description, InputSchema: schema}
		if op.Kind == "read" {
			t.Annotations = &sdk.ToolAnnotations{ReadOnlyHint: true}
		}
		a.tools = append(a.tools, t)
		a.names[op.Name] = true
	}
	slices.SortFunc(a.tools, func(x, y *sdk.Tool) int { return strings.Compare(x.Name, y.Name) })
	m.attempts.Add(key, a)
	return a
}

// impl is the server's identity.
func (m *mcpServer) impl() *sdk.Implementation {
	return &sdk.Implementation{Name: "agentplane-gateway", Title: "agentplane run gateway", Version: m.version}
}

// instructions tell run's agent what its tools are.
func instructions(run mcpRun) string {
	return "The tools of agent " + run.Agent() + ": each calls one operation of a registered API through agentplane, " +
		"which checks, records and audits it. A refusal is a result with isError saying why."
}

// serverFor is the SDK server of the request's attempt.
func (m *mcpServer) serverFor(r *http.Request) *sdk.Server {
	run, _ := r.Context().Value(runKey{}).(mcpRun)
	if run == nil {
		return sdk.NewServer(&sdk.Implementation{Name: "agentplane-gateway", Version: m.version}, nil)
	}
	a := m.attemptOf(run)
	a.once.Do(func() {
		a.server = sdk.NewServer(m.impl(), &sdk.ServerOptions{
			Instructions: instructions(run),
			Logger:       m.logger,
			SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) { c.CacheScope = "private" },
		})
		for _, t := range a.tools {
			name := t.Name
			a.server.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				run, _ := ctx.Value(runKey{}).(mcpRun)
				if run == nil {
					return toolError(unauthenticated), nil
				}
				return callTool(ctx, run, name, req.Params.Arguments), nil
			})
		}
	})
	return a.server
}

// callTool calls the operation name of run with the arguments raw.
func callTool(ctx context.Context, run mcpRun, name string, raw json.RawMessage) *sdk.CallToolResult {
	var args map[string]any
	if len(raw) > 0 {
		var err error
		if args, err = agent.DecodeArgs(raw); err != nil {
			return toolError(fmt.Sprintf("arguments: %v (want a JSON object)", err))
		}
	}
	ans, err := run.Call(ctx, name, args)
	if err != nil {
		return toolError(err.Error())
	}
	if ans.IsError {
		res := toolError(ans.Message)
		if len(ans.Result) > 0 {
			res.Content = append(res.Content, &sdk.TextContent{Text: string(ans.Result)})
		}
		return res
	}
	out := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(ans.Result)}}}
	if len(ans.Result) > 0 && ans.Result[0] == '{' {
		out.StructuredContent = ans.Result
	}
	return out
}

// toolError is a refusal or failure the agent's model should see.
func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
