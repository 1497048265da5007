// Package llmtest serves scripted models for tests: real HTTP servers on
// loopback that speak OpenAI's Chat Completions and Responses and
// Anthropic's Messages wire formats, streamed (server-sent events) or not,
// whose answers a script decides. A script is a function of
// the request, decoded into the agent's provider-neutral shape; the server
// records and counts every request.
//
//	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(
//		llmtest.Calls(llmtest.Call("payments__get", `{"id":"p1"}`)),
//		llmtest.Text("The payment went through."),
//	))
//	m := srv.Model("helper") // or a *model.Model with BaseURL: srv.URL
package llmtest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/model"
)

// FinalAnswerTool is the tool agentplane forces on an Anthropic model for a
// structured answer; its input is the answer.
const FinalAnswerTool = "final_answer"

// Request is one request a scripted model received.
type Request struct {
	// N numbers the server's requests from 1.
	N int
	// Model is the provider's model id the request named.
	Model        string
	Messages     []agent.ChatMessage
	Tools        []agent.ChatTool
	Temperature  *float64
	MaxTokens    int64
	OutputSchema json.RawMessage
	// ToolChoice is Anthropic's tool_choice as sent (nil when absent).
	ToolChoice json.RawMessage
	// Header is the request's headers (credentials included: a test may
	// check them).
	Header http.Header
	// Body is the request body as sent.
	Body json.RawMessage
	// Stream is the body's "stream": true: the answer is server-sent events.
	Stream bool
	// ProtoMajor is the request's HTTP major version: 1, or 2 for HTTP/2.
	ProtoMajor int
}

// Last is the request's last message (a zero message when it has none): the
// goal, or the answer of the tool the model called last.
func (r Request) Last() agent.ChatMessage {
	if len(r.Messages) == 0 {
		return agent.ChatMessage{}
	}
	return r.Messages[len(r.Messages)-1]
}

// Answer is what the scripted model answers.
type Answer struct {
	// Text is the assistant's text.
	Text string
	// ToolCalls are the calls it asks for (an id is made when empty).
	ToolCalls []agent.ChatToolCall
	// JSON is a structured answer: OpenAI's content, or the input of
	// Anthropic's final_answer tool call.
	JSON json.RawMessage
	// FinishReason overrides the provider's reason (OpenAI's finish_reason
	// or Anthropic's stop_reason); by default the one that fits the answer.
	FinishReason string
	// InputTokens and OutputTokens are the usage reported (default 10, 5);
	// NoUsage leaves usage out.
	InputTokens, OutputTokens int64
	NoUsage                   bool
	// ID and Model name the response (defaults: a numbered id, the model
	// the request named).
	ID, Model string

	// Status answers with an error status: the provider's error body with
	// ErrorMessage (or Raw when set).
	Status       int
	ErrorMessage string
	// Header is added to the response (Retry-After, retry-after-ms, …).
	Header http.Header
	// Raw replaces the body, sent as RawType (default text/html).
	Raw, RawType string
	// Choiceless answers an OpenAI completion with no choices.
	Choiceless bool
	// Truncate sends half the body (half the events of a stream), then
	// closes the connection.
	Truncate bool
	// Delay waits before answering (ending early when the client goes).
	Delay time.Duration
	// HoldLast, in a streamed answer, holds its last event until the
	// channel is closed (or the client goes); the others are sent at once.
	HoldLast <-chan struct{}
}

// Script decides each answer from the request.
type Script func(Request) Answer

// Text is a final text answer.
func Text(s string) Answer { return Answer{Text: s} }

// JSON is a structured final answer.
func JSON(v string) Answer { return Answer{JSON: json.RawMessage(v)} }

// Call is a tool call of name with the JSON text args.
func Call(name, args string) agent.ChatToolCall {
	return agent.ChatToolCall{Name: name, Arguments: args}
}

// Calls is an answer asking for calls.
func Calls(calls ...agent.ChatToolCall) Answer { return Answer{ToolCalls: calls} }

// Error is an error status with the provider's error body saying message.
func Error(status int, message string) Answer {
	return Answer{Status: status, ErrorMessage: message}
}

// Sequence answers the nth request with the nth answer, and every request
// after the last with the last.
func Sequence(answers ...Answer) Script {
	return func(r Request) Answer {
		if len(answers) == 0 {
			return Text("")
		}
		return answers[min(r.N, len(answers))-1]
	}
}

// Server is a scripted model's server.
type Server struct {
	*httptest.Server
	// URL is the model's base_url: the API root as the provider documents
	// it (".../v1" for OpenAI, the server's root for Anthropic).
	URL string
	// CountOnly keeps no requests, only their number (for benchmarks with
	// many requests); set it before the first request.
	CountOnly bool

	provider string
	script   Script
	mu       sync.Mutex
	n        int
	reqs     []Request
	conns    int
}

// Option changes how a scripted model's server is served.
type Option func(*serving)

type serving struct{ h2c, tls bool }

// H2C serves unencrypted HTTP/2 only, with prior knowledge (RFC 9113
// §3.3): HTTP/1 is off.
func H2C() Option { return func(s *serving) { s.h2c = true } }

// TLS serves https, HTTP/2 and HTTP/1.1 negotiated by ALPN, with the
// certificate of the httptest server (Server.Certificate).
func TLS() Option { return func(s *serving) { s.tls = true } }

// Model is a model of the given registered name served by s, without
// authentication, its provider model id "test-model".
func (s *Server) Model(name string) *model.Model {
	return &model.Model{
		ID: "mdl_" + name, Name: name, Provider: s.provider, BaseURL: s.URL, Model: "test-model",
		Auth: model.Auth{Type: model.AuthNone}, Timeout: model.DefaultTimeout, Revision: 1,
	}
}

// Count is how many requests the server has received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Conns is how many connections the server has accepted.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Requests are the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// record numbers and keeps a request, and returns the script's answer.
func (s *Server) record(r Request) (Request, Answer) {
	s.mu.Lock()
	s.n++
	r.N = s.n
	if !s.CountOnly {
		s.reqs = append(s.reqs, r)
	}
	s.mu.Unlock()
	a := s.script(r)
	if a.InputTokens == 0 && a.OutputTokens == 0 {
		a.InputTokens, a.OutputTokens = 10, 5
	}
	if a.Model == "" {
		a.Model = r.Model
	}
	for i := range a.ToolCalls {
		if a.ToolCalls[i].ID == "" {
			a.ToolCalls[i].ID = "call_" + strconv.Itoa(r.N) + "_" + strconv.Itoa(i+1)
		}
	}
	return r, a
}

// wireFormat is how a provider's server reads requests and writes answers.
type wireFormat struct {
	path string
	// decode reads a request body; a non-empty refusal answers 400.
	decode    func(body json.RawMessage) (req Request, refusal string)
	errorBody func(status int, message string) any
	answer    func(Request, Answer) any
	// stream is the events of a streamed answer; done ends them with
	// "data: [DONE]".
	stream func(Request, Answer) []event
	done   bool
}

// decode reads a request body of api in the chat shape; refusal says why
// a body that is not one is refused.
func decode(api string, body json.RawMessage, refusal string) (Request, string) {
	cr, err := wire.Request(api, body)
	if err != nil {
		return Request{}, refusal
	}
	return Request{Model: cr.Model, Messages: cr.Messages, Tools: cr.Tools, Temperature: cr.Temperature,
		MaxTokens: cr.MaxOutputTokens, OutputSchema: cr.OutputSchema}, ""
}

// newServer starts a server of the wire formats answering with script,
// served as opts say.
func newServer(t testing.TB, provider string, script Script, opts []Option, wfs ...wireFormat) *Server {
	t.Helper()
	s := &Server{provider: provider, script: script}
	mux := http.NewServeMux()
	for _, wf := range wfs {
		mux.HandleFunc("POST "+wf.path, func(w http.ResponseWriter, r *http.Request) { s.serve(wf, w, r) })
	}
	var how serving
	for _, o := range opts {
		o(&how)
	}
	s.Server = httptest.NewUnstartedServer(mux)
	s.Server.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	switch {
	case how.tls:
		s.Server.EnableHTTP2 = true
		s.Server.StartTLS()
	case how.h2c:
		s.Server.Config.Protocols = new(http.Protocols)
		s.Server.Config.Protocols.SetUnencryptedHTTP2(true)
		s.Server.Start()
	default:
		s.Server.Start()
	}
	t.Cleanup(s.Server.Close)
	return s
}

// serve records a request and sends the script's answer in wf.
func (s *Server) serve(wf wireFormat, w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	refusal := "the body is not JSON"
	var req Request
	if json.NewDecoder(r.Body).Decode(&body) == nil {
		req, refusal = wf.decode(body)
	}
	if refusal != "" {
		write(w, Answer{}, http.StatusBadRequest, wf.errorBody(http.StatusBadRequest, refusal))
		return
	}
	var opts struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &opts)
	req.Header, req.Body, req.Stream, req.ProtoMajor = r.Header.Clone(), body, opts.Stream, r.ProtoMajor
	req, a := s.record(req)
	if !wait(r, a) {
		return
	}
	if a.Status != 0 {
		write(w, a, a.Status, wf.errorBody(a.Status, a.ErrorMessage))
		return
	}
	if req.Stream && a.Raw == "" {
		writeStream(w, r, a, wf.stream(req, a), wf.done)
		return
	}
	write(w, a, http.StatusOK, wf.answer(req, a))
}

// wait sleeps a's delay, or until the client goes away; it reports whether
// to answer.
func wait(r *http.Request, a Answer) bool {
	if a.Delay <= 0 {
		return true
	}
	t := time.NewTimer(a.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// write sends status and v as JSON, or what a's Raw and Truncate say.
func write(w http.ResponseWriter, a Answer, status int, v any) {
	for k, vs := range a.Header {
		for _, x := range vs {
			w.Header().Add(k, x)
		}
	}
	body, _ := json.Marshal(v)
	ctype := "application/json"
	if a.Raw != "" {
		body, ctype = []byte(a.Raw), a.RawType
		if ctype == "" {
			ctype = "text/html; charset=utf-8"
		}
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if a.Truncate {
		body = body[:len(body)/2]
	}
	_, _ = w.Write(body)
}

// errorType is the error type both providers give a status; server names
// their type for 5xx.
func errorType(status int, server string) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status >= 500:
		return server
	}
	return "invalid_request_error"
}
