// Package telemetry sets up agentplane's tracing, metrics and log events
// (SPEC §5): OpenTelemetry with W3C trace context (traceparent, tracestate,
// baggage) accepted on every request and propagated to every outgoing call,
// the GenAI semantic conventions gen-ai 1.42 (genai.go), OTLP/HTTP export
// when OTEL_EXPORTER_OTLP_ENDPOINT is set, and Prometheus metrics for every
// HTTP request labelled by route pattern.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
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

// Setup installs the global TracerProvider, MeterProvider and
// LoggerProvider and the W3C TraceContext + Baggage propagator. Spans are
// sampled parent-based, always on for new traces.
//
// Each signal is exported over OTLP/HTTP when its endpoint is set:
// OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/traces, /v1/metrics or /v1/logs
// appended); spans and log records are batched, metrics read every minute
// (OTEL_METRIC_EXPORT_INTERVAL). OTEL_EXPORTER_OTLP_HEADERS (and the
// _<SIGNAL>_ variants) are read through Getenv too, and the exporters read
// the other standard OTEL_EXPORTER_OTLP_* variables (timeout, compression,
// certificates) from the process environment. Without an endpoint, or with
// OTEL_<SIGNAL>_EXPORTER=none, nothing of that signal is exported, but
// spans still carry real trace ids, which audit records and problem
// documents need, and are sampled as they would be; without a trace
// exporter they record nothing (see unrecorded), and without a metric
// exporter neither do instruments. With neither, HTTP requests in and out
// carry their traces without otelhttp's per-request work (see Middleware
// and Transport).
//
// shutdown flushes pending log records, metrics and spans and stops the
// exporters.
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
	traces, err := otlpTarget(getenv, "traces")
	if err != nil {
		return nil, err
	}
	metrics, err := otlpTarget(getenv, "metrics")
	if err != nil {
		return nil, err
	}
	logs, err := otlpTarget(getenv, "logs")
	if err != nil {
		return nil, err
	}
	if traces != nil {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(traces.endpoint)}
		if len(traces.headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(traces.headers))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("create otlp trace exporter: %w", err)
		}
		// Spans are masked as they end, before the batch holds them.
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(RedactingProcessor(sdktrace.NewBatchSpanProcessor(exp))))
	}
	// Without a metric exporter nothing reads what instruments record:
	// the no-op provider tells them (and the HTTP middleware) so.
	var mp interface {
		metric.MeterProvider
		Shutdown(context.Context) error
	} = noMetrics{}
	if metrics != nil {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(metrics.endpoint)}
		if len(metrics.headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(metrics.headers))
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("create otlp metric exporter: %w", err)
		}
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	lpOpts := []sdklog.LoggerProviderOption{sdklog.WithResource(res)}
	if logs != nil {
		opts := []otlploghttp.Option{otlploghttp.WithEndpointURL(logs.endpoint)}
		if len(logs.headers) > 0 {
			opts = append(opts, otlploghttp.WithHeaders(logs.headers))
		}
		exp, err := otlploghttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("create otlp log exporter: %w", err)
		}
		lpOpts = append(lpOpts, sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	lp := sdklog.NewLoggerProvider(lpOpts...)

	if traces != nil {
		otel.SetTracerProvider(tp)
	} else {
		otel.SetTracerProvider(&unrecorded{})
	}
	otel.SetMeterProvider(mp)
	otel.SetLoggerProvider(lp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{},
		propagation.Baggage{},
	))
	return func(ctx context.Context) error {
		// Logs first: an evaluation event's span may still be batched.
		if err := errors.Join(lp.Shutdown(ctx), mp.Shutdown(ctx), tp.Shutdown(ctx)); err != nil {
			return fmt.Errorf("shut down telemetry: %w", err)
		}
		return nil
	}, nil
}

// noMetrics is the MeterProvider when no metric is exported.
type noMetrics struct{ metricnoop.MeterProvider }

func (noMetrics) Shutdown(context.Context) error { return nil }

// otlpExport is where one signal is exported over OTLP/HTTP.
type otlpExport struct {
	endpoint string
	headers  map[string]string
}

// otlpTarget returns where the environment asks signal ("traces",
// "metrics", "logs") to be exported, or nil when it is not:
// OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as is, or OTEL_EXPORTER_OTLP_ENDPOINT
// with /v1/<signal> appended; OTEL_<SIGNAL>_EXPORTER=none turns it off.
func otlpTarget(getenv func(string) string, signal string) (*otlpExport, error) {
	up := strings.ToUpper(signal)
	if strings.EqualFold(getenv("OTEL_"+up+"_EXPORTER"), "none") {
		return nil, nil
	}
	variable := "OTEL_EXPORTER_OTLP_" + up + "_ENDPOINT"
	endpoint := getenv(variable)
	if endpoint == "" {
		variable, endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT", getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if endpoint == "" {
			return nil, nil
		}
		endpoint = strings.TrimRight(endpoint, "/") + "/v1/" + signal
	}
	// The URL is not repeated in the error: it may carry credentials.
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: want an http:// or https:// URL with a host", variable)
	}
	headers := parseHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS"))
	for k, v := range parseHeaders(getenv("OTEL_EXPORTER_OTLP_" + up + "_HEADERS")) {
		headers[k] = v
	}
	return &otlpExport{endpoint: endpoint, headers: headers}, nil
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
