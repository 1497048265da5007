package telemetry

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
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
	traced := otelhttp.NewHandler(inner, "http.server",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return SpanName(r.Method, routeName(r))
		}),
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tracer, ok := unexported()
		if !ok {
			traced.ServeHTTP(w, r)
			return
		}
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, _ = tracer.Start(ctx, "http.server", trace.WithSpanKind(trace.SpanKindServer))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Transport traces each request sent through base (nil means
// http.DefaultTransport) as Middleware traces those it serves: a client
// span, its traceparent sent on.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, traced: otelhttp.NewTransport(base)}
}

type transport struct {
	base   http.RoundTripper
	traced http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	tracer, ok := unexported()
	if !ok {
		return t.traced.RoundTrip(r)
	}
	ctx, _ := tracer.Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindClient))
	// A RoundTripper leaves the caller's request as it was.
	out := r.WithContext(r.Context())
	out.Header = r.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(out.Header))
	return t.base.RoundTrip(out)
}

// unexported returns the tracer of unrecorded spans when neither spans nor
// metrics are exported (Setup's providers without exporters, not a
// test's recorder). Then otelhttp's work for each request (a span's
// attributes and a metric's attribute set computed, wrapped bodies and
// writers) would go where nothing reads it: the request needs only its
// trace ids, from its traceparent or new, and those it sends on.
func unexported() (trace.Tracer, bool) {
	tp, ok := otel.GetTracerProvider().(*unrecorded)
	if !ok {
		return nil, false
	}
	if _, ok := otel.GetMeterProvider().(noMetrics); !ok {
		return nil, false
	}
	return tp.Tracer(""), true
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
