package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/telemetry"
)

// recordSpans records every span, the HTTP client spans of the outbound
// transport (made with the global provider) included.
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, trace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec, tp
}

// chatSpan is the one chat span recorded.
func chatSpan(t *testing.T, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "chat ") {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d chat spans, want 1", len(found))
	}
	return found[0]
}

// noSecretInSpans fails when any attribute, event or status of any span
// holds the secret.
func noSecretInSpans(t *testing.T, rec *tracetest.SpanRecorder) {
	t.Helper()
	for _, s := range rec.Ended() {
		texts := []string{s.Name(), s.Status().Description}
		kvs := append([]attribute.KeyValue{}, s.Attributes()...)
		for _, e := range s.Events() {
			texts = append(texts, e.Name)
			kvs = append(kvs, e.Attributes...)
		}
		for _, kv := range kvs {
			texts = append(texts, kv.Value.String())
		}
		for _, x := range texts {
			if strings.Contains(x, testSecret) {
				t.Errorf("span %q carries the secret: %s", s.Name(), x)
			}
		}
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func TestChatSpan(t *testing.T) {
	for _, p := range providers {
		for _, capture := range []bool{false, true} {
			t.Run(p.name+map[bool]string{false: "/metadata", true: "/content"}[capture], func(t *testing.T) {
				rec, tp := recordSpans(t)
				srv := p.newServer(t, llmtest.Sequence(llmtest.Answer{Text: "settled", ID: "resp-9", Model: "test-model-1-2026", InputTokens: 42, OutputTokens: 7}))
				opts := testOptions(t)
				opts.TracerProvider, opts.CaptureContent = tp, capture
				// A workflow's completion is of its conversation.
				ctx := telemetry.WithConversation(context.Background(), "wf_chat")
				if _, err := newClient(t, opts, testModel(p.name, srv)).Complete(ctx, conversation()); err != nil {
					t.Fatal(err)
				}
				s := chatSpan(t, rec)
				if s.Name() != "chat test-model-1" || s.SpanKind() != trace.SpanKindClient || s.Status().Code == codes.Error {
					t.Errorf("span %q kind %v status %v", s.Name(), s.SpanKind(), s.Status())
				}
				if schema := s.InstrumentationScope().SchemaURL; schema != telemetry.GenAISchemaURL {
					t.Errorf("schema URL %q, want %q", schema, telemetry.GenAISchemaURL)
				}
				got := attrs(s)
				want := map[string]any{
					"gen_ai.operation.name":          "chat",
					"gen_ai.provider.name":           p.name,
					"gen_ai.request.model":           "test-model-1",
					"gen_ai.request.temperature":     0.2,
					"gen_ai.request.max_tokens":      int64(300),
					"gen_ai.response.model":          "test-model-1-2026",
					"gen_ai.response.id":             "resp-9",
					"gen_ai.response.finish_reasons": []string{"stop"},
					"gen_ai.usage.input_tokens":      int64(42),
					"gen_ai.usage.output_tokens":     int64(7),
					"server.address":                 "127.0.0.1",
					"gen_ai.conversation.id":         "wf_chat",
				}
				in, out := got["gen_ai.input.messages"], got["gen_ai.output.messages"]
				delete(got, "gen_ai.input.messages")
				delete(got, "gen_ai.output.messages")
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("attributes (-want +got):\n%s", diff)
				}
				if !capture {
					if in != nil || out != nil {
						t.Errorf("content recorded without CaptureContent: %v %v", in, out)
					}
					return
				}
				var msgs []message
				if err := json.Unmarshal([]byte(in.(string)), &msgs); err != nil || len(msgs) != 2 || msgs[1].Parts[0].Content != "Is payment p1 settled?" {
					t.Errorf("gen_ai.input.messages %v (%v)", in, err)
				}
				if out != `[{"role":"assistant","parts":[{"type":"text","content":"settled"}],"finish_reason":"stop"}]` {
					t.Errorf("gen_ai.output.messages %v", out)
				}
				noSecretInSpans(t, rec)
			})
		}
	}
}

func TestFailedChatSpanHasNoSecret(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			rec, tp := recordSpans(t)
			srv := p.newServer(t, llmtest.Sequence(llmtest.Error(401, "Incorrect API key provided: "+testSecret)))
			opts := testOptions(t)
			opts.TracerProvider, opts.CaptureContent = tp, true
			_, err := newClient(t, opts, testModel(p.name, srv)).Complete(context.Background(), conversation())
			llmError(t, err)
			s := chatSpan(t, rec)
			if s.Status().Code != codes.Error || attrs(s)["error.type"] != "401" {
				t.Errorf("status %v, error.type %v", s.Status(), attrs(s)["error.type"])
			}
			if len(rec.Ended()) < 2 {
				t.Errorf("%d spans: the HTTP client span of the request is missing", len(rec.Ended()))
			}
			noSecretInSpans(t, rec)
		})
	}
}

func TestTokenMetrics(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(
		llmtest.Answer{Text: "a", InputTokens: 100, OutputTokens: 20},
		llmtest.Answer{Text: "b", InputTokens: 50, OutputTokens: 5},
		llmtest.Error(400, "bad request"),
	))
	opts := testOptions(t)
	opts.Metrics = telemetry.NewMetrics(prometheus.NewRegistry())
	c := newClient(t, opts, testModel(model.OpenAI, srv))
	for range 3 {
		_, _ = c.Complete(context.Background(), conversation())
	}
	w := httptest.NewRecorder()
	opts.Metrics.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	for _, line := range []string{
		`agentplane_llm_tokens_total{direction="input",model="helper"} 150`,
		`agentplane_llm_tokens_total{direction="output",model="helper"} 25`,
		`agentplane_llm_request_duration_seconds_count{model="helper"} 3`,
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}
