// Package telemetry sets up agentplane's tracing and metrics (SPEC §5):
// OpenTelemetry with W3C trace context (traceparent, tracestate, baggage)
// accepted on every request and propagated to every outgoing call, OTLP/HTTP
// export when OTEL_EXPORTER_OTLP_ENDPOINT is set, and Prometheus metrics for
// every HTTP request labelled by route pattern.
package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Options configures Setup.
type Options struct {
	// ServiceName is the service.name resource attribute; OTEL_SERVICE_NAME
	// overrides it.
	ServiceName string
	// Version is the service.version resource attribute.
	Version string
	// Getenv reads the OTEL_* variables Setup looks at; nil means os.Getenv.
	Getenv func(string) string
}

// Setup installs the global TracerProvider and the W3C TraceContext + Baggage
// propagator. Spans are sampled parent-based, always on for new traces.
//
// With OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/traces appended) set, spans are
// batched and exported over OTLP/HTTP; OTEL_EXPORTER_OTLP_HEADERS (and the
// _TRACES_ variant) are read through Getenv too, and the exporter reads the
// other standard OTEL_EXPORTER_OTLP_* variables (timeout, compression,
// certificates) from the process environment. Without an endpoint, or with
// OTEL_TRACES_EXPORTER=none, nothing is exported but spans still carry real
// trace ids, which audit records and problem documents need.
//
// shutdown flushes pending spans and stops the exporter.
func Setup(ctx context.Context, opts Options) (shutdown func(context.Context) error, err error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}

	name := opts.ServiceName
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		name = v
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(name),
		semconv.ServiceVersion(opts.Version),
	))
	if err != nil {
		return nil, fmt.Errorf("build telemetry resource: %w", err)
	}

	tpOpts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	}
	exporterOpts, export, err := otlpOptions(getenv)
	if err != nil {
		return nil, err
	}
	if export {
		exp, err := otlptracehttp.New(ctx, exporterOpts...)
		if err != nil {
			return nil, fmt.Errorf("create otlp trace exporter: %w", err)
		}
		// Spans are masked as they end, before the batch holds them.
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(RedactingProcessor(sdktrace.NewBatchSpanProcessor(exp))))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)

	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{},
		propagation.Baggage{},
	))
	return func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("shut down tracing: %w", err)
		}
		return nil
	}, nil
}

// otlpOptions returns the exporter options the environment asks for, and
// false when no trace export is configured.
func otlpOptions(getenv func(string) string) ([]otlptracehttp.Option, bool, error) {
	if strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return nil, false, nil
	}
	variable, endpoint := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		variable, endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT", getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if endpoint == "" {
			return nil, false, nil
		}
		endpoint = strings.TrimRight(endpoint, "/") + "/v1/traces"
	}
	// The URL is not repeated in the error: it may carry credentials.
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false, fmt.Errorf("%s: want an http:// or https:// URL with a host", variable)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}

	headers := parseHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS"))
	for k, v := range parseHeaders(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")) {
		headers[k] = v
	}
	if len(headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	return opts, true, nil
}

// parseHeaders parses the OTLP headers format: comma-separated key=value
// pairs with URL-encoded values. Malformed pairs are skipped.
func parseHeaders(s string) map[string]string {
	out := make(map[string]string)
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if dec, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			out[k] = dec
		}
	}
	return out
}

// TraceID returns the hex trace id of the span in ctx, or "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}
