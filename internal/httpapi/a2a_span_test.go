package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/telemetry"
)

// TestA2AServerSpans checks the A2A server span of each A2A request, on
// both bindings (OpenTelemetry GenAI conventions gen-ai 1.42, a2a.server):
// named after the A2A method, a child of the request's HTTP server span,
// with the message, the task and its state, its context as the
// conversation, and error.type when the method fails. Not parallel: it
// installs the global TracerProvider.
func TestA2AServerSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); tp.Shutdown(context.Background()) })

	h := newHarness(t)
	newFraudWorld(t, h)
	tok := h.token("acme", "agents:invoke tool:*")
	rep := h.rpc(t, "fraud-triage", tok, "SendMessage", map[string]any{
		"message": a2aMessage("m-span-1", "triage tx-9", map[string]any{"transaction_id": "tx-9"})})
	if rep.Error != nil {
		t.Fatalf("SendMessage: %+v", rep.Error)
	}
	var sent struct {
		Task a2aTaskJSON `json:"task"`
	}
	json.Unmarshal(rep.Result, &sent)
	task := sent.Task
	if r := h.do("GET", "/a2a/fraud-triage/tasks/"+task.ID, tok, nil); r.Status != 200 {
		t.Fatalf("GET tasks/{id}: %d %s", r.Status, r.Body)
	}
	if rep := h.rpc(t, "fraud-triage", tok, "GetTask", map[string]any{"id": "wf_nope"}); rep.Error == nil {
		t.Fatal("GetTask of no task succeeded")
	}
	if r := h.do("GET", "/a2a/fraud-triage/tasks/wf_nope", tok, nil); r.Status != 404 {
		t.Fatalf("GET tasks/wf_nope: %d", r.Status)
	}

	spans := rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	var got []map[string]any
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindServer || s.InstrumentationScope().Name != "github.com/agentplane/agentplane/internal/a2a" {
			continue
		}
		if s.InstrumentationScope().SchemaURL != telemetry.GenAISchemaURL {
			t.Errorf("span %s: schema URL %q", s.Name(), s.InstrumentationScope().SchemaURL)
		}
		parent, ok := byID[s.Parent().SpanID()]
		if !ok || parent.SpanKind() != trace.SpanKindServer || parent.Name() == s.Name() {
			t.Errorf("span %s is not a child of its request's HTTP server span", s.Name())
		}
		attrs := map[string]any{"name": s.Name(), "http": parent.Name()}
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "client.address", "client.port":
				continue // the test client's
			}
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		got = append(got, attrs)
	}
	common := func(m map[string]any) map[string]any {
		m["a2a.protocol.version"], m["gen_ai.agent.name"], m["gen_ai.agent.version"] = "1.0", "fraud-triage", "1"
		return m
	}
	want := []map[string]any{
		common(map[string]any{"name": "SendMessage", "http": "POST /a2a/{agent}", "a2a.method.name": "SendMessage",
			"a2a.message.id": "m-span-1", "a2a.task.id": task.ID, "a2a.task.state": "TASK_STATE_COMPLETED",
			"gen_ai.conversation.id": task.ContextID}),
		common(map[string]any{"name": "GetTask", "http": "GET /a2a/{agent}/tasks/{task}", "a2a.method.name": "GetTask",
			"a2a.task.id": task.ID, "a2a.task.state": "TASK_STATE_COMPLETED", "gen_ai.conversation.id": task.ContextID}),
		common(map[string]any{"name": "GetTask", "http": "POST /a2a/{agent}", "a2a.method.name": "GetTask",
			"a2a.task.id": "wf_nope", "error.type": "-32001"}),
		common(map[string]any{"name": "GetTask", "http": "GET /a2a/{agent}/tasks/{task}", "a2a.method.name": "GetTask",
			"a2a.task.id": "wf_nope", "error.type": "404"}),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("A2A server spans (-want +got):\n%s", diff)
	}
}
