package telemetry_test

import (
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
	srv := httptest.NewServer(metrics.Handler())
	t.Cleanup(srv.Close)

	metrics.Observe("GET /v1/tools/{id}", "GET", 200, time.Millisecond)
	metrics.Observe("GET /v1/tools/{id}", "GET", 200, time.Millisecond)
	metrics.Observe("POST /v1/tools", "POST", 201, time.Millisecond)
	metrics.Observe("", "GET", 404, time.Millisecond)
	exposition := get(t, "GET", srv.URL, nil)

	want := []string{
		`agentplane_http_request_duration_seconds_count{method="GET",route="/v1/tools/{id}"} 2`,
		`agentplane_http_request_duration_seconds_count{method="GET",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="POST",route="/v1/tools"} 1`,
		`agentplane_http_requests_total{method="GET",route="/v1/tools/{id}",status="200"} 2`,
		`agentplane_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="POST",route="/v1/tools",status="201"} 1`,
	}
	if diff := cmp.Diff(want, requestSeries(exposition)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(exposition, "\n"+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestMetricsLabelNonStandardMethodsOther(t *testing.T) {
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	srv := httptest.NewServer(metrics.Handler())
	t.Cleanup(srv.Close)

	for _, method := range []string{"PROPFIND", "get", "X-RANDOM-1", "X-RANDOM-2"} {
		metrics.Observe("", method, 405, time.Millisecond)
	}
	for _, method := range []string{"HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"} {
		metrics.Observe("", method, 404, time.Millisecond)
	}
	want := []string{
		`agentplane_http_request_duration_seconds_count{method="CONNECT",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="DELETE",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="HEAD",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="OPTIONS",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="OTHER",route="unmatched"} 4`,
		`agentplane_http_request_duration_seconds_count{method="PATCH",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="PUT",route="unmatched"} 1`,
		`agentplane_http_request_duration_seconds_count{method="TRACE",route="unmatched"} 1`,
		`agentplane_http_requests_total{method="CONNECT",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="DELETE",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="HEAD",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="OPTIONS",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="OTHER",route="unmatched",status="405"} 4`,
		`agentplane_http_requests_total{method="PATCH",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="PUT",route="unmatched",status="404"} 1`,
		`agentplane_http_requests_total{method="TRACE",route="unmatched",status="404"} 1`,
	}
	if diff := cmp.Diff(want, requestSeries(get(t, "GET", srv.URL, nil))); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// requestSeries returns the request counter and duration count lines of an
// exposition.
func requestSeries(exposition string) []string {
	var got []string
	for line := range strings.Lines(exposition) {
		if strings.HasPrefix(line, "agentplane_http_requests_total{") ||
			strings.HasPrefix(line, "agentplane_http_request_duration_seconds_count{") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	return got
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

func TestMetricsCountLLMTokensByModelAndDirection(t *testing.T) {
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	srv := httptest.NewServer(metrics.Handler())
	t.Cleanup(srv.Close)

	metrics.ObserveLLM("default", 120, 30, 2*time.Second)
	metrics.ObserveLLM("default", 80, 0, time.Second)
	metrics.ObserveLLM("claude", 0, 0, 300*time.Millisecond) // a failed request
	var none *telemetry.Metrics
	none.ObserveLLM("default", 1, 1, time.Second) // records nothing, and does not panic

	var got []string
	for line := range strings.Lines(get(t, "GET", srv.URL, nil)) {
		if strings.HasPrefix(line, "agentplane_llm_tokens_total{") ||
			strings.HasPrefix(line, "agentplane_llm_request_duration_seconds_count{") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	want := []string{
		`agentplane_llm_request_duration_seconds_count{model="claude"} 1`,
		`agentplane_llm_request_duration_seconds_count{model="default"} 2`,
		`agentplane_llm_tokens_total{direction="input",model="default"} 200`,
		`agentplane_llm_tokens_total{direction="output",model="default"} 30`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LLM metrics (-want +got):\n%s", diff)
	}
}

func TestMetricsPerTool(t *testing.T) {
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	srv := httptest.NewServer(metrics.Handler())
	t.Cleanup(srv.Close)

	metrics.ObserveToolCall("tool_a", "", 1, 20*time.Millisecond)
	metrics.ObserveToolCall("tool_a", "upstream_error", 3, time.Second)
	metrics.ObserveToolCall("tool_a", "circuit_open", 0, 0)
	metrics.ObserveToolSlotWait("tool_a", 5*time.Millisecond)
	metrics.SetToolCircuit("tool_a", 2)
	var none *telemetry.Metrics
	none.ObserveToolCall("tool_a", "", 1, time.Second) // records nothing, and does not panic

	var got []string
	for line := range strings.Lines(get(t, "GET", srv.URL, nil)) {
		for _, p := range []string{"agentplane_tool_calls_total{", "agentplane_tool_errors_total{", "agentplane_tool_retries_total{",
			"agentplane_tool_circuit_state{", "agentplane_tool_slot_wait_seconds_count{", "agentplane_tool_call_duration_seconds_count{"} {
			if strings.HasPrefix(line, p) {
				got = append(got, strings.TrimSpace(line))
			}
		}
	}
	want := []string{
		`agentplane_tool_call_duration_seconds_count{tool="tool_a"} 3`,
		`agentplane_tool_calls_total{tool="tool_a"} 3`,
		`agentplane_tool_circuit_state{circuit="tool_a"} 2`,
		`agentplane_tool_errors_total{code="circuit_open",tool="tool_a"} 1`,
		`agentplane_tool_errors_total{code="upstream_error",tool="tool_a"} 1`,
		`agentplane_tool_retries_total{tool="tool_a"} 2`,
		`agentplane_tool_slot_wait_seconds_count{tool="tool_a"} 1`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool metrics (-want +got):\n%s", diff)
	}
}
