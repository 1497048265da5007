package llm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/model"
)

// maxRelayed bounds what is read of a relayed answer, streamed or not.
const maxRelayed = 32 << 20

// defaultAnthropicVersion is the anthropic-version sent when the agent
// sends none (the Messages API requires one).
const defaultAnthropicVersion = "2023-06-01"

// RelayRequest is an agent's request to relay to a model, in api's wire
// format.
type RelayRequest struct {
	// API is ChatCompletions, Responses or Messages.
	API string
	// Body is the agent's JSON body; its "model" is replaced by the model's
	// provider id, nothing else changes, except that a streamed chat
	// completion gets stream_options.include_usage=true so usage is known.
	Body []byte
	// Header holds the provider headers to pass on: anthropic-version,
	// anthropic-beta and openai-beta; no other is sent.
	Header http.Header
}

// RelayResponse is the model's answer to a relayed request.
type RelayResponse struct {
	Status int
	// Header holds the answer's content-type and the provider's request id
	// header(s) only.
	Header http.Header
	// Body is a non-streamed answer, or any error answer, as the provider
	// sent it (an error answer echoing the model's secret has it redacted).
	Body []byte
	// Events are a streamed answer's SSE events as passed on to send, each
	// exactly as received: its lines without the blank line that ends it.
	// A usage chunk the relay asked for and the agent did not is read but
	// neither passed on nor kept.
	Events [][]byte
	// Usage, FinishReason (in the OpenAI vocabulary: stop, tool_calls,
	// length, content_filter) and ProviderModel are read from the answer.
	Usage         agent.Usage
	FinishReason  string
	ProviderModel string
	// Cut reports an answer that ended before its end, with Relay's error
	// saying why: a stream cut short after events were sent, or a request
	// the provider read whose answer the context's end left unread before
	// any event came (no Events then, and Status 0 unless its headers
	// came). Its Usage is what the provider reported of it, and what it
	// did not is estimated (EstimateTokens): InputEstimated from the
	// request, OutputEstimated from the answer relayed (none at all when
	// no event came).
	Cut                             bool
	InputEstimated, OutputEstimated bool

	// read is what the relay read of the request it sent and of the
	// answer, kept for Normalize, which would read them again, and which
	// lets go of it.
	read *relayRead
}

// relayRead is a relayed exchange as the relay read it: the request body
// it was given, that body as a ChatRequest, and the answer as a
// ChatResponse (nil when it read none that Normalize would read alike).
type relayRead struct {
	body   []byte
	asked  agent.ChatRequest
	answer *agent.ChatResponse
}

// Relayer relays raw provider requests; *Pool is one.
type Relayer interface {
	// Relay sends req to m's provider with m's credentials and provider
	// model id, and returns its answer. A streamed answer ("stream": true)
	// is passed to send event by event as each arrives, and kept in
	// Events. A provider's error answer (4xx, or 5xx and 429 once retries
	// are spent) is a RelayResponse with its status and body. The error is
	// an *agent.LLMError or the context's error when no answer came, or
	// send's own error; when a stream fails after events were sent, or
	// ctx ends after the provider read the request, the RelayResponse
	// holds what came and the tokens it cost (Cut), and the error says why
	// it ended.
	Relay(ctx context.Context, m *model.Model, req RelayRequest, send func(event []byte) error) (*RelayResponse, error)
}

var _ Relayer = (*Pool)(nil)

// relayHeaders are the agent's headers passed on to the provider.
var relayHeaders = []string{"Anthropic-Version", "Anthropic-Beta", "Openai-Beta"}

// answerHeaders are the provider's headers passed back.
var answerHeaders = []string{"Content-Type", "X-Request-Id", "Request-Id"}

// Relay implements Relayer through the client of m's revision: the same
// secrets, credentials, outbound client, timeout, retries, concurrency
// bound, chat span and metrics as Complete. Retries (connection errors,
// 429 and 5xx, honouring Retry-After) happen only before an event was
// sent.
func (p *Pool) Relay(ctx context.Context, m *model.Model, req RelayRequest, send func(event []byte) error) (*RelayResponse, error) {
	c, err := p.clientOf(m)
	if err != nil {
		return nil, &agent.LLMError{Message: err.Error()}
	}
	return c.relay(ctx, req, send)
}

// relayPaths are the paths of each API under a model's base URL, and the
// provider that speaks it.
var relayPaths = map[string]struct{ provider, path string }{
	ChatCompletions: {"openai", "chat/completions"},
	Responses:       {"openai", "responses"},
	Messages:        {"anthropic", "v1/messages"},
}

// endpoints names the gateway endpoints of each provider's models.
var endpoints = map[string]string{
	"openai":    "the gateway's OpenAI endpoints (…/openai/v1/chat/completions or …/openai/v1/responses)",
	"anthropic": "the gateway's Anthropic endpoint (…/anthropic/v1/messages)",
}

// Mismatch says why a request in api's wire format cannot go to m: the
// relay speaks no such API, or m's provider speaks another; "" when it can.
func Mismatch(api string, m *model.Model) string {
	route, ok := relayPaths[api]
	provider := cmp.Or(m.Provider, model.OpenAI) // as newClient reads it
	switch {
	case !ok:
		return fmt.Sprintf("wire API %q is not %s, %s or %s", api, ChatCompletions, Responses, Messages)
	case provider != route.provider:
		return fmt.Sprintf("model %s is an %s model: send its requests to %s", m.Name, provider, endpoints[provider])
	}
	return ""
}

// relay sends req until answered, within a chat span.
func (c *client) relay(ctx context.Context, req RelayRequest, send func([]byte) error) (out *RelayResponse, err error) {
	if why := Mismatch(req.API, &c.model); why != "" {
		return nil, &agent.LLMError{Message: why}
	}
	route := relayPaths[req.API]
	rb, err := prepareBody(req.API, req.Body, c.model.Model)
	if err != nil {
		return nil, &agent.LLMError{Message: "the request body is " + err.Error()}
	}
	asked, askedErr := wire.Request(req.API, req.Body)
	start := time.Now()
	ctx, span := c.startSpan(ctx, asked)
	var answer agent.ChatResponse
	var spanErr error
	defer func() { c.observe(ctx, span, start, answer, spanErr) }()

	ctx, secret, err := c.authenticate(ctx)
	if err != nil {
		spanErr = err
		return nil, err
	}
	target := c.base.ResolveReference(&url.URL{Path: route.path}).String()
	sent := false
	// abandoned reports an attempt whose request the provider read and
	// whose answer ctx's end left unread.
	abandoned := false
	var withheld []byte
	err = c.attempts(ctx, secret, func(rec *exchange) error {
		traced, wrote := traceWrite(ctx)
		var err error
		out, withheld, err = c.relayOnce(traced, target, req, rb, rec, func(ev []byte) error {
			sent = true
			if err := send(ev); err != nil {
				return final{err}
			}
			return nil
		})
		abandoned = err != nil && !errors.Is(err, errRetryStatus) && ctx.Err() != nil && wrote()
		var fe final
		if err != nil && sent && !errors.As(err, &fe) {
			return final{c.failure(err, rec, secret).err}
		}
		return err
	})
	var le *agent.LLMError
	switch {
	case err == nil:
	case errors.As(err, &le) && le.Status >= 400 && out != nil && out.Status == le.Status:
		// An error status the retries did not get past: the provider's answer.
		err = nil
	case sent:
		// The model produced what it sent, and its provider bills it.
		spanErr = err
		events := withUsage(out.Events, withheld)
		answer, _ = wire.Answer(req.API, nil, events)
		out.Cut, out.ProviderModel = true, answer.Model
		out.Usage, out.InputEstimated, out.OutputEstimated = cutUsage(req.API, req.Body, answer, events)
		answer.Usage = &out.Usage
		return out, err
	case abandoned:
		// No event came, but the provider read the request, and bills
		// its input: estimated from the request, with no output, as none
		// was seen.
		spanErr = err
		if out == nil {
			out = &RelayResponse{Header: http.Header{}}
		}
		out.Cut = true
		out.Usage, out.InputEstimated, _ = cutUsage(req.API, req.Body, agent.ChatResponse{}, nil)
		out.OutputEstimated = true
		answer.Usage = &out.Usage
		return out, err
	default:
		spanErr = err
		return nil, err
	}
	if out.Status >= 400 {
		// The provider's words go to the agent, never the model's secret.
		out.Body = []byte(redact(string(out.Body), secret))
		spanErr = &agent.LLMError{Status: out.Status, Message: providerMessage(&exchange{status: out.Status, header: out.Header, body: out.Body})}
		return out, nil
	}
	answer, answerErr := wire.Answer(req.API, out.Body, withUsage(out.Events, withheld))
	if answer.Usage != nil {
		out.Usage = *answer.Usage
	}
	out.FinishReason, out.ProviderModel = answer.FinishReason, answer.Model
	if askedErr == nil {
		out.read = &relayRead{body: req.Body, asked: asked}
		if answerErr == nil && withheld == nil {
			// A usage chunk withheld from the events is read here and
			// not by Normalize, which takes the usage from out.Usage.
			out.read.answer = &answer
		}
	}
	return out, nil
}

// withUsage are a stream's events with the usage chunk the relay withheld
// from them, if any.
func withUsage(events [][]byte, withheld []byte) [][]byte {
	if withheld == nil {
		return events
	}
	return append(events[:len(events):len(events)], withheld)
}

// errRetryStatus fails an attempt answered with a status worth retrying.
var errRetryStatus = errors.New("retryable status")

// relayOnce makes one attempt within the model's concurrency bound,
// holding its place until the answer is read. Each event of a stream goes
// to send as it arrives, but the usage chunk the relay asked for, which is
// returned as withheld.
func (c *client) relayOnce(ctx context.Context, target string, req RelayRequest, rb relayBody, rec *exchange, send func([]byte) error) (out *RelayResponse, withheld []byte, err error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(rb.body))
	if err != nil {
		return nil, nil, &agent.LLMError{Message: "the request could not be made: " + err.Error()}
	}
	for k, v := range c.model.Headers {
		hr.Header.Set(k, v)
	}
	for _, k := range relayHeaders {
		if vs := req.Header.Values(k); len(vs) > 0 {
			hr.Header[k] = append([]string(nil), vs...)
		}
	}
	if req.API == Messages && hr.Header.Get("Anthropic-Version") == "" {
		hr.Header.Set("Anthropic-Version", defaultAnthropicVersion)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if rb.stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	res, err := c.http.Do(hr)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = res.Body.Close() }()
	rec.status, rec.header = res.StatusCode, res.Header
	out = &RelayResponse{Status: res.StatusCode, Header: http.Header{}}
	for _, k := range answerHeaders {
		if vs := res.Header.Values(k); len(vs) > 0 {
			out.Header[k] = append([]string(nil), vs...)
		}
	}
	body := &limitedBody{ReadCloser: res.Body, left: maxRelayed}
	if res.StatusCode >= 400 || !eventStream(res.Header) {
		if out.Body, err = io.ReadAll(body); err != nil {
			return nil, nil, err
		}
		if res.StatusCode >= 400 {
			rec.body = out.Body
			if retryable(res.StatusCode) {
				return out, nil, errRetryStatus
			}
		}
		return out, nil, nil
	}
	done := false
	err = readEvents(body, func(ev []byte) error {
		done = done || lastEvent(req.API, ev)
		if rb.usageAdded && usageChunk(ev) {
			withheld = ev
			return nil
		}
		out.Events = append(out.Events, ev)
		return send(ev)
	})
	if err == nil && !done {
		err = io.ErrUnexpectedEOF
	}
	return out, withheld, err
}

// eventStream reports whether a response is a text/event-stream.
func eventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}
