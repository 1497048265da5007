package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/telemetry"
)

func TestMetricsCountRequestsByRoutePattern(t *testing.T) {
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/tools/{id}", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /v1/tools", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	mux.Handle("GET /metrics", metrics.Handler())
	srv := httptest.NewServer(metrics.Middleware(mux, nil))
	t.Cleanup(srv.Close)

	get(t, "GET", srv.URL+"/v1/tools/tool_1", nil)
	get(t, "GET", srv.URL+"/v1/tools/tool_2", nil)
	get(t, "POST", srv.URL+"/v1/tools", nil)
	get(t, "GET", srv.URL+"/no/such/path", nil)
	exposition := get(t, "GET", srv.URL+"/metrics", nil)

	var got []string
	for line := range strings.Lines(exposition) {
		if strings.HasPrefix(line, "agentplane_http_requests_total{") ||
			strings.HasPrefix(line, "agentplane_http_request_duration_seconds_count{") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	want := []string{
		`agentplane_http_request_duration_seconds_count{method="GET",route="/v1/tools/{id}"} 2`,
		`agentplane_http_request_duration_seconds_count{method="GET",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="POST",route="/v1/tools"} 1`,
		`agentplane_http_requests_total{method="GET",route="/v1/tools/{id}",status="200"} 2`,
		`agentplane_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="POST",route="/v1/tools",status="201"} 1`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(exposition, "\n"+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestMetricsObserveUsesThePatternPath(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	again := telemetry.NewMetrics(reg) // same registry: reuses the collectors

	metrics.Observe("DELETE /v1/tools/{id}", "DELETE", 204, 3*time.Millisecond)
	again.Observe("/healthz", "GET", 200, time.Millisecond)

	srv := httptest.NewServer(metrics.Handler())
	t.Cleanup(srv.Close)
	exposition := get(t, "GET", srv.URL, nil)
	for _, want := range []string{
		`agentplane_http_requests_total{method="DELETE",route="/v1/tools/{id}",status="204"} 1`,
		`agentplane_http_requests_total{method="GET",route="/healthz",status="200"} 1`,
	} {
		if !strings.Contains(exposition, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
