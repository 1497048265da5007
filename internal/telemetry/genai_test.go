package telemetry_test

import (
	"context"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/telemetry/telemetrytest"
)

func TestEmitEvaluation(t *testing.T) {
	rec := recordSpans(t) // Setup first: it installs its own LoggerProvider
	logs := telemetrytest.RecordLogs(t)
	ctx, span := telemetry.Tracer("test").Start(context.Background(), "replay")
	score := 0.8
	telemetry.EmitEvaluation(ctx, telemetry.Evaluation{Name: "judge", Score: &score, Label: "pass",
		Explanation: "the refund matches", Attrs: []attribute.KeyValue{attribute.String("agentplane.replay_id", "rp_1")}})
	telemetry.EmitEvaluation(ctx, telemetry.Evaluation{Name: "same_tool_calls", Explanation: "no such step", ErrorType: "evaluation_error"})
	span.End()

	if len(logs.Records()) != 2 {
		t.Fatalf("%d records, want 2", len(logs.Records()))
	}
	want := []map[string]any{
		{"gen_ai.evaluation.name": "judge", "gen_ai.evaluation.score.value": 0.8, "gen_ai.evaluation.score.label": "pass",
			"gen_ai.evaluation.explanation": "the refund matches", "agentplane.replay_id": "rp_1"},
		{"gen_ai.evaluation.name": "same_tool_calls", "gen_ai.evaluation.explanation": "no such step", "error.type": "evaluation_error"},
	}
	ended := rec.Ended()
	for i, r := range logs.Records() {
		if r.EventName() != "gen_ai.evaluation.result" {
			t.Errorf("record %d: event name %q", i, r.EventName())
		}
		if diff := cmp.Diff(want[i], telemetrytest.Attrs(r)); diff != "" {
			t.Errorf("record %d attributes (-want +got):\n%s", i, diff)
		}
		if r.InstrumentationScope().SchemaURL != telemetry.GenAISchemaURL {
			t.Errorf("record %d: schema URL %q", i, r.InstrumentationScope().SchemaURL)
		}
		if r.TraceID() != ended[0].SpanContext().TraceID() || r.SpanID() != ended[0].SpanContext().SpanID() {
			t.Errorf("record %d is not in the span it was emitted in", i)
		}
	}
	if ended[0].InstrumentationScope().SchemaURL != telemetry.GenAISchemaURL {
		t.Errorf("span schema URL %q", ended[0].InstrumentationScope().SchemaURL)
	}
}

func TestRecordToolDuration(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev); mp.Shutdown(context.Background()) })

	ctx := context.Background()
	telemetry.RecordToolDuration(ctx, "ledger", "", 30*time.Millisecond)
	telemetry.RecordToolDuration(ctx, "ledger", "", 50*time.Millisecond)
	telemetry.RecordToolDuration(ctx, "ledger", "timeout", 2*time.Second)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || len(rm.ScopeMetrics[0].Metrics) != 1 {
		t.Fatalf("metrics %+v, want one", rm.ScopeMetrics)
	}
	sm := rm.ScopeMetrics[0]
	m := sm.Metrics[0]
	if m.Name != "gen_ai.execute_tool.duration" || m.Unit != "s" || sm.Scope.SchemaURL != telemetry.GenAISchemaURL {
		t.Errorf("metric %q unit %q schema %q", m.Name, m.Unit, sm.Scope.SchemaURL)
	}
	h := m.Data.(metricdata.Histogram[float64])
	type point struct {
		Attrs  map[string]string
		Count  uint64
		Bounds int
	}
	var got []point
	for _, dp := range h.DataPoints {
		attrs := map[string]string{}
		for _, kv := range dp.Attributes.ToSlice() {
			attrs[string(kv.Key)] = kv.Value.AsString()
		}
		got = append(got, point{attrs, dp.Count, len(dp.Bounds)})
	}
	slices.SortFunc(got, func(a, b point) int { return int(a.Count) - int(b.Count) })
	base := map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ledger", "gen_ai.tool.type": "extension"}
	failed := map[string]string{"error.type": "timeout"}
	for k, v := range base {
		failed[k] = v
	}
	want := []point{{failed, 1, 14}, {base, 2, 14}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("data points (-want +got):\n%s", diff)
	}
}

// TestGenAISignalsReachAnOTLPReceiver sends a GenAI span, an evaluation
// event and a tool duration through Setup's exporters to a real OTLP/HTTP
// receiver on loopback, which decodes the protobuf requests.
func TestGenAISignalsReachAnOTLPReceiver(t *testing.T) {
	rcv := telemetrytest.NewReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{
		ServiceName: "agentplane-test", Getenv: func(k string) string { return env[k] },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := telemetry.Tracer("test").Start(context.Background(), "execute_tool ledger.getTransaction")
	telemetry.RecordToolDuration(ctx, "ledger", "", 20*time.Millisecond)
	score := 0.4
	telemetry.EmitEvaluation(ctx, telemetry.Evaluation{Name: "judge", Score: &score, Label: "fail", Explanation: "wrong account"})
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	all := rcv.Received()
	traces, logs, metrics := all["/v1/traces"], all["/v1/logs"], all["/v1/metrics"]
	if !slices.Contains(traces.Spans, "execute_tool ledger.getTransaction") || !slices.Contains(traces.Schemas, telemetry.GenAISchemaURL) {
		t.Errorf("traces: spans %v schemas %v", traces.Spans, traces.Schemas)
	}
	if !slices.Contains(metrics.Metrics, "gen_ai.execute_tool.duration") || !slices.Contains(metrics.Schemas, telemetry.GenAISchemaURL) {
		t.Errorf("metrics: %v schemas %v", metrics.Metrics, metrics.Schemas)
	}
	if len(logs.Logs) != 1 || logs.Events[0] != "gen_ai.evaluation.result" || logs.Schemas[0] != telemetry.GenAISchemaURL {
		t.Fatalf("logs: events %v schemas %v", logs.Events, logs.Schemas)
	}
	l := logs.Logs[0]
	attrs := telemetrytest.LogAttrs(l)
	want := map[string]any{"gen_ai.evaluation.name": "judge", "gen_ai.evaluation.score.value": 0.4,
		"gen_ai.evaluation.score.label": "fail", "gen_ai.evaluation.explanation": "wrong account"}
	if diff := cmp.Diff(want, attrs); diff != "" {
		t.Errorf("evaluation event attributes (-want +got):\n%s", diff)
	}
	if hex.EncodeToString(l.GetTraceId()) != trace.SpanContextFromContext(ctx).TraceID().String() {
		t.Errorf("the event's trace id %x is not its span's", l.GetTraceId())
	}
}
