package telemetry_test

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/internal/telemetry"
)

// export is one OTLP request a collector received: the span names of a
// trace export, the event names of a log export and the metric names of a
// metric export.
type export struct {
	Method, Path, Tenant string
	Spans                []string
	Events               []string
	Metrics              []string
	// Schemas are the schema URLs of the export's scopes.
	Schemas []string
	// Logs are the log records of a log export.
	Logs []*logspb.LogRecord
}

// collector is an OTLP/HTTP endpoint that records what it is sent,
// decoding the protobuf requests of /v1/traces, /v1/logs and /v1/metrics
// (and any other path as a trace export).
func collector(t *testing.T) (*httptest.Server, chan export) {
	t.Helper()
	got := make(chan export, 30)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("gunzip export: %v", err)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			t.Errorf("read export: %v", err)
			return
		}
		e := export{Method: r.Method, Path: r.URL.Path, Tenant: r.Header.Get("X-Tenant")}
		switch r.URL.Path {
		case "/v1/logs":
			var req collogspb.ExportLogsServiceRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				t.Errorf("decode log export: %v", err)
			}
			for _, rl := range req.GetResourceLogs() {
				for _, sl := range rl.GetScopeLogs() {
					e.Schemas = append(e.Schemas, sl.GetSchemaUrl())
					for _, l := range sl.GetLogRecords() {
						e.Events = append(e.Events, l.GetEventName())
						e.Logs = append(e.Logs, l)
					}
				}
			}
		case "/v1/metrics":
			var req colmetricspb.ExportMetricsServiceRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				t.Errorf("decode metric export: %v", err)
			}
			for _, rm := range req.GetResourceMetrics() {
				for _, sm := range rm.GetScopeMetrics() {
					e.Schemas = append(e.Schemas, sm.GetSchemaUrl())
					for _, m := range sm.GetMetrics() {
						e.Metrics = append(e.Metrics, m.GetName())
					}
				}
			}
		default:
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				t.Errorf("decode trace export: %v", err)
			}
			for _, rs := range req.GetResourceSpans() {
				for _, ss := range rs.GetScopeSpans() {
					e.Schemas = append(e.Schemas, ss.GetSchemaUrl())
					for _, s := range ss.GetSpans() {
						e.Spans = append(e.Spans, s.GetName())
					}
				}
			}
		}
		got <- e
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// received drains what the collector got by now, by path.
func received(got chan export) map[string]export {
	out := map[string]export{}
	for {
		select {
		case e := <-got:
			prev := out[e.Path]
			e.Spans = append(prev.Spans, e.Spans...)
			e.Events = append(prev.Events, e.Events...)
			e.Metrics = append(prev.Metrics, e.Metrics...)
			e.Logs = append(prev.Logs, e.Logs...)
			e.Schemas = append(prev.Schemas, e.Schemas...)
			out[e.Path] = e
		default:
			return out
		}
	}
}

func TestSetupExportsOverOTLP(t *testing.T) {
	tests := []struct {
		name string
		env  func(url string) map[string]string
		want export
	}{
		{
			name: "base endpoint",
			env: func(url string) map[string]string {
				return map[string]string{
					"OTEL_EXPORTER_OTLP_ENDPOINT": url,
					"OTEL_EXPORTER_OTLP_HEADERS":  "x-tenant=acme%20corp",
				}
			},
			want: export{Method: "POST", Path: "/v1/traces", Tenant: "acme corp", Spans: []string{"test-span"}},
		},
		{
			name: "traces endpoint used as is",
			env: func(url string) map[string]string {
				return map[string]string{
					"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:1",
					"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url + "/custom/traces",
					"OTEL_METRICS_EXPORTER":              "none",
					"OTEL_LOGS_EXPORTER":                 "none",
				}
			},
			want: export{Method: "POST", Path: "/custom/traces", Spans: []string{"test-span"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := collector(t)
			env := tc.env(srv.URL)
			shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{
				ServiceName: "agentplane-test",
				Getenv:      func(k string) string { return env[k] },
			})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}

			_, span := otel.Tracer("test").Start(context.Background(), "test-span")
			span.End()
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}

			e, ok := received(got)[tc.want.Path]
			if !ok {
				t.Fatalf("the collector received nothing at %s by the end of shutdown", tc.want.Path)
			}
			if diff := cmp.Diff(tc.want, e, cmpopts.IgnoreFields(export{}, "Logs", "Schemas")); diff != "" {
				t.Errorf("export (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetupRefusesABadEndpoint(t *testing.T) {
	const secret = "hunter2-token"
	for _, endpoint := range []string{"127.0.0.1:4318", "ftp://u:" + secret + "@host", "http://"} {
		_, err := telemetry.Setup(context.Background(), telemetry.Options{
			Getenv: func(k string) string {
				if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
					return endpoint
				}
				return ""
			},
		})
		if err == nil {
			t.Errorf("Setup with endpoint %q: got nil error", endpoint)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Setup error reveals the endpoint's credentials: %v", err)
		}
	}
}

func TestSetupWithoutExporterStillMakesTraceIDs(t *testing.T) {
	setup(t)
	ctx, span := otel.Tracer("test").Start(context.Background(), "step")
	defer span.End()
	if got := telemetry.TraceID(ctx); len(got) != 32 {
		t.Errorf("TraceID = %q, want 32 hex digits", got)
	}
}
