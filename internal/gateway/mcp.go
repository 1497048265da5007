package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/workflow"
)

// mcpServer is the gateway's MCP server: the tools of each attempt are the
// operations of its version's tools, named <tool>__<operation>.
type mcpServer struct {
	g       *Gateway
	version string
	logger  *slog.Logger
	handler http.Handler
	// servers keeps each attempt's SDK server, built at its first request.
	servers *lru.Cache[string, *sdk.Server]
}

// maxServers bounds the attempts' servers kept.
const maxServers = 4096

type runKey struct{}

func newMCP(g *Gateway, version string, logger *slog.Logger) *mcpServer {
	m := &mcpServer{g: g, version: version, logger: logger}
	m.servers, _ = lru.New[string, *sdk.Server](maxServers)
	m.handler = sdk.NewStreamableHTTPHandler(m.serverFor, &sdk.StreamableHTTPOptions{
		// Each request carries the run token; nothing is kept between
		// requests beyond the attempt's tool list.
		Stateless:    true,
		JSONResponse: true,
		Logger:       logger,
		// Every request carries the run token, and no answer depends on
		// the Host header.
		DisableLocalhostProtection: true,
	})
	return m
}

// MCP serves POST …/gateway/mcp (a GET for a stream, or a DELETE, is 405:
// the server is stateless).
func (g *Gateway) MCP(w http.ResponseWriter, r *http.Request) error {
	run, ok := g.run(r)
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": workflow.GatewayRunEnded, "message": unauthenticated}})
		return nil
	}
	r = r.WithContext(context.WithValue(r.Context(), runKey{}, run))
	g.mcp.handler.ServeHTTP(w, r)
	return nil
}

// serverFor is the SDK server of the request's attempt.
func (m *mcpServer) serverFor(r *http.Request) *sdk.Server {
	run, _ := r.Context().Value(runKey{}).(*workflow.GatewayRun)
	if run == nil {
		return sdk.NewServer(&sdk.Implementation{Name: "agentplane-gateway", Version: m.version}, nil)
	}
	key := run.WorkflowID() + "." + strconv.Itoa(run.Attempt())
	if s, ok := m.servers.Get(key); ok {
		return s
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "agentplane-gateway", Title: "agentplane run gateway", Version: m.version}, &sdk.ServerOptions{
		Instructions: "The tools of agent " + run.Agent() + ": each calls one operation of a registered API through agentplane, " +
			"which checks, records and audits it. A refusal is a result with isError saying why.",
		Logger:       m.logger,
		SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) { c.CacheScope = "private" },
	})
	for _, op := range run.Operations() {
		schema := op.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		t := &sdk.Tool{Name: op.Name, Description: op.Description, InputSchema: schema}
		if op.Kind == "read" {
			t.Annotations = &sdk.ToolAnnotations{ReadOnlyHint: true}
		}
		s.AddTool(t, m.call(op.Name))
	}
	m.servers.Add(key, s)
	return s
}

// call is the handler of the tool of one operation.
func (m *mcpServer) call(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		run, _ := ctx.Value(runKey{}).(*workflow.GatewayRun)
		if run == nil {
			return toolError(unauthenticated), nil
		}
		var args map[string]any
		if raw := req.Params.Arguments; len(raw) > 0 {
			if err := json.Unmarshal(raw, &args); err != nil {
				return toolError(fmt.Sprintf("arguments: %v (want a JSON object)", err)), nil
			}
		}
		ans, err := run.Call(ctx, name, args)
		if err != nil {
			return toolError(err.Error()), nil
		}
		if ans.IsError {
			res := toolError(ans.Message)
			if len(ans.Result) > 0 {
				res.Content = append(res.Content, &sdk.TextContent{Text: string(ans.Result)})
			}
			return res, nil
		}
		out := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(ans.Result)}}}
		if len(ans.Result) > 0 && ans.Result[0] == '{' {
			out.StructuredContent = ans.Result
		}
		return out, nil
	}
}

// toolError is a refusal or failure the agent's model should see.
func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
