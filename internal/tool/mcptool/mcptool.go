// Package mcptool registers MCP servers as tools (type mcp): their
// tools/list is indexed as operations, and a call is tools/call, over the
// official SDK's Streamable HTTP client.
package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// MaxTools bounds the tools one server may list.
const MaxTools = 20000

// connect opens a session with the server at endpoint over hc: initialize,
// without the standalone event stream a call does not need.
func connect(ctx context.Context, hc *http.Client, endpoint string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "agentplane", Version: "1"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
}

// ErrTooLarge is an answer over a Transport's limit.
var ErrTooLarge = errors.New("the MCP server's answer is over the size limit")

// TooLarge reports whether err comes of ErrTooLarge. The SDK's client
// reports a failed read with its text rather than wrapping it, so the text
// counts too.
func TooLarge(err error) bool {
	return errors.Is(err, ErrTooLarge) || (err != nil && strings.Contains(err.Error(), ErrTooLarge.Error()))
}

// Transport prepares each request of a session (credentials, User-Agent)
// and bounds each answer to Limit bytes (no bound when 0).
type Transport struct {
	Base  http.RoundTripper
	Apply func(*http.Request)
	Limit int64
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.Apply != nil {
		r = r.Clone(r.Context())
		t.Apply(r)
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err == nil && t.Limit > 0 {
		resp.Body = &limitedBody{rc: resp.Body, left: t.Limit}
	}
	return resp, err
}

// limitedBody fails with ErrTooLarge once more than left bytes arrive.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var probe [1]byte
		if n, err := b.rc.Read(probe[:]); n == 0 {
			return 0, err // the answer ended at the limit
		}
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// Lister lists MCP servers' tools through HTTP, the hardened outgoing
// client, each answer at most MaxBytes (the spec size limit).
type Lister struct {
	HTTP     *http.Client
	MaxBytes int64
}

// ListMCPTools returns every tool of every page of the server's tools/list
// as a JSON array.
func (l Lister) ListMCPTools(ctx context.Context, endpoint string) ([]byte, error) {
	hc := *l.HTTP
	hc.Transport = &Transport{Base: l.HTTP.Transport, Limit: l.MaxBytes}
	failed := func(what string, err error) error {
		if TooLarge(err) {
			return problem.New(problem.SpecTooLarge, "%s of the MCP server at %s: an answer is over the %d byte limit", what, endpoint, l.MaxBytes)
		}
		return problem.New(problem.SpecUnreachable, "%s of the MCP server at %s failed: %v", what, endpoint, err)
	}
	cs, err := connect(ctx, &hc, endpoint)
	if err != nil {
		return nil, failed("initialize", err)
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, failed("tools/list", err)
		}
		if len(tools) == MaxTools {
			return nil, problem.New(problem.SpecTooLarge, "the MCP server at %s lists more than %d tools", endpoint, MaxTools)
		}
		tools = append(tools, t)
	}
	return json.Marshal(tools)
}

// listed is the part of an MCP tool object that becomes an operation.
type listed struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  *struct {
		Title        string `json:"title"`
		ReadOnlyHint bool   `json:"readOnlyHint"`
	} `json:"annotations"`
}

// Importer turns a listed array of tools into operations: the id is the
// tool's name, the kind read only when the server marks it readOnlyHint.
type Importer struct{}

// Import implements tool.Importer.
func (Importer) Import(_ context.Context, src tool.Source) (*tool.Spec, error) {
	var list []listed
	if err := json.Unmarshal(src.Data, &list); err != nil {
		return nil, problem.New(problem.SpecInvalid, "the MCP server's tools/list is not an array of tools: %v", err)
	}
	spec := &tool.Spec{BaseURL: src.URL}
	seen := make(map[string]bool, len(list))
	for i, l := range list {
		if l.Name == "" || seen[l.Name] {
			spec.Warnings = append(spec.Warnings, fmt.Sprintf("tools[%d]: a tool without a name, or listed twice (%q), is left out", i, l.Name))
			continue
		}
		seen[l.Name] = true
		op := tool.Operation{ID: l.Name, Kind: tool.Write, Description: l.Description,
			Input: l.InputSchema, Output: l.OutputSchema, MCP: &tool.MCPBinding{Name: l.Name}}
		if l.Annotations != nil && l.Annotations.ReadOnlyHint {
			op.Kind = tool.Read
		}
		op.Summary = l.Title
		if op.Summary == "" && l.Annotations != nil {
			op.Summary = l.Annotations.Title
		}
		if op.Summary == "" {
			op.Summary = tool.FirstLine(l.Description)
		}
		spec.Operations = append(spec.Operations, op)
	}
	return spec, nil
}

// Result is what a tools/call answered.
type Result struct {
	// Body is the structured content when the tool gave one, else
	// {"content": [...]}.
	Body json.RawMessage
	// IsError is the tool's own report of a failure; Text its text.
	IsError bool
	Text    string
}

// Call calls the tool name of the server at endpoint with args.
func Call(ctx context.Context, hc *http.Client, endpoint, name string, args map[string]any) (Result, error) {
	cs, err := connect(ctx, hc, endpoint)
	if err != nil {
		return Result{}, err
	}
	defer cs.Close()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return Result{}, err
	}
	out := Result{IsError: res.IsError}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out.Text += t.Text
		}
	}
	if res.StructuredContent != nil {
		out.Body, err = json.Marshal(res.StructuredContent)
	} else {
		out.Body, err = json.Marshal(map[string]any{"content": res.Content})
	}
	return out, err
}
