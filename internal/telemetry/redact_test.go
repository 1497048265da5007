package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/redact"
)

type oneKey []byte

func (k oneKey) RedactionKey(context.Context, string, []byte) ([]byte, error) { return k, nil }

// TestRedactingProcessorMasksWhatSpansEndWith: attributes set after the
// span started (as the HTTP instrumentation sets url.full), the status
// and event attributes are masked before the exporter sees them; a span
// started without a masker is exported as it is.
func TestRedactingProcessorMasksWhatSpansEndWith(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(RedactingProcessor(sdktrace.NewSimpleSpanProcessor(exp))))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")

	m, err := (&redact.Service{Keys: oneKey("k")}).Masker(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	ctx := redact.NewContext(context.Background(), m, []string{redact.Email, redact.PaymentCard})
	_, span := tr.Start(ctx, "GET")
	span.SetAttributes(attribute.String("url.full", "http://api.test/orders?email=jane%40example.com"),
		attribute.StringSlice("notes", []string{"card 4111 1111 1111 1111"}))
	span.AddEvent("answer", trace.WithAttributes(attribute.String("body", "jane@example.com")))
	span.SetStatus(codes.Error, "no customer jane@example.com")
	span.End()
	_, plain := tr.Start(context.Background(), "plain")
	plain.SetAttributes(attribute.String("note", "jane@example.com"))
	plain.End()

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want 2", len(spans))
	}
	var masked strings.Builder
	for _, kv := range spans[0].Attributes {
		masked.WriteString(kv.Value.String() + "\n")
	}
	for _, ev := range spans[0].Events {
		for _, kv := range ev.Attributes {
			masked.WriteString(kv.Value.String() + "\n")
		}
	}
	masked.WriteString(spans[0].Status.Description)
	got := masked.String()
	if strings.Contains(got, "jane") || strings.Contains(got, "4111") || !strings.Contains(got, "redacted") {
		t.Errorf("masked span holds:\n%s", got)
	}
	if v := spans[1].Attributes[0].Value.AsString(); v != "jane@example.com" {
		t.Errorf("a span without a masker was changed: %q", v)
	}
}
