// Package telemetrytest keeps what agentplane emits through OpenTelemetry
// in memory, for tests: the log records of the Logs SDK.
package telemetrytest

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// Logs is an in-memory log exporter: it keeps every record it is handed.
type Logs struct {
	mu      sync.Mutex
	records []sdklog.Record
}

// Export keeps recs.
func (l *Logs) Export(_ context.Context, recs []sdklog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.records = append(l.records, r.Clone())
	}
	return nil
}

// Shutdown does nothing.
func (l *Logs) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing.
func (l *Logs) ForceFlush(context.Context) error { return nil }

// Records returns the records kept so far.
func (l *Logs) Records() []sdklog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sdklog.Record(nil), l.records...)
}

// RecordLogs installs, for the length of the test, a global LoggerProvider
// that hands every record to the Logs it returns as it is emitted.
func RecordLogs(t testing.TB) *Logs {
	t.Helper()
	exp := &Logs{}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)))
	prev := otel.GetLoggerProvider()
	otel.SetLoggerProvider(lp)
	t.Cleanup(func() {
		otel.SetLoggerProvider(prev)
		_ = lp.Shutdown(context.Background())
	})
	return exp
}

// Attrs are a record's attributes as a map of their values.
func Attrs(r sdklog.Record) map[string]any {
	m := map[string]any{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		m[string(kv.Key)] = kv.Value.AsInterface()
		return true
	})
	return m
}
