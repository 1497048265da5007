package telemetry

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Middleware traces every request through next: it continues the trace of an
// incoming traceparent (or starts one), names the span "METHOD /route/{pattern}"
// and records status and sizes.
//
// routeName says which ServeMux pattern serves a request. MuxRoute(mux) knows
// it before routing, so the span is named from its start. nil means
// r.Pattern, which ServeMux sets only once it has matched: Middleware then
// renames the span after next returns, which works when next is the mux
// itself (or only passes the request on); a handler deeper inside can call
// SetRoute instead.
func Middleware(next http.Handler, routeName func(*http.Request) string) http.Handler {
	if routeName == nil {
		routeName = Pattern
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, h := withRoute(r)
		next.ServeHTTP(w, r)
		if route := h.resolve(r, routeName); route != "" {
			nameSpan(trace.SpanFromContext(r.Context()), r.Method, route)
		}
	})
	return otelhttp.NewHandler(inner, "http.server",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return SpanName(r.Method, routeName(r))
		}),
	)
}

// MuxRoute returns a routeName that asks mux which pattern will serve a
// request, before the request reaches it. "" when no pattern matches.
func MuxRoute(mux *http.ServeMux) func(*http.Request) string {
	return func(r *http.Request) string {
		_, pattern := mux.Handler(r)
		return pattern
	}
}

// Pattern is the routeName that reads r.Pattern, set by ServeMux on match.
func Pattern(r *http.Request) string { return r.Pattern }

// SetRoute records r.Pattern as the request's route for Middleware, and
// renames the current span after it. Call it from
// inside the ServeMux (a per-route wrapper, say) when middleware between
// Middleware and the mux passes on a copy of the request.
func SetRoute(r *http.Request) {
	if r.Pattern == "" {
		return
	}
	if h, ok := r.Context().Value(routeKey{}).(*routeHolder); ok {
		h.set(r.Pattern)
	}
	nameSpan(trace.SpanFromContext(r.Context()), r.Method, r.Pattern)
}

// SpanName is the span name of a request served by route: "METHOD /path",
// or the bare method when no route matched (OpenTelemetry HTTP conventions).
func SpanName(method, route string) string {
	if path := RoutePath(route); path != "" {
		return method + " " + path
	}
	return method
}

// RoutePath strips the method from a ServeMux pattern: "POST /v1/tools"
// becomes "/v1/tools"; "" stays "".
func RoutePath(pattern string) string {
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		return strings.TrimLeft(pattern[i:], " \t")
	}
	return pattern
}

// nameSpan names span after route and sets its http.route attribute.
func nameSpan(span trace.Span, method, route string) {
	span.SetName(SpanName(method, route))
	if path := RoutePath(route); path != "" {
		span.SetAttributes(semconv.HTTPRoute(path))
	}
}

// routeKey is the context key of a request's *routeHolder.
type routeKey struct{}

// routeHolder carries the route SetRoute found deep inside the handler chain
// back out to the middleware.
type routeHolder struct {
	mu    sync.Mutex
	route string
}

func (h *routeHolder) set(route string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.route = route
}

// resolve returns the route recorded by SetRoute, or routeName's answer.
func (h *routeHolder) resolve(r *http.Request, routeName func(*http.Request) string) string {
	h.mu.Lock()
	route := h.route
	h.mu.Unlock()
	if route != "" {
		return route
	}
	return routeName(r)
}

// withRoute returns r with a routeHolder in its context, reusing one an
// outer middleware put there.
func withRoute(r *http.Request) (*http.Request, *routeHolder) {
	if h, ok := r.Context().Value(routeKey{}).(*routeHolder); ok {
		return r, h
	}
	h := &routeHolder{}
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, h)), h
}
