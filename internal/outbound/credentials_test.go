package outbound

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestCredentialsAreAddedBeneathTracingForTheirOriginOnly(t *testing.T) {
	var mu sync.Mutex
	var seen []string // "path?query Authorization" of each request
	record := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Authorization"))
	}
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { record(r) })
	api := serve(t, func(w http.ResponseWriter, r *http.Request) {
		record(r)
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/landed?a=1", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
		}
	})
	target, _ := url.Parse(api.URL)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, parent := tp.Tracer("test").Start(context.Background(), "call")
	ctx = WithCredentials(ctx, target, func(r *http.Request) {
		q := r.URL.Query()
		q.Set("key", "k3y")
		r.URL.RawQuery = q.Encode()
		r.Header.Set("Authorization", "Bearer t0ken")
	})

	client := New(Options{AllowPrivate: true}).HTTPClient()
	for _, path := range []string{"/same", "/away"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.URL.RawQuery != "" || req.Header.Get("Authorization") != "" {
			t.Errorf("%s: the caller's request was changed: %s %v", path, req.URL, req.Header)
		}
		if u := resp.Request.URL.String(); strings.Contains(u, "k3y") || resp.Request.Header.Get("Authorization") != "" {
			t.Errorf("%s: the response's request carries the credentials: %s %v", path, u, resp.Request.Header)
		}
	}
	parent.End()

	want := []string{
		"/same?key=k3y Bearer t0ken",
		"/landed?a=1&key=k3y Bearer t0ken", // a redirect within the origin keeps them
		"/away?key=k3y Bearer t0ken",
		"/steal? ", // another origin gets neither
	}
	mu.Lock()
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("requests the servers saw (-want +got):\n%s", diff)
	}
	mu.Unlock()
	var urls int
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "url.full" {
				urls++
			}
			if v := kv.Value.String(); strings.Contains(v, "k3y") || strings.Contains(v, "t0ken") {
				t.Errorf("span %q: %s = %s", s.Name(), kv.Key, v)
			}
		}
	}
	if urls != 4 {
		t.Errorf("%d client spans recorded a URL, want 4", urls)
	}
}
