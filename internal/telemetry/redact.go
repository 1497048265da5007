package telemetry

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentplane/agentplane/internal/redact"
)

// RedactingProcessor hands next the spans that end with their attributes,
// status and event attributes masked by the masker their parent context
// carried when they started (a workflow's, for its tool calls and
// completions): an outgoing call's url.full, set by the HTTP
// instrumentation after the span starts, included.
func RedactingProcessor(next sdktrace.SpanProcessor) sdktrace.SpanProcessor {
	return &redacting{next: next}
}

type redacting struct {
	next   sdktrace.SpanProcessor
	scopes sync.Map // trace.SpanID → *redact.Scope
}

func (p *redacting) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if sc := redact.ScopeOf(ctx); sc != nil {
		p.scopes.Store(s.SpanContext().SpanID(), sc)
	}
	p.next.OnStart(ctx, s)
}

func (p *redacting) OnEnd(s sdktrace.ReadOnlySpan) {
	v, ok := p.scopes.LoadAndDelete(s.SpanContext().SpanID())
	if !ok {
		p.next.OnEnd(s)
		return
	}
	sc := v.(*redact.Scope)
	m := &maskedSpan{ReadOnlySpan: s, attrs: maskAttrs(sc, s.Attributes()), status: s.Status()}
	m.status.Description = sc.Text(m.status.Description)
	for _, ev := range s.Events() {
		ev.Attributes = maskAttrs(sc, ev.Attributes)
		m.events = append(m.events, ev)
	}
	p.next.OnEnd(m)
}

func (p *redacting) Shutdown(ctx context.Context) error   { return p.next.Shutdown(ctx) }
func (p *redacting) ForceFlush(ctx context.Context) error { return p.next.ForceFlush(ctx) }

// maskedSpan is an ended span as exported: masked copies of what it holds.
type maskedSpan struct {
	sdktrace.ReadOnlySpan
	attrs  []attribute.KeyValue
	status sdktrace.Status
	events []sdktrace.Event
}

func (m *maskedSpan) Attributes() []attribute.KeyValue { return m.attrs }
func (m *maskedSpan) Status() sdktrace.Status          { return m.status }
func (m *maskedSpan) Events() []sdktrace.Event         { return m.events }

// maskAttrs masks the string attributes of kvs, into a copy.
func maskAttrs(sc *redact.Scope, kvs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		switch kv.Value.Type() {
		case attribute.STRING:
			kv = attribute.String(string(kv.Key), maskAttr(sc, kv.Value.AsString()))
		case attribute.STRINGSLICE:
			vs := kv.Value.AsStringSlice()
			for j := range vs {
				vs[j] = maskAttr(sc, vs[j])
			}
			kv = attribute.StringSlice(string(kv.Key), vs)
		}
		out[i] = kv
	}
	return out
}

// maskAttr masks a URL as one (its escaped parts unescaped), else text.
func maskAttr(sc *redact.Scope, v string) string {
	if strings.Contains(v, "://") && !strings.ContainsAny(v, " \n") {
		return sc.URL(v)
	}
	return sc.Text(v)
}
