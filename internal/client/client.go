// Package client talks to an agentplane server over its HTTP API: the
// command-line client's transport. It sends JSON, returns the server's own
// JSON bytes unchanged, turns problem documents into *Problem errors and
// reads server-sent event streams one event at a time.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxResponse bounds a response body the client reads whole.
const MaxResponse = 64 << 20

// Client is a connection to one server with one bearer token.
type Client struct {
	// BaseURL is the server, e.g. http://127.0.0.1:8080.
	BaseURL string
	Token   string
	// HTTP sends the requests; http.DefaultClient when nil. Streams are
	// read without a client timeout, so set timeouts per request context.
	HTTP *http.Client
	// UserAgent names the caller.
	UserAgent string
}

// Problem is an RFC 9457 problem document the server answered with.
type Problem struct {
	Status    int          `json:"status"`
	Code      string       `json:"code"`
	Title     string       `json:"title"`
	Detail    string       `json:"detail"`
	RequestID string       `json:"request_id"`
	Errors    []FieldError `json:"errors"`
}

// FieldError is one entry of a problem's errors.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is the problem on one line: "title: detail (field: message; …)".
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Title)
	if b.Len() == 0 {
		b.WriteString(http.StatusText(p.Status))
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	var fields []string
	for _, e := range p.Errors {
		// A detail that already says it (one field) is not repeated.
		if s := e.Field + ": " + e.Message; !strings.Contains(p.Detail, s) {
			fields = append(fields, s)
		}
	}
	if len(fields) > 0 {
		b.WriteString(" (" + strings.Join(fields, "; ") + ")")
	}
	return b.String()
}

// Response is a successful answer: its status, headers and body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Request is one call of the API.
type Request struct {
	Method string
	// Path is the path and query, e.g. /v1/tools?limit=10.
	Path string
	// Body, when not nil, is sent as JSON: json.RawMessage as it is.
	Body   any
	Header http.Header
}

// Do sends req and reads the whole answer. A problem document (or any
// status of 400 and above) comes back as a *Problem error.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	resp, err := c.send(ctx, req, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s %s: %w", req.Method, req.Path, err)
	}
	if len(body) > MaxResponse {
		return nil, fmt.Errorf("the answer of %s %s is larger than %d MiB", req.Method, req.Path, MaxResponse>>20)
	}
	if resp.StatusCode >= 400 {
		return nil, problemOf(resp, body)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// JSON sends req and decodes a successful answer into out.
func (c *Client) JSON(ctx context.Context, req Request, out any) (*Response, error) {
	resp, err := c.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return nil, fmt.Errorf("the answer of %s %s is not the JSON expected: %w", req.Method, req.Path, err)
		}
	}
	return resp, nil
}

// Event is one server-sent event.
type Event struct {
	ID   string
	Data []byte
}

// Stream sends req asking for an event stream and calls fn with each event
// as it arrives, until the stream ends, fn returns an error or ctx ends. A
// server that answers with JSON instead (a finished workflow, say) is
// handed to fn as one event whose ID is empty. It returns the response
// headers, read before the first event.
func (c *Client) Stream(ctx context.Context, req Request, fn func(http.Header, Event) error) error {
	resp, err := c.send(ctx, req, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return problemOf(resp, body)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
		if err != nil {
			return err
		}
		return fn(resp.Header, Event{Data: body})
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var ev Event
	var data [][]byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data != nil {
				ev.Data = bytes.Join(data, []byte("\n"))
				if err := fn(resp.Header, ev); err != nil {
					return err
				}
			}
			ev, data = Event{}, nil
		case line[0] == ':': // a comment keeps the connection alive
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "id":
				ev.ID = string(value)
			case "data":
				data = append(data, append([]byte(nil), value...))
			}
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("the event stream broke: %w", err)
	}
	return ctx.Err()
}

func (c *Client) send(ctx context.Context, req Request, accept string) (*http.Response, error) {
	base, err := url.Parse(strings.TrimRight(c.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("server URL %q is not an http(s) URL: set --url or AGENTPLANE_URL, e.g. http://127.0.0.1:8080", c.BaseURL)
	}
	var body io.Reader
	if req.Body != nil {
		raw, ok := req.Body.(json.RawMessage)
		if !ok {
			if raw, err = json.Marshal(req.Body); err != nil {
				return nil, fmt.Errorf("encode the request: %w", err)
			}
		}
		body = bytes.NewReader(raw)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, base.String()+req.Path, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", accept+", application/problem+json")
	if c.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		hr.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot reach the server at %s: %w (is it running? start it with: agentplane serve)", base.Host, err)
	}
	return resp, nil
}

func problemOf(resp *http.Response, body []byte) error {
	p := &Problem{Status: resp.StatusCode}
	if err := json.Unmarshal(body, p); err != nil || p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
		p.Detail = strings.TrimSpace(string(body))
		if len(p.Detail) > 200 {
			p.Detail = p.Detail[:200] + "…"
		}
	}
	p.Status = resp.StatusCode
	return p
}

// ClientCredentials asks the server's token endpoint for an access token with the
// client-credentials grant.
func (c *Client) ClientCredentials(ctx context.Context, clientID, secret, scope string) (token string, expires time.Time, err error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	base := strings.TrimRight(c.BaseURL, "/")
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("server URL %q: %w", c.BaseURL, err)
	}
	hr.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("cannot reach the server at %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var tr struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		p := &Problem{Status: resp.StatusCode, Title: "Token refused", Detail: tr.Error}
		if tr.Description != "" {
			p.Detail += ": " + tr.Description
		}
		if resp.StatusCode < 400 {
			p.Status = http.StatusUnauthorized
		}
		return "", time.Time{}, p
	}
	return tr.AccessToken, time.Now().Add(time.Duration(tr.ExpiresIn) * time.Second), nil
}
