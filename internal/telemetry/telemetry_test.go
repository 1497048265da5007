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
	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/internal/telemetry"
)

// export is one OTLP request a collector received.
type export struct {
	Method, Path, Tenant string
	Spans                []string
}

// collector is an OTLP/HTTP endpoint that records what it is sent.
func collector(t *testing.T) (*httptest.Server, chan export) {
	t.Helper()
	got := make(chan export, 10)
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
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			t.Errorf("decode export: %v", err)
		}
		e := export{Method: r.Method, Path: r.URL.Path, Tenant: r.Header.Get("X-Tenant")}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					e.Spans = append(e.Spans, s.GetName())
				}
			}
		}
		got <- e
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return srv, got
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

			select {
			case e := <-got:
				if diff := cmp.Diff(tc.want, e); diff != "" {
					t.Errorf("export (-want +got):\n%s", diff)
				}
			default:
				t.Fatal("the collector received nothing by the end of shutdown")
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
