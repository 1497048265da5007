package call

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

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
	res := tool.CallResult{Request: tool.RecordedRequest{Method: http.MethodPost, URL: endpoint, Body: body}, Attempts: 1}
	if _, err := e.opts.Client.CheckURL(endpoint, false); err != nil {
		return res, err
	}
	cred, err := e.authenticate(ctx, req)
	if err != nil {
		return res, err
	}
	hc := *e.http
	hc.Transport = &mcpTransport{base: e.http.Transport, cred: cred, userAgent: e.opts.Client.Options().UserAgent, limit: e.opts.MaxResponseBytes}
	out, err := mcptool.Call(ctx, &hc, endpoint, req.Operation.MCP.Name, req.Args)
	if err != nil {
		if ctx.Err() != nil {
			return res, e.transportError(ctx, ctx.Err())
		}
		var tooLarge *errTooLarge
		if errors.As(err, &tooLarge) {
			return res, &Error{Msg: tooLarge.Error(), Err: err}
		}
		return res, &Error{Msg: "the MCP server failed the call: " + err.Error(), Err: err}
	}
	res.Status, res.Body = http.StatusOK, out.Body
	if out.IsError {
		return res, &Error{Status: http.StatusOK, Msg: "the MCP tool reported an error: " + out.Text}
	}
	return res, nil
}

// mcpTransport adds the tool's credentials and the User-Agent to each
// request of an MCP session and bounds each answer.
type mcpTransport struct {
	base      http.RoundTripper
	cred      *credentials
	userAgent string
	limit     int64
}

func (t *mcpTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("User-Agent", t.userAgent)
	if t.cred != nil && t.cred.apply != nil {
		t.cred.apply(r)
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil || t.limit <= 0 {
		return resp, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit}
	return resp, nil
}

// errTooLarge is an answer over the response limit.
type errTooLarge struct{}

func (e *errTooLarge) Error() string {
	return "the MCP server's answer is over the response limit"
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, &errTooLarge{}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
