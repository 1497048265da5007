package call

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/mcptool"
)

// callMCP calls an MCP server's tool with tools/call: the same address
// rules, credentials, timeout and response limit as every call, through
// the same client. It is not retried: an MCP tool says nothing of whether
// it is safe to repeat.
func (e *Executor) callMCP(ctx context.Context, req tool.CallRequest) (tool.CallResult, error) {
	endpoint := req.Tool.BaseURL
	body, _ := json.Marshal(map[string]any{"method": "tools/call", "params": map[string]any{"name": req.Operation.MCP.Name, "arguments": req.Args}})
	recorded := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.User != nil {
		u.User = nil // a user name and password are credentials
		recorded = u.String()
	}
	res := tool.CallResult{Request: tool.RecordedRequest{Method: http.MethodPost, URL: recorded, Body: body,
		Places: []redact.Place{{Arg: "", In: redact.InBody, Name: "/params/arguments"}}}, Attempts: 1}
	u, err := e.opts.Client.CheckURL(endpoint, false)
	if err != nil {
		return res, err
	}
	cred, err := e.authenticate(ctx, req)
	if err != nil {
		return res, err
	}
	hc := *e.http
	hc.Transport = &mcptool.Transport{Base: e.http.Transport, Limit: e.opts.MaxResponseBytes, Apply: func(r *http.Request) {
		r.Header.Set("User-Agent", e.opts.Client.Options().UserAgent)
	}}
	// The session's requests, closing one included, keep the context's values.
	out, err := mcptool.Call(cred.context(ctx, u), &hc, endpoint, req.Operation.MCP.Name, req.Args)
	if err != nil {
		if ctx.Err() != nil {
			return res, e.transportError(ctx, ctx.Err())
		}
		if mcptool.TooLarge(err) {
			return res, &Error{Msg: fmt.Sprintf("the MCP server's answer is over the response limit of %d bytes", e.opts.MaxResponseBytes), Err: err}
		}
		return res, &Error{Msg: "the MCP server failed the call: " + err.Error(), Err: err}
	}
	res.Status, res.Body = http.StatusOK, out.Body
	if out.IsError {
		return res, &Error{Status: http.StatusOK, Msg: "the MCP tool reported an error: " + out.Text}
	}
	return res, nil
}
