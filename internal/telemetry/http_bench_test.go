package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentplane/agentplane/internal/telemetry"
)

// BenchmarkHTTPTelemetry is what tracing costs a request served and a
// request sent with nothing exported: the path taken now, and otelhttp's
// with the SDK's meter provider that no reader reads (as before).
//
//	go test -run '^$' -bench HTTPTelemetry -benchmem ./internal/telemetry
func BenchmarkHTTPTelemetry(b *testing.B) {
	for _, tc := range []struct {
		name    string
		install func(b *testing.B)
	}{
		{"nothing exported", func(*testing.B) {}},
		{"otelhttp, metrics unread", func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider()
			otel.SetMeterProvider(mp)
			b.Cleanup(func() { mp.Shutdown(context.Background()) })
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{
				ServiceName: "agentplane-bench",
				Getenv:      func(string) string { return "" },
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { shutdown(context.Background()) })
			tc.install(b)

			answer := func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
			}
			client := &http.Client{Transport: telemetry.Transport(roundTripper(answer))}
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/agents/{id}/invoke", func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), "POST", "http://model.test/v1/chat/completions", strings.NewReader("{}"))
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				w.Write([]byte("{}"))
			})
			h := telemetry.Middleware(mux, telemetry.MuxRoute(mux))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/v1/agents/a/invoke", strings.NewReader("{}"))
				r.Header.Set("Traceparent", traceparent)
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
