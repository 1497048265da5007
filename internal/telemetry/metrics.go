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

	llmTokens   *prometheus.CounterVec
	llmDuration *prometheus.HistogramVec

	tools toolMetrics
}

// llmBuckets are the bounds of a model's request durations: completions take
// from a fraction of a second to minutes.
var llmBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640}

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
	m.llmTokens = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentplane_llm_tokens_total",
		Help: "Tokens of model completions as the provider reported them, by registered model name and direction (input, output).",
	}, []string{"model", "direction"}))
	m.llmDuration = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentplane_llm_request_duration_seconds",
		Help:    "Time to get a completion from a model, retries and their waits included, by registered model name.",
		Buckets: llmBuckets,
	}, []string{"model"}))
	m.tools = newToolMetrics(reg)
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

// ObserveLLM records one completion request of the model registered as
// model (its name, not the provider's model id): its duration, failed or
// not, and the tokens the provider reported. A nil Metrics records nothing.
func (m *Metrics) ObserveLLM(model string, inputTokens, outputTokens int64, d time.Duration) {
	if m == nil {
		return
	}
	m.llmDuration.WithLabelValues(model).Observe(d.Seconds())
	if inputTokens > 0 {
		m.llmTokens.WithLabelValues(model, "input").Add(float64(inputTokens))
	}
	if outputTokens > 0 {
		m.llmTokens.WithLabelValues(model, "output").Add(float64(outputTokens))
	}
}

// Handler serves the metrics in the Prometheus exposition format, for
// GET /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}
