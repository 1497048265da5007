package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/telemetry"
)

// MaxRetries is how many times a failed request is sent again.
const MaxRetries = 3

// SecretResolver reads the value of a model's secrets_ref for its tenant,
// checking the operator's policy first (*secrets.Resolver is one).
type SecretResolver interface {
	Resolve(ctx context.Context, tenant, ref string) (string, error)
}

// Options configures a Pool.
type Options struct {
	// Outbound makes the requests: SSRF-checked dialing, trace propagation,
	// credentials applied beneath the tracing. Each model gets its own
	// *http.Client from it, with the model's timeout. Default: a client
	// refusing private addresses.
	Outbound *outbound.Client
	// Secrets resolves auth.secrets_ref at every completion; required for
	// models whose auth is not none.
	Secrets SecretResolver
	// DefaultSecrets, when set, resolves the secret of the server-wide model
	// (model.DefaultID), with tenant "": its reference is the operator's
	// --llm-api-key-ref, allowed for every tenant whatever the allow-list of
	// tenants' references says.
	DefaultSecrets SecretResolver
	// TracerProvider makes the chat spans; default the global provider.
	TracerProvider trace.TracerProvider
	// Metrics counts tokens and times requests; nil records nothing.
	Metrics *telemetry.Metrics
	// CaptureContent puts the messages in the spans (--otel-capture-content).
	CaptureContent bool

	// backoff is the first wait between retries when the model names none
	// (doubled each retry); tests shorten it.
	backoff time.Duration
	// maxWait bounds a Retry-After the model asks for; longer ends the call.
	maxWait time.Duration
}

// Defaults of the unexported Options.
const (
	defaultBackoff = 500 * time.Millisecond
	defaultMaxWait = 2 * time.Minute
)

// Pool gives each model revision its client, made once and kept.
type Pool struct {
	opts   Options
	tracer trace.Tracer

	mu      sync.Mutex
	clients map[string]*client
}

var _ Clients = (*Pool)(nil)

// NewClients returns an empty pool.
func NewClients(opts Options) *Pool {
	if opts.Outbound == nil {
		opts.Outbound = outbound.New(outbound.Options{})
	}
	if opts.TracerProvider == nil {
		opts.TracerProvider = otel.GetTracerProvider()
	}
	if opts.backoff <= 0 {
		opts.backoff = defaultBackoff
	}
	if opts.maxWait <= 0 {
		opts.maxWait = defaultMaxWait
	}
	return &Pool{
		opts:    opts,
		tracer:  telemetry.TracerFrom(opts.TracerProvider, "github.com/agentplane/agentplane/internal/llm"),
		clients: map[string]*client{},
	}
}

// Client returns the client of m's revision: the one made before when the
// revision is the same, else a new one (with a new concurrency bound).
func (p *Pool) Client(m *model.Model) (Client, error) {
	c, err := p.clientOf(m)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// clientOf is Client's *client.
func (p *Pool) clientOf(m *model.Model) (*client, error) {
	if m == nil {
		return nil, errors.New("llm: no model")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.clients[m.ID]; c != nil && c.model.Revision == m.Revision {
		return c, nil
	}
	c, err := p.newClient(m)
	if err != nil {
		return nil, err
	}
	p.clients[m.ID] = c
	return c, nil
}

// client calls one model revision.
type client struct {
	pool  *Pool
	model model.Model
	base  *url.URL
	http  *http.Client
	// sem bounds the requests in flight (nil: no bound).
	sem  chan struct{}
	call provider
}

// provider makes one attempt of a completion in a provider's wire format.
// rec receives what came back over HTTP, whatever the SDK made of it.
type provider interface {
	name() string
	attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error)
}

func (p *Pool) newClient(m *model.Model) (*client, error) {
	mc := *m
	if mc.Timeout <= 0 {
		mc.Timeout = model.DefaultTimeout
	}
	base, err := url.Parse(mc.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("llm: model %s: base_url %q is not an http(s) URL", mc.Name, mc.BaseURL)
	}
	// The API's paths resolve beneath the root's last segment, as the SDKs
	// resolve them, whether a query follows it or not.
	base.Path = strings.TrimRight(base.Path, "/") + "/"
	if base.RawPath != "" {
		base.RawPath = strings.TrimRight(base.RawPath, "/") + "/"
	}
	hc := p.opts.Outbound.HTTPClient()
	if mc.HTTP2PriorKnowledge && base.Scheme == "http" {
		hc = p.opts.Outbound.H2CHTTPClient()
	}
	// An attempt's context bounds it (withTimeout): http.Client.Timeout
	// over a wrapped transport would cost two goroutines a request in
	// flight (net/http's cancellation for transports it does not know).
	hc.Timeout = 0
	c := &client{pool: p, model: mc, base: base, http: hc}
	if mc.MaxConcurrency > 0 {
		c.sem = make(chan struct{}, mc.MaxConcurrency)
	}
	switch mc.Provider {
	case model.OpenAI, "":
		c.call = newOpenAI(c)
	case model.Anthropic:
		c.call = newAnthropic(c)
	default:
		return nil, fmt.Errorf("llm: model %s: provider %q is not openai or anthropic", mc.Name, mc.Provider)
	}
	return c, nil
}

// Complete implements Client: it resolves the secret, then sends the request
// until it is answered, fails for good or has been retried MaxRetries times,
// inside a chat span. When ctx ends after the provider read the request and
// before its answer came, the provider bills the input all the same: the
// response then holds Usage alone, its input tokens estimated from the
// request (EstimateTokens) and no output, none having come, with the
// context's error.
func (c *client) Complete(ctx context.Context, req agent.ChatRequest) (resp agent.ChatResponse, err error) {
	start := time.Now()
	ctx, span := c.startSpan(ctx, req)
	defer func() { c.observe(ctx, span, start, resp, err) }()

	ctx, secret, err := c.authenticate(ctx)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	// abandoned reports an attempt whose request the provider read and
	// whose answer ctx's end left unread.
	abandoned := false
	err = c.attempts(ctx, secret, func(rec *exchange) error {
		traced, wrote := traceWrite(ctx)
		var err error
		resp, err = c.once(traced, req, rec)
		abandoned = err != nil && ctx.Err() != nil && wrote() && rec.status < 400
		return err
	})
	switch {
	case err == nil:
		return resp, nil
	case abandoned:
		return agent.ChatResponse{Usage: &agent.Usage{InputTokens: EstimateTokens(requestChars(req))}}, err
	}
	return agent.ChatResponse{}, err
}

// traceWrite returns ctx traced so that wrote reports whether a request
// made with it was written whole to the provider: from then on, the
// provider has read what it bills.
func traceWrite(ctx context.Context) (traced context.Context, wrote func() bool) {
	var w atomic.Bool
	traced = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			w.Store(true)
		}
	}})
	return traced, w.Load
}

// observe ends a completion's span and records its metrics.
func (c *client) observe(ctx context.Context, span trace.Span, start time.Time, resp agent.ChatResponse, err error) {
	c.endSpan(ctx, span, resp, err)
	var in, out int64
	if resp.Usage != nil {
		in, out = resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	c.pool.opts.Metrics.ObserveLLM(c.model.Name, in, out, time.Since(start))
}

// authenticate resolves the model's secret and returns ctx carrying the
// credentials made of it, for the model's origin only.
func (c *client) authenticate(ctx context.Context) (context.Context, string, error) {
	secret, err := c.secret(ctx)
	if err != nil {
		return ctx, "", err
	}
	if apply := c.credentials(secret); apply != nil {
		ctx = outbound.WithCredentials(ctx, c.base, apply)
	}
	return ctx, secret, nil
}

// final marks an attempt's error as the end: attempts returns it as it is,
// neither classified nor retried.
type final struct{ err error }

func (f final) Error() string { return f.err.Error() }

// attempts calls try until it succeeds, fails for good or has been retried
// MaxRetries times, waiting between as the model asks or backing off. A
// failure is returned as its *agent.LLMError (secret removed), the
// context's end as the context's error.
func (c *client) attempts(ctx context.Context, secret string, try func(rec *exchange) error) error {
	for retry := 0; ; retry++ {
		var rec exchange
		err := try(&rec)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fe final
		if errors.As(err, &fe) {
			return fe.err
		}
		f := c.failure(err, &rec, secret)
		if !f.retry || retry == MaxRetries {
			return f.err
		}
		wait := f.wait
		if wait < 0 {
			wait = backoff(c.pool.opts.backoff, retry)
		}
		if wait > c.pool.opts.maxWait {
			return note(f.err, "it asked to be retried after "+seconds(wait.Round(time.Millisecond))+", longer than agentplane waits")
		}
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
			return note(f.err, "a retry after "+seconds(wait.Round(time.Millisecond))+" would pass the workflow's deadline")
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// once makes one attempt within the model's concurrency bound.
func (c *client) once(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	defer release()
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.call.attempt(ctx, req, rec)
}

// withTimeout bounds one attempt, from its request to the end of its
// answer, by the model's timeout. Its end is a timeout (a net.Error whose
// Timeout is true) to failure, as the outer context's is not.
func (c *client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.model.Timeout)
}

// acquire takes a place within the model's concurrency bound, waiting for
// one until ctx ends; release gives it back.
func (c *client) acquire(ctx context.Context) (release func(), err error) {
	if c.sem == nil {
		return func() {}, nil
	}
	select {
	case c.sem <- struct{}{}:
		return func() { <-c.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// secret resolves the model's secret for this completion.
func (c *client) secret(ctx context.Context) (string, error) {
	a := c.model.Auth
	if a.Type == "" || a.Type == model.AuthNone {
		return "", nil
	}
	if a.SecretsRef == "" {
		return "", &agent.LLMError{Message: fmt.Sprintf("model %s: auth %s needs a secrets_ref", c.model.Name, a.Type)}
	}
	res, tenant := c.pool.opts.Secrets, c.model.Tenant
	if c.model.ID == model.DefaultID && c.pool.opts.DefaultSecrets != nil {
		res, tenant = c.pool.opts.DefaultSecrets, ""
	}
	if res == nil {
		return "", &agent.LLMError{Message: fmt.Sprintf("model %s: no secrets resolver is configured for its secrets_ref", c.model.Name)}
	}
	v, err := res.Resolve(ctx, tenant, a.SecretsRef)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		// The resolver's errors name the reference, never the value.
		return "", &agent.LLMError{Message: fmt.Sprintf("model %s: %v", c.model.Name, err)}
	}
	return v, nil
}

// credentials returns how to authenticate a request with secret, or nil.
func (c *client) credentials(secret string) func(*http.Request) {
	a := c.model.Auth
	switch a.Type {
	case model.AuthBearer:
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) }
	case model.AuthAPIKey:
		h := cmp.Or(a.Header, model.DefaultHeader(c.model.Provider))
		if strings.EqualFold(h, "Authorization") {
			return func(r *http.Request) { r.Header.Set(h, "Bearer "+secret) }
		}
		return func(r *http.Request) { r.Header.Set(h, secret) }
	}
	return nil
}

// backoff is the wait before retry n (from 0) when the model named none:
// first doubled n times, less up to a quarter at random, so that callers
// failed together do not all come back at once.
func backoff(first time.Duration, n int) time.Duration {
	d := first << n
	return d - rand.N(d/4+1)
}

// note adds why no retry was made to an error.
func note(e *agent.LLMError, why string) *agent.LLMError {
	return &agent.LLMError{Status: e.Status, Message: e.Message + " (not retried: " + why + ")"}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
