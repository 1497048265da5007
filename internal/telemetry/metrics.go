package telemetry

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// unmatchedRoute is the route label of requests no pattern served.
const unmatchedRoute = "unmatched"

// otherMethod is the method label of requests whose method is not one of
// the standard methods of RFC 9110 and RFC 5789.
const otherMethod = "OTHER"

// methodLabel returns method when it is a standard method, else otherMethod:
// any token is a valid method, so the raw value would let clients create
// series without bound.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return otherMethod
}

// Metrics holds agentplane's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	gatherer prometheus.Gatherer
}

// NewMetrics registers the HTTP metrics, and the Go runtime and process
// collectors, on reg; nil means a new registry of its own. Metrics already
// registered on reg (a second NewMetrics on the same registry) are reused.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{gatherer: prometheus.DefaultGatherer}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	m.requests = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentplane_http_requests_total",
		Help: "HTTP requests served, by route pattern, method and status code.",
	}, []string{"route", "method", "status"}))
	m.duration = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentplane_http_request_duration_seconds",
		Help:    "Time to serve an HTTP request, by route pattern and method.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route", "method"}))
	register(reg, collectors.NewGoCollector())
	register(reg, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// register registers c on reg, or returns the collector already registered
// in its place. Any other failure is a programming error and panics, as
// prometheus.MustRegister does.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic("telemetry: register metrics: " + err.Error())
}

// Observe records one served request. route is the ServeMux pattern ("" when
// none matched); only its path is used as the label, never the raw URL path,
// and a method outside the standard ones is labelled OTHER, so the number of
// series stays bounded.
func (m *Metrics) Observe(route, method string, status int, d time.Duration) {
	label := RoutePath(route)
	if label == "" {
		label = unmatchedRoute
	}
	method = methodLabel(method)
	m.requests.WithLabelValues(label, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(label, method).Observe(d.Seconds())
}

// Handler serves the metrics in the Prometheus exposition format, for
// GET /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}
