package telemetrytest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Export is what a Receiver got at one path: the span names of trace
// exports, the event names and records of log exports, the metric names of
// metric exports, and the schema URL of each scope.
type Export struct {
	Method, Path, Tenant string
	Spans                []string
	Events               []string
	Metrics              []string
	Schemas              []string
	Logs                 []*logspb.LogRecord
	Traces               []*tracepb.Span
}

// Receiver is a real OTLP/HTTP receiver on loopback: it decodes the
// protobuf requests of /v1/traces, /v1/logs and /v1/metrics (any other
// path as a trace export) and keeps what they carry.
type Receiver struct {
	// URL is the receiver's base URL, an OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string
	mu  sync.Mutex
	got map[string]Export
}

// NewReceiver starts a Receiver for the length of the test.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	rcv := &Receiver{got: map[string]Export{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("gunzip export: %v", err)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(io.LimitReader(body, 64<<20))
		if err != nil {
			t.Errorf("read export: %v", err)
			return
		}
		e := Export{Method: r.Method, Path: r.URL.Path, Tenant: r.Header.Get("X-Tenant")}
		if err := e.decode(raw); err != nil {
			t.Errorf("decode export to %s: %v", r.URL.Path, err)
		}
		rcv.add(e)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	rcv.URL = srv.URL
	return rcv
}

// decode fills e from the protobuf request raw sent to e.Path.
func (e *Export) decode(raw []byte) error {
	switch e.Path {
	case "/v1/logs":
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			return err
		}
		for _, rl := range req.GetResourceLogs() {
			for _, sl := range rl.GetScopeLogs() {
				e.Schemas = append(e.Schemas, sl.GetSchemaUrl())
				for _, l := range sl.GetLogRecords() {
					e.Events = append(e.Events, l.GetEventName())
					e.Logs = append(e.Logs, l)
				}
			}
		}
	case "/v1/metrics":
		var req colmetricspb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			return err
		}
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				e.Schemas = append(e.Schemas, sm.GetSchemaUrl())
				for _, m := range sm.GetMetrics() {
					e.Metrics = append(e.Metrics, m.GetName())
				}
			}
		}
	default:
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			return err
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				e.Schemas = append(e.Schemas, ss.GetSchemaUrl())
				for _, s := range ss.GetSpans() {
					e.Spans = append(e.Spans, s.GetName())
					e.Traces = append(e.Traces, s)
				}
			}
		}
	}
	return nil
}

// add merges e into what was received at its path.
func (rcv *Receiver) add(e Export) {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	prev := rcv.got[e.Path]
	e.Spans = append(prev.Spans, e.Spans...)
	e.Events = append(prev.Events, e.Events...)
	e.Metrics = append(prev.Metrics, e.Metrics...)
	e.Schemas = append(prev.Schemas, e.Schemas...)
	e.Logs = append(prev.Logs, e.Logs...)
	e.Traces = append(prev.Traces, e.Traces...)
	rcv.got[e.Path] = e
}

// Received returns what the receiver got so far, by path.
func (rcv *Receiver) Received() map[string]Export {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	out := make(map[string]Export, len(rcv.got))
	for k, v := range rcv.got {
		out[k] = v
	}
	return out
}

// LogAttrs are an exported log record's attributes: strings, doubles,
// integers and booleans by key.
func LogAttrs(l *logspb.LogRecord) map[string]any { return attrs(l.GetAttributes()) }

// SpanAttrs are an exported span's attributes, as LogAttrs.
func SpanAttrs(s *tracepb.Span) map[string]any { return attrs(s.GetAttributes()) }

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = v.GetDoubleValue()
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = v.GetIntValue()
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = v.GetBoolValue()
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}
