package call

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// prepared is a request ready to send, before credentials, and how to read
// its answer.
type prepared struct {
	method string
	url    *url.URL
	header http.Header
	body   []byte
	// recordBody is the body for the record: JSON, or a JSON string.
	recordBody json.RawMessage
	// read turns an answer's body into the result's JSON and, when the API
	// reported a failure in it (GraphQL errors, a SOAP Fault), says what.
	read func(contentType string, body []byte) (json.RawMessage, string)
	// code, set by read, is the error_code of the failure it reported
	// when its kind has one of its own.
	code string
	// places say where the arguments went, for redaction.
	places []redact.Place
}

// arg is the JSON pointer of the argument name.
func arg(name string) string { return "/" + pointerEscaper.Replace(name) }

// sensitiveHeaders never appear in a recorded request.
var sensitiveHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-API-Key"}

// record is the request as it will be sent, without credentials (they are
// added to the real request only, after this).
func (p *prepared) record(a tool.Auth) tool.RecordedRequest {
	h := p.header.Clone()
	for _, k := range sensitiveHeaders {
		h.Del(k)
	}
	if a.Header != "" {
		h.Del(a.Header)
	}
	if len(h) == 0 {
		h = nil
	}
	u := *p.url
	u.User = nil // a user name and password are credentials
	return tool.RecordedRequest{Method: p.method, URL: u.String(), Header: h, Body: p.recordBody, Places: p.places}
}

// answer is what came back from one attempt.
type answer struct {
	status      int
	statusText  string
	contentType string
	body        []byte
	retryAfter  time.Duration
}

// send makes one attempt.
func (e *Executor) send(ctx context.Context, p *prepared, cred *credentials) (answer, error) {
	req, err := http.NewRequestWithContext(cred.context(ctx, p.url), p.method, p.url.String(), bytes.NewReader(p.body))
	if err != nil {
		return answer{}, &Error{Msg: "the request cannot be built", Err: err}
	}
	if len(p.body) == 0 {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	req.Header = p.header.Clone()
	req.Header.Set("User-Agent", e.opts.Client.Options().UserAgent)
	resp, err := e.http.Do(req)
	if err != nil {
		return answer{}, e.transportError(ctx, err)
	}
	defer resp.Body.Close()
	a := answer{
		status:      resp.StatusCode,
		statusText:  resp.Status,
		contentType: resp.Header.Get("Content-Type"),
		retryAfter:  parseRetryAfter(resp.Header.Get("Retry-After"), e.opts.Now()),
	}
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, e.opts.MaxResponseBytes+1))
	if err != nil {
		return a, e.transportError(ctx, err)
	}
	if int64(len(a.body)) > e.opts.MaxResponseBytes {
		a.body = nil
		return a, &Error{Status: a.status, Msg: "the answer is over the size limit of " + outbound.Size(e.opts.MaxResponseBytes)}
	}
	return a, nil
}

// transportError turns an error of the HTTP client into the call's error.
// The URL in it is cut to its path, as in the audit record: credentials
// never reach it (they are added beneath the client), but its query holds
// the call's arguments.
func (e *Executor) transportError(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = tool.URLWithoutQuery(ue.URL)
	}
	if pe := problemOr(err); pe != nil {
		if pe.Code == problem.URLNotAllowed {
			return pe
		}
		return &Error{Msg: pe.Detail, Err: err}
	}
	return &Error{
		Retryable: ctx.Err() == nil,
		Msg:       "the API could not be reached: " + outbound.Reason(err, e.opts.Timeout),
		Err:       err,
	}
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// jsonBody is an answer as JSON: JSON as is (compacted), nothing as null,
// anything else as a JSON string.
func jsonBody(body []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(trimmed) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, trimmed); err == nil {
			return buf.Bytes()
		}
	}
	b, _ := json.Marshal(string(body))
	return b
}

// jsonString is s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
