package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/agentplane/agentplane/internal/redact"
)

// GenAISchemaURL is the schema of the OpenTelemetry GenAI semantic
// conventions agentplane's spans, metrics and events follow: gen-ai 1.42.0,
// published by open-telemetry/semantic-conventions-genai.
const GenAISchemaURL = "https://opentelemetry.io/schemas/gen-ai/1.42.0"

// scope is the instrumentation scope of the meter and logger of this
// package's GenAI signals.
const scope = "github.com/agentplane/agentplane/internal/telemetry"

// Attribute keys of the GenAI conventions shared across packages.
const (
	KeyOperation      = attribute.Key("gen_ai.operation.name")
	KeyConversationID = attribute.Key("gen_ai.conversation.id")
	KeyToolName       = attribute.Key("gen_ai.tool.name")
	KeyToolType       = attribute.Key("gen_ai.tool.type")
	KeyErrorType      = attribute.Key("error.type")
)

// Tracer returns the tracer of the instrumentation scope name, stamped
// with GenAISchemaURL, that starts each span on the global TracerProvider
// of that moment: a package-level tracer follows a provider installed after
// it was made (Setup's, a test's), which otel.Tracer's does only for the
// first provider installed.
func Tracer(name string) trace.Tracer {
	return globalTracer{name: name}
}

type globalTracer struct {
	embedded.Tracer
	name string
}

func (g globalTracer) Start(ctx context.Context, spanName string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return TracerFrom(otel.GetTracerProvider(), g.name).Start(ctx, spanName, opts...)
}

// TracerFrom is Tracer over tp.
func TracerFrom(tp trace.TracerProvider, name string) trace.Tracer {
	return tp.Tracer(name, trace.WithSchemaURL(GenAISchemaURL))
}

// conversationKey is the context key of the GenAI conversation id.
type conversationKey struct{}

// WithConversation returns ctx carrying id as the GenAI conversation of the
// spans started under it (a workflow's id: SPEC §5).
func WithConversation(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, conversationKey{}, id)
}

// Conversation returns the GenAI conversation id ctx carries, or "".
func Conversation(ctx context.Context) string {
	id, _ := ctx.Value(conversationKey{}).(string)
	return id
}

// toolDurationBuckets are the explicit bounds the conventions give GenAI
// duration histograms, in seconds.
var toolDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

// instruments holds the GenAI instruments made from one MeterProvider, so
// that a provider installed later (a test's, Setup's) gets its own.
type instruments struct {
	provider     metric.MeterProvider
	toolDuration metric.Float64Histogram
}

var (
	instrumentsMu sync.Mutex
	current       *instruments
)

// genAIInstruments returns the instruments of the global MeterProvider.
func genAIInstruments() *instruments {
	mp := otel.GetMeterProvider()
	instrumentsMu.Lock()
	defer instrumentsMu.Unlock()
	if current != nil && current.provider == mp {
		return current
	}
	m := mp.Meter(scope, metric.WithSchemaURL(GenAISchemaURL))
	// An instrument that fails to build is a no-op; the name and unit are
	// constants, so it does not.
	h, _ := m.Float64Histogram("gen_ai.execute_tool.duration",
		metric.WithUnit("s"),
		metric.WithDescription("The duration of a single tool execution."),
		metric.WithExplicitBucketBoundaries(toolDurationBuckets...))
	current = &instruments{provider: mp, toolDuration: h}
	return current
}

// ToolTypeExtension is the gen_ai.tool.type of agentplane's tools: called
// by the platform on the agent's behalf, straight to an external API.
const ToolTypeExtension = "extension"

// RecordToolDuration records one tool execution on the
// gen_ai.execute_tool.duration histogram: d is its execute_tool span's
// duration, errType its error_code ("" for a success).
func RecordToolDuration(ctx context.Context, toolName, errType string, d time.Duration) {
	attrs := []attribute.KeyValue{
		KeyOperation.String("execute_tool"),
		KeyToolName.String(toolName),
		KeyToolType.String(ToolTypeExtension),
	}
	if errType != "" {
		attrs = append(attrs, KeyErrorType.String(errType))
	}
	genAIInstruments().toolDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}

// EvaluationEvent is the name of the log event of one evaluation result.
const EvaluationEvent = "gen_ai.evaluation.result"

// Evaluation is one evaluation result of a GenAI output: a replay's check
// or judge.
type Evaluation struct {
	// Name is gen_ai.evaluation.name: the check's name.
	Name string
	// Score is gen_ai.evaluation.score.value, when the evaluator scores.
	Score *float64
	// Label is gen_ai.evaluation.score.label: "pass" or "fail"; "" for a
	// result that errored.
	Label string
	// Explanation is gen_ai.evaluation.explanation: the judge's reason, or
	// why the check could not be evaluated.
	Explanation string
	// ErrorType is error.type of an evaluation that could not be made.
	ErrorType string
	// Attrs are further attributes (agentplane.*, gen_ai.conversation.id).
	Attrs []attribute.KeyValue
}

// EmitEvaluation emits ev as a gen_ai.evaluation.result log event through
// the global LoggerProvider, in ctx's trace and span. The explanation is
// masked by the masker ctx carries, as span attributes are.
func EmitEvaluation(ctx context.Context, ev Evaluation) {
	logger := otel.GetLoggerProvider().Logger(scope, otellog.WithSchemaURL(GenAISchemaURL))
	var rec otellog.Record
	rec.SetEventName(EvaluationEvent)
	rec.SetTimestamp(time.Now())
	rec.SetObservedTimestamp(time.Now())
	rec.SetSeverity(otellog.SeverityInfo)
	rec.SetSeverityText("INFO")
	rec.AddAttributes(attribute.String("gen_ai.evaluation.name", ev.Name))
	if ev.Score != nil {
		rec.AddAttributes(attribute.Float64("gen_ai.evaluation.score.value", *ev.Score))
	}
	if ev.Label != "" {
		rec.AddAttributes(attribute.String("gen_ai.evaluation.score.label", ev.Label))
	}
	if ev.Explanation != "" {
		rec.AddAttributes(attribute.String("gen_ai.evaluation.explanation", redact.TextIn(ctx, ev.Explanation)))
	}
	if ev.ErrorType != "" {
		rec.AddAttributes(attribute.String(string(KeyErrorType), ev.ErrorType))
	}
	rec.AddAttributes(ev.Attrs...)
	logger.Emit(ctx, rec)
}
