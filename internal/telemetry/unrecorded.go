package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// unrecorded is the TracerProvider when no span is exported: its spans
// carry real trace and span ids, sampled as the SDK's parent-based
// always-on sampler decides (so a traceparent sent on says what it would
// with an exporter), but record nothing, as nothing would read what they
// recorded. A recording span costs its attributes, events and a few
// hundred bytes for as long as it lasts: for an LLM workflow in flight,
// its invoke's, its run's, its step's, its completion's and the
// completion's HTTP request's.
type unrecorded struct{ noop.TracerProvider }

func (p *unrecorded) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return &unrecordedTracer{provider: p}
}

type unrecordedTracer struct {
	noop.Tracer
	provider *unrecorded
}

// Start makes a span in the trace of ctx's span (a new trace when there
// is none or the options ask for a new root) with a new span id.
func (t *unrecordedTracer) Start(ctx context.Context, _ string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	var parent trace.SpanContext
	if start := trace.NewSpanStartConfig(opts...); !start.NewRoot() {
		parent = trace.SpanContextFromContext(ctx)
	}
	cfg := trace.SpanContextConfig{TraceFlags: trace.FlagsSampled}
	if parent.TraceID().IsValid() {
		cfg.TraceID, cfg.TraceFlags, cfg.TraceState = parent.TraceID(), parent.TraceFlags(), parent.TraceState()
	} else {
		binary.BigEndian.PutUint64(cfg.TraceID[:8], nonZero())
		binary.BigEndian.PutUint64(cfg.TraceID[8:], rand.Uint64())
	}
	binary.BigEndian.PutUint64(cfg.SpanID[:], nonZero())
	span := unrecordedSpan{sc: trace.NewSpanContext(cfg), provider: t.provider}
	return trace.ContextWithSpan(ctx, span), span
}

// nonZero is a random number other than 0, so the ids it makes are valid.
func nonZero() uint64 {
	for {
		if n := rand.Uint64(); n != 0 {
			return n
		}
	}
}

type unrecordedSpan struct {
	noop.Span
	sc       trace.SpanContext
	provider *unrecorded
}

func (s unrecordedSpan) SpanContext() trace.SpanContext { return s.sc }

func (s unrecordedSpan) TracerProvider() trace.TracerProvider { return s.provider }
