package outbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentplane/agentplane/internal/problem"
)

// TestH2CHTTPClient: the h2c client's requests are HTTP/2 on a server that
// speaks only unencrypted HTTP/2, through the same stack as HTTPClient's:
// credentials for the origin applied, trace context propagated, and the
// address policy checked on the dial.
func TestH2CHTTPClient(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	var mu sync.Mutex
	var proto int
	var auth, traceparent string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		proto, auth, traceparent = r.ProtoMajor, r.Header.Get("Authorization"), r.Header.Get("traceparent")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	defer span.End()
	ctx = WithCredentials(ctx, target, func(r *http.Request) { r.Header.Set("Authorization", "Bearer sk-h2c") })
	get := func(c *Client) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := c.H2CHTTPClient().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	if err := get(New(Options{AllowPrivate: true})); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if proto != 2 || auth != "Bearer sk-h2c" || !strings.HasPrefix(traceparent, "00-"+span.SpanContext().TraceID().String()+"-") {
		t.Errorf("the server saw HTTP/%d, Authorization %q, traceparent %q; want HTTP/2, the credentials and the trace", proto, auth, traceparent)
	}
	mu.Unlock()

	if err := get(New(Options{})); !problem.Is(FetchError(err, 0), problem.URLNotAllowed) {
		t.Errorf("a loopback h2c request without private networks: %v, want url-not-allowed", err)
	}
	// The shared transport speaks HTTP/1.1 to an http:// URL: this server
	// does not answer it.
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if resp, err := New(Options{AllowPrivate: true}).HTTPClient().Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("HTTPClient reached an h2c-only server: %s", resp.Proto)
	}
}
