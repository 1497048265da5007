package telemetry_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

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

// TestSpansWithoutExporterAreSampledButNotRecorded checks the spans made
// when no trace is exported: nothing recorded, but the ids, parents and
// sampling decisions (as sent on in traceparent) of the SDK's parent-based
// always-on sampler.
func TestSpansWithoutExporterAreSampledButNotRecorded(t *testing.T) {
	setup(t)
	tracer := otel.Tracer("test")
	traceparent := func(ctx context.Context) string {
		h := http.Header{}
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
		return h.Get("Traceparent")
	}

	root, span := tracer.Start(context.Background(), "invoke")
	sc := span.SpanContext()
	if span.IsRecording() || !sc.IsValid() || !sc.IsSampled() {
		t.Fatalf("root span: recording %t, valid %t, sampled %t; want a valid sampled span recording nothing", span.IsRecording(), sc.IsValid(), sc.IsSampled())
	}
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; traceparent(root) != want {
		t.Errorf("traceparent %q, want %q", traceparent(root), want)
	}
	child, cspan := span.TracerProvider().Tracer("test").Start(root, "step")
	csc := cspan.SpanContext()
	if csc.TraceID() != sc.TraceID() || csc.SpanID() == sc.SpanID() || !csc.SpanID().IsValid() || !csc.IsSampled() {
		t.Errorf("child %v of %v: want the same trace, its own span id, sampled", csc, sc)
	}
	if _, other := tracer.Start(child, "other", trace.WithNewRoot()); other.SpanContext().TraceID() == sc.TraceID() {
		t.Error("a new root span is in its parent's trace")
	}
	if _, again := tracer.Start(context.Background(), "invoke"); again.SpanContext().TraceID() == sc.TraceID() {
		t.Error("two root spans share a trace id")
	}

	// A caller's trace that is not sampled stays so, with its trace state.
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, "Tracestate": {"vendor=opaque"}}
	remote := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(h))
	in, rspan := tracer.Start(remote, "invoke")
	rsc := rspan.SpanContext()
	if rsc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || rsc.IsSampled() || rsc.TraceState().String() != "vendor=opaque" {
		t.Errorf("span of an unsampled caller: %v, tracestate %q", rsc, rsc.TraceState())
	}
	if got := traceparent(in); !strings.HasSuffix(got, "-00") || !strings.Contains(got, "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("traceparent sent on %q: want the caller's trace, not sampled", got)
	}
}
