// Package call executes one operation of a registered tool: it builds the
// real request from the operation's binding (OpenAPI, GraphQL or SOAP) and
// the call's arguments, authenticates it with the tool's secret, sends it
// through the hardened outbound client with retries where they are safe, and
// returns the answer as JSON together with a record of the request from which
// every credential is removed.
package call

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
)

// Defaults of Options.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultRetries          = 2
	DefaultBackoff          = 100 * time.Millisecond
	DefaultCacheSize        = 1000
	// maxRetryAfter is the longest Retry-After a call waits for.
	maxRetryAfter = 5 * time.Second
)

// Options configures an Executor.
type Options struct {
	// Client sends every request; required.
	Client *outbound.Client
	// Secrets resolves the tools' secrets_ref; required for tools with auth.
	Secrets *secrets.Resolver
	// Timeout bounds a whole call, retries included; default 30s.
	Timeout time.Duration
	// MaxResponseBytes limits an answer; default 1 MiB.
	MaxResponseBytes int64
	// Retries is how many times a failed call that is safe to repeat is
	// retried; default 2. Negative means none.
	Retries int
	// Backoff is the wait before the first retry, multiplied by 4 for each
	// next one; default 100ms.
	Backoff time.Duration
	// CacheSize bounds the OAuth tokens and, apart, the compiled request
	// schemas kept in memory, each keyed by tool revision; the least
	// recently used go first. Default 1000.
	CacheSize int
	// Audit, when set, receives one record per call.
	Audit audit.Store
	// Now is the clock of audit records; default time.Now.
	Now func() time.Time
	// Limiter shares tools' rate and concurrency limits; default in process.
	// A RedisLimiter shares them across replicas.
	Limiter Limiter
	// Metrics, when set, receives per-tool observations.
	Metrics Metrics
}

// Error is a call that failed at or on the way to the API: an error status,
// a failure the API reported in its answer, a connection error, a time-out.
type Error struct {
	// Status is the API's HTTP status, 0 when no answer arrived.
	Status int
	// Code is the stable error_code when the status and cause do not tell
	// it (circuit_open, rate_limited, timeout); see ErrorCode.
	Code string
	// Retryable says whether repeating the call later may succeed.
	Retryable bool
	Msg       string
	// Err is the cause, if any.
	Err error
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode is the stable error_code of the failure (tool.Code*).
func (e *Error) ErrorCode() string {
	switch {
	case e.Code != "":
		return e.Code
	case errors.Is(e.Err, context.DeadlineExceeded):
		return tool.CodeTimeout
	case e.Status == http.StatusTooManyRequests:
		return tool.CodeRateLimited
	case e.Status != 0:
		return tool.CodeUpstream
	case e.Err != nil:
		return tool.CodeTransport
	}
	return tool.CodeUpstream
}

// Executor calls tools' operations. It is safe for concurrent use.
type Executor struct {
	opts   Options
	http   *http.Client
	tokens *lru.Cache[tokenKey, *tokenEntry]
	schema schemaCache
	// breakers are the tools' circuits, this replica's own.
	breakers breakers
}

// New returns an executor with opts, defaults filled in.
func New(opts Options) *Executor {
	if opts.Client == nil {
		opts.Client = outbound.New(outbound.Options{})
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	switch {
	case opts.Retries == 0:
		opts.Retries = DefaultRetries
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Limiter == nil {
		opts.Limiter = NewMemoryLimiter()
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	hc := opts.Client.HTTPClient()
	hc.Timeout = 0 // the call's context bounds it
	checked := hc.CheckRedirect
	hc.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		// A credential in a custom header or the query must not follow a
		// redirect to another origin: stop and answer with the redirect.
		if r.URL.Scheme != via[0].URL.Scheme || r.URL.Host != via[0].URL.Host {
			return http.ErrUseLastResponse
		}
		return checked(r, via)
	}
	tokens, _ := lru.New[tokenKey, *tokenEntry](opts.CacheSize) // errors only for a size under 1
	return &Executor{opts: opts, http: hc, tokens: tokens, schema: newSchemaCache(opts.CacheSize), breakers: breakers{metrics: opts.Metrics}}
}

// Forget drops what the executor keeps of a tool (its OAuth tokens, and with
// them its client secret; its compiled schemas), as its update or deletion
// makes them useless. Another replica's update changes the revision the
// entries are keyed by, and its deletion leaves them to the caches' bound.
func (e *Executor) Forget(toolID string) {
	for _, k := range e.tokens.Keys() {
		if k.tool == toolID {
			e.tokens.Remove(k)
		}
	}
	e.schema.forget(toolID)
	e.breakers.forget(toolID)
}

var tracer = telemetry.Tracer("github.com/agentplane/agentplane/internal/tool/call")

// Call calls req's operation. Bad arguments are problem.ValidationFailed; a
// refused address problem.URLNotAllowed; a refused secrets_ref
// problem.SecretRefNotAllowed; everything that goes wrong at the API is an
// *Error, returned with the result so far (status and body of an error
// answer included).
func (e *Executor) Call(ctx context.Context, req tool.CallRequest) (tool.CallResult, error) {
	if req.Tool == nil || req.Operation == nil {
		return tool.CallResult{}, errors.New("call: a tool and an operation are required")
	}
	ctx, span := tracer.Start(ctx, "tool.call "+req.Tool.Name+"."+req.Operation.ID,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("agentplane.tool.id", req.Tool.ID),
			attribute.String("agentplane.tool.operation", req.Operation.ID),
		))
	defer span.End()
	lim := req.Tool.EffectiveLimits(req.Operation.ID)
	timeout := e.opts.Timeout
	if lim != nil && lim.Timeout > 0 {
		timeout = lim.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	start := e.opts.Now()
	res, err := e.call(ctx, req, lim)
	res.Duration = e.opts.Now().Sub(start)
	span.SetAttributes(attribute.Int("agentplane.tool.attempts", res.Attempts))
	code := tool.ErrorCode(err)
	if err != nil {
		span.SetStatus(codes.Error, redact.TextIn(ctx, err.Error()))
		span.SetAttributes(attribute.String("error.type", code))
	}
	if e.opts.Metrics != nil {
		e.opts.Metrics.ObserveToolCall(req.Tool.ID, code, res.Attempts, res.Duration)
	}
	if res.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", res.Status))
	}
	if aerr := e.audit(ctx, req, res, err, start); aerr != nil {
		return res, errors.Join(err, aerr)
	}
	return res, err
}

func (e *Executor) call(ctx context.Context, req tool.CallRequest, lim *tool.Effective) (tool.CallResult, error) {
	if req.Operation.MCP != nil {
		if lim == nil {
			return e.callMCP(ctx, req)
		}
		done, err := e.enter(ctx, req.Tool, lim)
		if err != nil {
			return tool.CallResult{}, err
		}
		res, err := e.callMCP(ctx, req)
		done(res.Status, err)
		return res, err
	}
	p, err := e.prepare(req)
	if err != nil {
		return tool.CallResult{}, err
	}
	if req.Operation.Kind == tool.Write && req.Tool.IdempotencySupport && req.IdempotencyKey != "" {
		p.header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	res := tool.CallResult{Request: p.record(req.Tool.Auth)}
	if _, err := e.opts.Client.CheckURL(p.url.String(), false); err != nil {
		return res, err
	}
	auth, err := e.authenticate(ctx, req)
	if err != nil {
		return res, err
	}
	safe := req.Operation.Kind == tool.Read || (req.Tool.IdempotencySupport && req.IdempotencyKey != "")
	span := trace.SpanFromContext(ctx)
	for {
		var done func(int, error)
		if lim != nil {
			if done, err = e.enter(ctx, req.Tool, lim); err != nil {
				return res, err
			}
		}
		res.Attempts++
		a, err := e.send(ctx, p, auth)
		res.Status = a.status
		if err == nil {
			body, fault := p.read(a.contentType, a.body)
			res.Body = body
			err = answerError(a.status, a.statusText, fault)
			if ce, ok := err.(*Error); ok && p.code != "" {
				ce.Code = p.code
			}
			if a.status == http.StatusUnauthorized && auth != nil && auth.token != nil {
				auth.token.invalidate()
			}
		}
		if done != nil {
			done(a.status, err)
		}
		wait, again := e.retryWait(ctx, err, a, safe, res.Attempts, lim)
		if !again {
			return res, err
		}
		span.AddEvent("retry", trace.WithAttributes(attribute.Int("agentplane.tool.attempt", res.Attempts),
			attribute.Int("http.response.status_code", a.status), attribute.String("error.type", tool.ErrorCode(err)),
			attribute.Int64("agentplane.tool.retry_wait_ms", wait.Milliseconds())))
		if err := sleep(ctx, wait); err != nil {
			return res, err
		}
	}
}

// answerError is the error of an answer: its status when not 2xx, else the
// failure the API reported in the body, else nil.
func answerError(status int, statusText, fault string) error {
	if status >= 200 && status <= 299 {
		if fault != "" {
			return &Error{Status: status, Msg: fault}
		}
		return nil
	}
	msg := "the API answered " + statusText
	if fault != "" {
		msg += ": " + fault
	}
	return &Error{Status: status, Retryable: retryableStatus(status), Msg: msg}
}

func retryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryWait says whether to retry after err and how long to wait first.
func (e *Executor) retryWait(ctx context.Context, err error, a answer, safe bool, attempts int, lim *tool.Effective) (time.Duration, bool) {
	var ce *Error
	if err == nil || !safe || ctx.Err() != nil || !errors.As(err, &ce) {
		return 0, false
	}
	retries, retryable, longest := e.opts.Retries, ce.Retryable, maxRetryAfter
	if lim != nil && lim.Retries != nil {
		retries = lim.Retries.Max
		if ce.Status != 0 {
			on := lim.Retries.On
			if len(on) == 0 {
				on = tool.DefaultRetryOn
			}
			retryable = slices.Contains(on, ce.Status)
		}
	}
	if lim != nil {
		// A tool with limits waits as long as its own time allows.
		longest = max(longest, lim.Timeout)
	}
	if attempts > retries || !retryable {
		return 0, false
	}
	wait := backoff(e.opts.Backoff, attempts)
	if a.retryAfter > 0 {
		if a.retryAfter > longest {
			return 0, false
		}
		wait = a.retryAfter
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, false
	}
	return wait, true
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &Error{Msg: "the call " + reason(ctx.Err()), Err: ctx.Err()}
	case <-t.C:
		return nil
	}
}

func reason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return "was canceled"
}

// audit appends the call's record to the audit log, when one is kept.
func (e *Executor) audit(ctx context.Context, req tool.CallRequest, res tool.CallResult, callErr error, at time.Time) error {
	if e.opts.Audit == nil {
		return nil
	}
	// The record is written even when the call's own context has ended.
	if err := e.opts.Audit.AppendAudit(context.WithoutCancel(ctx), tool.CallAuditRecord(ctx, req, res, callErr, at)); err != nil {
		return fmt.Errorf("append tool call audit record: %w", err)
	}
	return nil
}

// problemOr returns the *problem.Error in err's chain or nil.
func problemOr(err error) *problem.Error {
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}
