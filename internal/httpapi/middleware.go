package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/gateway"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/web"
)

// observe gives every request an id, a log line, metrics and an audit record,
// and turns a panic into a 500 problem.
func (s *Server) observe(w http.ResponseWriter, r *http.Request) {
	start := s.deps.Now()
	info := &frontdoor.Info{RequestID: ids.New(ids.Request), TraceID: telemetry.TraceID(r.Context())}
	if r.URL.Path == "/mcp" {
		info.ResourceMetadata = s.mcp.ResourceMetadataURL()
	}
	r = r.WithContext(withRoute(frontdoor.WithInfo(r.Context(), info)))
	sw := &frontdoor.StatusWriter{ResponseWriter: w}
	sw.Header().Set("Request-Id", info.RequestID)
	body := r.Body // as the client sends it, whatever the handlers wrap it in

	func() {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.deps.Logger.Error("panic", "request_id", info.RequestID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if !sw.Started() {
					frontdoor.WriteProblem(sw, r, problem.New(problem.Internal, "panic"))
				}
			}
		}()
		if n := headerBytes(r); n > MaxHeaderBytes {
			frontdoor.WriteProblem(sw, r, problem.New(problem.HeadersTooLarge,
				"the request line and headers are %d bytes, over the limit of %d", n, MaxHeaderBytes))
			return
		}
		s.dispatch(sw, r)
	}()

	status := sw.Status
	switch {
	case status != 0:
	case r.Context().Err() != nil:
		// The client went away before any answer (a sync invoke whose
		// workflow goes on): it got no status, and its record says so.
		status = StatusClientClosed
	default:
		status = http.StatusOK // net/http answers 200 to a handler that wrote nothing
	}
	elapsed := s.deps.Now().Sub(start)
	pattern := "unmatched"
	if rt := routeOf(r.Context()); rt != nil {
		pattern = rt.pattern
	}
	if s.deps.Metrics != nil {
		s.deps.Metrics.Observe(pattern, r.Method, status, elapsed)
	}
	s.audit(r, info, status)
	s.logRequest(r, info, status, elapsed, sw.Written)
	discardBody(r, body)
}

// StatusClientClosed is the status logged and audited for a request whose
// client went away before any answer was sent (nginx's 499): no status
// reached it.
const StatusClientClosed = 499

// Limits of a request's headers. Over MaxHeaderBytes a request is answered
// 431 with a problem document. The http.Server reads up to
// ServerMaxHeaderBytes so that it can: over that, net/http itself answers a
// plain-text 431 and closes the connection before any handler runs.
const (
	MaxHeaderBytes       = 64 << 10
	ServerMaxHeaderBytes = 4 * MaxHeaderBytes
)

// headerBytes is the size of r's request line and headers as they were
// sent, give or take their separators.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	n += len("Host: ") + len(r.Host) + 2 // net/http moves Host out of Header
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// discardBytes bounds reading the rest of a request body after its answer
// is made; the server's read timeout bounds its time.
const discardBytes = 32 << 20

// discardBody reads and drops what the handlers left of a request body (one
// refused, or over its limit), up to discardBytes and within the server's
// read timeout, before the answer goes out. net/http closes a connection
// with more than 256 KiB of its body unread, and a client that sends its
// whole body before it reads (Python's urllib does) then finds the
// connection reset and never sees the answer. A client that waits for
// 100 Continue has sent no body and is not made to send one.
func discardBody(r *http.Request, body io.Reader) {
	if body == nil || body == http.NoBody || r.ContentLength == 0 || r.ProtoMajor != 1 ||
		strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	io.CopyN(io.Discard, body, discardBytes)
}

func (s *Server) logRequest(r *http.Request, info *frontdoor.Info, status int, d time.Duration, bytes int64) {
	attrs := []slog.Attr{
		slog.String("request_id", info.RequestID),
		slog.String("trace_id", info.TraceID),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.Int64("bytes", bytes),
	}
	if p := info.Principal; p != nil {
		attrs = append(attrs, slog.String("tenant", p.Tenant), slog.String("sub", p.Subject))
	}
	level := slog.LevelInfo
	if rt := routeOf(r.Context()); rt != nil && rt.noAudit && status < 400 {
		level = slog.LevelDebug // health and metrics probes
	}
	if pe := info.Problem; pe != nil {
		attrs = append(attrs, slog.String("code", string(pe.Code)))
		if pe.Err != nil {
			attrs = append(attrs, slog.String("cause", pe.Err.Error()))
		}
		if pe.Code == problem.Internal || pe.Code == problem.Unavailable {
			level = slog.LevelError
		}
	}
	s.deps.Logger.LogAttrs(r.Context(), level, "request", attrs...)
}

// audit appends the request's record unless its handler already stored it
// with the mutation it made.
func (s *Server) audit(r *http.Request, info *frontdoor.Info, status int) {
	if info.Audited || s.deps.Store == nil {
		return
	}
	if rt := routeOf(r.Context()); rt != nil && rt.noAudit {
		return
	}
	if info.HandlerStatus != 0 {
		status = info.HandlerStatus // a console action: the API call's status, not its redirect
	}
	// The answer is made: the record goes with the store's next commit
	// rather than a commit of its own that the connection's next request
	// would wait for (docs/audit.md, "When a record is written").
	s.deps.Store.AppendAuditLater(func(err error) {
		if err != nil {
			s.deps.Logger.Error("audit append failed", "request_id", info.RequestID, "err", err)
		}
	}, s.record(r, status))
}

// record builds the audit record of a request with the given status.
func (s *Server) record(r *http.Request, status int) *audit.Record {
	return s.recordOf(r, frontdoor.InfoFrom(r.Context()), status)
}

// recordOf builds the record of a request from info.
func (s *Server) recordOf(r *http.Request, info *frontdoor.Info, status int) *audit.Record {
	rec := &audit.Record{
		Time:       s.deps.Now(),
		Tenant:     audit.SystemTenant,
		Action:     "http.request",
		Outcome:    outcomeOf(status),
		Status:     status,
		RequestID:  info.RequestID,
		TraceID:    info.TraceID,
		WorkflowID: info.WorkflowID,
	}
	if p := info.Principal; p != nil {
		rec.Tenant = p.Tenant
		rec.Actor = p.Actor()
	} else if info.Tenant != "" {
		rec.Tenant = info.Tenant
	}
	details := map[string]any{"method": r.Method, "path": r.URL.Path}
	if rt := routeOf(r.Context()); rt != nil {
		rec.Action = rt.action
		rec.Resource = audit.Resource{Type: rt.resource, ID: r.PathValue("id")}
		delete(details, "path")
	}
	if info.ResourceID != "" {
		rec.Resource.ID = info.ResourceID
	}
	if pe := info.Problem; pe != nil && status >= 400 {
		details["code"] = string(pe.Code)
	}
	for k, v := range info.Details {
		details[k] = v
	}
	rec.Details = audit.Details(details)
	return rec
}

func outcomeOf(status int) string {
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden, status == http.StatusTooManyRequests:
		return audit.Denied
	case status >= 400:
		return audit.Error
	}
	return audit.Success
}

// serveRoute authenticates, authorises and rate limits a request for one
// route, limits its body, applies idempotency to POSTs, then runs the handler.
func (s *Server) serveRoute(rt *route) http.Handler {
	h := frontdoor.Adapt(s.deps.Logger, rt.h)
	if rt.idempotent && !rt.ownKeys {
		h = s.idempotent(h)
	}
	if rt.form != nil {
		h = s.consoleAction(rt, h)
	}
	var problemPage func(http.ResponseWriter, *http.Request, *problem.Error, int)
	if rt.console {
		problemPage = console.ProblemPage(!rt.public)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := frontdoor.InfoFrom(r.Context())
		setRoute(r.Context(), rt)
		switch {
		case rt.console:
			info.ProblemPage = problemPage
		case rt.gateway:
			info.ProblemPage = gateway.Problem
		}
		if err := s.admit(w, r, rt); err != nil {
			frontdoor.WriteProblem(w, r, err)
			return
		}
		if r.Body != nil {
			limit := s.cfg.MaxBodyBytes
			if rt.gateway {
				limit = max(limit, gatewayMaxBody)
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		h.ServeHTTP(w, r)
	})
}

// routed holds the route a request matched, set once the mux has matched
// it and read by the steps after its handler (metrics, log line, audit).
type routed struct{ route *route }

type routedKey struct{}

// withRoute gives the request a place for its route.
func withRoute(ctx context.Context) context.Context {
	return context.WithValue(ctx, routedKey{}, &routed{})
}

func setRoute(ctx context.Context, rt *route) {
	if h, ok := ctx.Value(routedKey{}).(*routed); ok {
		h.route = rt
	}
}

// routeOf returns the route the request matched, or nil.
func routeOf(ctx context.Context) *route {
	if h, ok := ctx.Value(routedKey{}).(*routed); ok {
		return h.route
	}
	return nil
}

// admit checks the token, the route's scope and the rate limit.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, rt *route) error {
	info := frontdoor.InfoFrom(r.Context())
	if rt.gateway {
		// The run's token, checked by the gateway, which limits a request
		// without a valid one per client IP (limitIP).
		return nil
	}
	if rt.public {
		if rt.noAudit {
			return nil // health, readiness and metrics probes
		}
		if err := s.limitIP(w, r); err != nil {
			return err
		}
		if rt.signed != "" {
			tools, err := s.deps.Viewer.Verify(rt.signed, r.PathValue("id"), r.URL.Query())
			if err != nil {
				return &refusedLink{kind: rt.signed, id: r.PathValue("id"), err: err}
			}
			info.SignedTools = tools
		}
		return nil
	}
	if rt.console {
		return s.admitConsole(w, r, rt)
	}
	raw, ok := auth.BearerToken(r)
	if !ok {
		if err := s.limitIP(w, r); err != nil {
			return err
		}
		return problem.New(problem.Unauthenticated, "no bearer token: send Authorization: Bearer <access token>")
	}
	p, err := s.deps.Verifier.Verify(r.Context(), raw)
	if err != nil {
		if lerr := s.limitIP(w, r); lerr != nil {
			return lerr
		}
		if problem.As(err).Code == problem.Internal {
			return problem.Wrap(problem.Unavailable, err, "token verification is unavailable")
		}
		return err
	}
	info.Principal = &p
	if err := s.limitTenant(w, r, p.Tenant); err != nil {
		return err
	}
	if rt.scope != "" && !p.Has(rt.scope) {
		return &problem.Error{Code: problem.InsufficientScope, Scope: rt.scope,
			Detail: "this endpoint needs the scope " + rt.scope}
	}
	return nil
}

func (s *Server) limitTenant(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.limit(w, r, ratelimit.TenantKey(tenant), s.cfg.RateLimits.For(tenant), true)
}

func (s *Server) limitIP(w http.ResponseWriter, r *http.Request) error {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return s.limit(w, r, ratelimit.IPKey(host), s.cfg.RateLimits.ForIP(), false)
}

// refusedLink is a signed page's link refused (expired or badly signed):
// a 404 problem for a program, a page saying how to get a fresh link for a
// person whose browser followed it.
type refusedLink struct {
	kind, id string
	err      error
}

func (e *refusedLink) Error() string { return e.err.Error() }
func (e *refusedLink) Unwrap() error { return e.err }

// WritePage writes the page a browser that followed the link is shown.
func (e *refusedLink) WritePage(w http.ResponseWriter, status int) {
	web.PageHeaders(w.Header())
	w.WriteHeader(status)
	web.RenderRefusedLink(w, e.kind, e.id, errors.Is(e.err, web.ErrLinkExpired))
}

func (s *Server) limit(w http.ResponseWriter, r *http.Request, key string, l ratelimit.Limit, headers bool) error {
	if s.deps.Limiter == nil || l.Rate <= 0 {
		return nil
	}
	res, err := s.deps.Limiter.Allow(r.Context(), key, l)
	if err != nil {
		if problem.As(err).Code == problem.Internal {
			return problem.Wrap(problem.Unavailable, err, "the rate limiter is unavailable")
		}
		return err
	}
	if headers {
		res.SetHeaders(w.Header())
	}
	return res.Err()
}
