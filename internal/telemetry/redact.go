package telemetry

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentplane/agentplane/internal/redact"
)

// RedactingProcessor masks the string attributes a span starts with
// (url.full of an outgoing call, a completion's input messages) by the
// masker its parent context carries: a workflow's, for its tool calls and
// completions. Attributes set later are masked where they are set.
func RedactingProcessor() sdktrace.SpanProcessor { return redacting{} }

type redacting struct{}

func (redacting) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if !redact.InContext(ctx) {
		return
	}
	for _, kv := range s.Attributes() {
		switch kv.Value.Type() {
		case attribute.STRING:
			v := kv.Value.AsString()
			if m := maskAttr(ctx, v); m != v {
				s.SetAttributes(attribute.String(string(kv.Key), m))
			}
		case attribute.STRINGSLICE:
			vs, changed := kv.Value.AsStringSlice(), false
			for i, v := range vs {
				if m := maskAttr(ctx, v); m != v {
					vs[i], changed = m, true
				}
			}
			if changed {
				s.SetAttributes(attribute.StringSlice(string(kv.Key), vs))
			}
		}
	}
}

// maskAttr masks a URL as one (its escaped parts unescaped), else text.
func maskAttr(ctx context.Context, v string) string {
	if strings.Contains(v, "://") && !strings.ContainsAny(v, " \n") {
		return redact.URLIn(ctx, v)
	}
	return redact.TextIn(ctx, v)
}

func (redacting) OnEnd(sdktrace.ReadOnlySpan)      {}
func (redacting) Shutdown(context.Context) error   { return nil }
func (redacting) ForceFlush(context.Context) error { return nil }
