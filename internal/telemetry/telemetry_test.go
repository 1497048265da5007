package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel"

	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/telemetry/telemetrytest"
)

func TestSetupExportsOverOTLP(t *testing.T) {
	tests := []struct {
		name string
		env  func(url string) map[string]string
		want telemetrytest.Export
	}{
		{
			name: "base endpoint",
			env: func(url string) map[string]string {
				return map[string]string{
					"OTEL_EXPORTER_OTLP_ENDPOINT": url,
					"OTEL_EXPORTER_OTLP_HEADERS":  "x-tenant=acme%20corp",
				}
			},
			want: telemetrytest.Export{Method: "POST", Path: "/v1/traces", Tenant: "acme corp", Spans: []string{"test-span"}},
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
			want: telemetrytest.Export{Method: "POST", Path: "/custom/traces", Spans: []string{"test-span"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rcv := telemetrytest.NewReceiver(t)
			env := tc.env(rcv.URL)
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

			e, ok := rcv.Received()[tc.want.Path]
			if !ok {
				t.Fatalf("the collector received nothing at %s by the end of shutdown", tc.want.Path)
			}
			if diff := cmp.Diff(tc.want, e, cmpopts.IgnoreFields(telemetrytest.Export{}, "Logs", "Traces", "Schemas")); diff != "" {
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
