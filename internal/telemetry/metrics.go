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
// so the number of series stays bounded.
func (m *Metrics) Observe(route, method string, status int, d time.Duration) {
	label := RoutePath(route)
	if label == "" {
		label = unmatchedRoute
	}
	m.requests.WithLabelValues(label, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(label, method).Observe(d.Seconds())
}

// Handler serves the metrics in the Prometheus exposition format, for
// GET /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

// Middleware observes every request through next. routeName works as for
// the tracing Middleware (nil means r.Pattern, read after next returns).
func (m *Metrics) Middleware(next http.Handler, routeName func(*http.Request) string) http.Handler {
	if routeName == nil {
		routeName = Pattern
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r, h := withRoute(r)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		m.Observe(h.resolve(r, routeName), r.Method, sw.statusCode(), time.Since(start))
	})
}

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusCode is the status sent, 200 when the handler wrote nothing.
func (w *statusWriter) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
