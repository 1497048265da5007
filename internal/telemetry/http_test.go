package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/telemetry"
)

const (
	incomingTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingParent  = "00f067aa0ba902b7"
	traceparent     = "00-" + incomingTraceID + "-" + incomingParent + "-01"
)

// setup installs tracing without an exporter for the length of the test.
func setup(t *testing.T) {
	t.Helper()
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{
		ServiceName: "agentplane-test",
		Getenv:      func(string) string { return "" },
	})
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		if err := shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
}

// recordSpans installs a TracerProvider that keeps every ended span.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	setup(t) // the propagator
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return rec
}

// get sends a request to url with the given headers and returns the body.
func get(t *testing.T, method, url string, header http.Header) string {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(body)
}

// traceIDServer serves the trace id of each request's context.
func traceIDServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tools", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, telemetry.TraceID(r.Context()))
	})
	srv := httptest.NewServer(telemetry.Middleware(mux, telemetry.MuxRoute(mux)))
	t.Cleanup(srv.Close)
	return srv
}

func TestMiddlewareContinuesAnIncomingTrace(t *testing.T) {
	setup(t)
	srv := traceIDServer(t)

	got := get(t, "POST", srv.URL+"/v1/tools", http.Header{"Traceparent": {traceparent}})

	if got != incomingTraceID {
		t.Errorf("TraceID in the handler = %q, want %q", got, incomingTraceID)
	}
}

func TestMiddlewareStartsATraceWithoutTraceparent(t *testing.T) {
	setup(t)
	srv := traceIDServer(t)

	first := get(t, "POST", srv.URL+"/v1/tools", nil)
	second := get(t, "POST", srv.URL+"/v1/tools", nil)

	for _, id := range []string{first, second} {
		if len(id) != 32 || id == strings.Repeat("0", 32) {
			t.Errorf("TraceID in the handler = %q, want 32 hex digits, not all zero", id)
		}
	}
	if first == second {
		t.Errorf("two requests share trace id %q", first)
	}
}

// TestTransportPropagatesTheTrace sends a request on from a handler, with
// nothing exported (no span or metric recorded for the two requests) and
// with spans recorded (otelhttp's client and server spans).
func TestTransportPropagatesTheTrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		install func(t *testing.T) *tracetest.SpanRecorder
	}{
		{"nothing exported", func(t *testing.T) *tracetest.SpanRecorder { setup(t); return nil }},
		{"spans recorded", recordSpans},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.install(t)
			gotTraceparent := make(chan string, 1)
			downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotTraceparent <- r.Header.Get("Traceparent")
			}))
			t.Cleanup(downstream.Close)
			client := &http.Client{Transport: telemetry.Transport(http.DefaultTransport)}

			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/agents/{id}/invoke", func(w http.ResponseWriter, r *http.Request) {
				req, err := http.NewRequestWithContext(r.Context(), "GET", downstream.URL, nil)
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Accept", "text/plain")
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("call downstream: %v", err)
					return
				}
				resp.Body.Close()
				if len(req.Header) != 1 {
					t.Errorf("the caller's request headers are now %v, want them as they were", req.Header)
				}
			})
			srv := httptest.NewServer(telemetry.Middleware(mux, nil))
			t.Cleanup(srv.Close)

			get(t, "POST", srv.URL+"/v1/agents/a/invoke", http.Header{"Traceparent": {traceparent}})

			got := <-gotTraceparent
			parts := strings.Split(got, "-")
			if len(parts) != 4 || parts[1] != incomingTraceID || parts[3] != "01" {
				t.Fatalf("downstream traceparent = %q, want trace id %s, sampled", got, incomingTraceID)
			}
			if parts[2] == incomingParent {
				t.Errorf("downstream parent span = the caller's span %s, want agentplane's client span", parts[2])
			}
			if rec == nil {
				return
			}
			var kinds []string
			for _, s := range rec.Ended() {
				kinds = append(kinds, s.SpanKind().String())
				if s.SpanKind() == trace.SpanKindClient && s.SpanContext().SpanID().String() != parts[2] {
					t.Errorf("client span %s, downstream parent %s: want the same", s.SpanContext().SpanID(), parts[2])
				}
			}
			slices.Sort(kinds)
			if want := []string{"client", "server"}; !slices.Equal(kinds, want) {
				t.Errorf("spans recorded: %v, want %v", kinds, want)
			}
		})
	}
}

func TestMiddlewareNamesSpansAfterTheRoute(t *testing.T) {
	// copyRequest stands for middleware that passes the mux a copy of the
	// request, which hides r.Pattern from the outer middleware.
	type copyKey struct{}
	copyRequest := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), copyKey{}, 1)))
		})
	}
	newMux := func(setRoute bool) *http.ServeMux {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/tools/{id}", func(w http.ResponseWriter, r *http.Request) {
			if setRoute {
				telemetry.SetRoute(r)
			}
		})
		return mux
	}
	tests := []struct {
		name    string
		handler func() http.Handler
		path    string
		want    string
	}{
		{
			name:    "route known before routing",
			handler: func() http.Handler { mux := newMux(false); return telemetry.Middleware(mux, telemetry.MuxRoute(mux)) },
			path:    "/v1/tools/tool_1",
			want:    "GET /v1/tools/{id}",
		},
		{
			name:    "pattern read after routing",
			handler: func() http.Handler { return telemetry.Middleware(newMux(false), nil) },
			path:    "/v1/tools/tool_1",
			want:    "GET /v1/tools/{id}",
		},
		{
			name:    "route set from inside the mux",
			handler: func() http.Handler { return telemetry.Middleware(copyRequest(newMux(true)), nil) },
			path:    "/v1/tools/tool_1",
			want:    "GET /v1/tools/{id}",
		},
		{
			name:    "no route matched",
			handler: func() http.Handler { mux := newMux(false); return telemetry.Middleware(mux, telemetry.MuxRoute(mux)) },
			path:    "/nowhere",
			want:    "GET",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := recordSpans(t)
			srv := httptest.NewServer(tc.handler())
			t.Cleanup(srv.Close)

			get(t, "GET", srv.URL+tc.path, nil)
			srv.Close() // wait for the handler, and so the span, to end

			var names []string
			for _, s := range rec.Ended() {
				names = append(names, s.Name())
			}
			if diff := cmp.Diff([]string{tc.want}, names); diff != "" {
				t.Errorf("span names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTraceIDWithoutSpan(t *testing.T) {
	if got := telemetry.TraceID(context.Background()); got != "" {
		t.Errorf("TraceID(background) = %q, want \"\"", got)
	}
}
