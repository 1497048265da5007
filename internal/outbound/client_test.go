package outbound

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentplane/agentplane/internal/problem"
)

// kindOf reduces an error to its problem code and detail, or the error text.
type kindOf struct {
	Code   problem.Code
	Detail string
}

func errKind(err error) kindOf {
	if err == nil {
		return kindOf{}
	}
	var pe *problem.Error
	if !errors.As(err, &pe) {
		return kindOf{Code: "not a problem", Detail: err.Error()}
	}
	return kindOf{Code: pe.Code, Detail: pe.Detail}
}

func TestClass(t *testing.T) {
	tests := []struct {
		ip   string
		want string
	}{
		{"8.8.8.8", ""},
		{"172.32.0.1", ""},
		{"2606:4700::1111", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "shared (CGNAT)"},
		{"255.255.255.255", "reserved"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:169.254.169.254", "link-local"},
		{"64:ff9b::a9fe:a9fe", "link-local"},
		{"64:ff9b::808:808", ""},
		// IPv4-compatible (::/96): the IPv4 address in the last 32 bits.
		{"::127.0.0.1", "loopback"},
		{"::7f00:1", "loopback"},
		{"::10.0.0.1", "private"},
		{"::a9fe:a9fe", "link-local"},
		{"::8.8.8.8", ""},
		// 6to4 (2002::/16): the IPv4 address in bits 16 to 47.
		{"2002:7f00:1::", "loopback"},
		{"2002:a00:1::1", "private"},
		{"2002:a9fe:a9fe::", "link-local"},
		{"2002:c0a8:101:1::1", "private"},
		{"2002:808:808::1", ""},
		// NAT64: the well-known prefix (64:ff9b::/96) by its IPv4 address;
		// local-use (64:ff9b:1::/48) whatever it carries.
		{"64:ff9b::10.1.2.3", "private"},
		{"64:ff9b::127.0.0.1", "loopback"},
		{"64:ff9b:1::7f00:1", "local-use NAT64"},
		{"64:ff9b:1::808:808", "local-use NAT64"},
		{"64:ff9b:1:808:8:800::", "local-use NAT64"},
	}
	for _, tc := range tests {
		t.Run(tc.ip, func(t *testing.T) {
			if got := Class(netip.MustParseAddr(tc.ip)); got != tc.want {
				t.Errorf("Class(%s) = %q, want %q", tc.ip, got, tc.want)
			}
		})
	}
}

func TestCheckAddrDetail(t *testing.T) {
	tests := []struct {
		ip   string
		want kindOf
	}{
		{"127.0.0.1", kindOf{problem.URLNotAllowed, "127.0.0.1 is a loopback address" + AllowHint}},
		{"::ffff:127.0.0.1", kindOf{problem.URLNotAllowed, "127.0.0.1 is a loopback address" + AllowHint}},
		{"169.254.169.254", kindOf{problem.URLNotAllowed, "169.254.169.254 is a link-local address" + AllowHint}},
		{"0.0.0.0", kindOf{problem.URLNotAllowed, "0.0.0.0 is an unspecified address" + AllowHint}},
		{"93.184.215.14", kindOf{}},
	}
	for _, tc := range tests {
		t.Run(tc.ip, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errKind(CheckAddr(netip.MustParseAddr(tc.ip)))); diff != "" {
				t.Errorf("CheckAddr (-want +got):\n%s", diff)
			}
		})
	}
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func portOf(t *testing.T, srv *httptest.Server) uint16 {
	t.Helper()
	ap, err := netip.ParseAddrPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}

func TestFetchPolicy(t *testing.T) {
	doc := serve(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "openapi: 3.1.0") })
	port := strconv.Itoa(int(portOf(t, doc)))
	tests := []struct {
		name string
		opts Options
		url  string
		want kindOf
	}{
		{"literal loopback refused", Options{}, doc.URL, kindOf{problem.URLNotAllowed, "127.0.0.1 is a loopback address" + AllowHint}},
		{"name resolving to loopback refused at dial", Options{}, "http://localhost:" + port + "/", kindOf{Code: problem.URLNotAllowed}},
		{"metadata name refused", Options{}, "http://metadata.google.internal/computeMetadata/v1/", kindOf{problem.URLNotAllowed, "metadata.google.internal is a cloud metadata service"}},
		{"metadata address refused", Options{}, "http://169.254.169.254/latest/meta-data/", kindOf{problem.URLNotAllowed, "169.254.169.254 is a link-local address" + AllowHint}},
		{"ftp refused", Options{}, "ftp://example.com/spec", kindOf{problem.URLNotAllowed, `scheme "ftp" is not allowed (use http or https)`}},
		{"file refused without flag", Options{}, "file:///etc/hostname", kindOf{problem.URLNotAllowed, "file:// URLs are not allowed"}},
		{"loopback allowed with AllowPrivate", Options{AllowPrivate: true}, doc.URL, kindOf{}},
		{"localhost allowed with AllowPrivate", Options{AllowPrivate: true}, "http://127.0.0.1:" + port + "/x", kindOf{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, _, err := New(tc.opts).Fetch(context.Background(), tc.url)
			got := errKind(err)
			if tc.want.Code == problem.URLNotAllowed && tc.want.Detail == "" {
				got.Detail = "" // the address dialled depends on the resolver
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Fetch error (-want +got):\n%s", diff)
			}
			if err == nil && string(data) != "openapi: 3.1.0" {
				t.Errorf("Fetch data = %q", data)
			}
		})
	}
}

func TestFetchRedirectToRefusedAddress(t *testing.T) {
	private := serve(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret metadata") })
	public := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, private.URL+"/latest", http.StatusFound)
	})
	publicPort := portOf(t, public)
	// Only the "public" server's address is allowed: the redirect target,
	// on another port, stands for a private address.
	allow := func(ap netip.AddrPort) error {
		if ap.Port() == publicPort {
			return nil
		}
		return problem.New(problem.URLNotAllowed, "%s is a private address", ap)
	}

	_, _, err := New(Options{Allow: allow}).Fetch(context.Background(), public.URL+"/spec.json")
	want := kindOf{problem.URLNotAllowed, fmt.Sprintf("127.0.0.1:%d is a private address", portOf(t, private))}
	if diff := cmp.Diff(want, errKind(err)); diff != "" {
		t.Errorf("redirect to refused address (-want +got):\n%s", diff)
	}

	data, final, err := New(Options{AllowPrivate: true}).Fetch(context.Background(), public.URL+"/spec.json")
	if err != nil {
		t.Fatalf("Fetch with AllowPrivate: %v", err)
	}
	if diff := cmp.Diff([]string{"secret metadata", private.URL + "/latest"}, []string{string(data), final}); diff != "" {
		t.Errorf("Fetch with AllowPrivate (-want +got):\n%s", diff)
	}
}

func TestFetchRedirectLimit(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if n == 0 {
			fmt.Fprint(w, "done")
			return
		}
		http.Redirect(w, r, "/"+strconv.Itoa(n-1), http.StatusFound)
	})
	tests := []struct {
		redirects int
		want      kindOf
	}{
		{5, kindOf{}},
		{6, kindOf{problem.SpecUnreachable, "more than 5 redirects"}},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.redirects), func(t *testing.T) {
			_, _, err := New(Options{AllowPrivate: true}).Fetch(context.Background(), srv.URL+"/"+strconv.Itoa(tc.redirects))
			if diff := cmp.Diff(tc.want, errKind(err)); diff != "" {
				t.Errorf("Fetch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFetchFailures(t *testing.T) {
	big := strings.Repeat("x", 100)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		case "/big":
			fmt.Fprint(w, big)
		case "/big-chunked":
			for range 10 {
				fmt.Fprint(w, big[:10])
				w.(http.Flusher).Flush()
			}
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		case "/exact":
			fmt.Fprint(w, big[:64])
		}
	})
	opts := Options{AllowPrivate: true, MaxBytes: 64, Timeout: 200 * time.Millisecond}
	tests := []struct {
		path string
		want kindOf
	}{
		{"/missing", kindOf{problem.SpecUnreachable, "the server answered 404 Not Found"}},
		{"/big", kindOf{problem.SpecTooLarge, "the document is over the size limit of 64 bytes"}},
		{"/big-chunked", kindOf{problem.SpecTooLarge, "the document is over the size limit of 64 bytes"}},
		{"/slow", kindOf{problem.SpecUnreachable, "timed out after 200ms"}},
		{"/exact", kindOf{}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			_, _, err := New(opts).Fetch(context.Background(), srv.URL+tc.path)
			if diff := cmp.Diff(tc.want, errKind(err)); diff != "" {
				t.Errorf("Fetch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("connection refused", func(t *testing.T) {
		closed := httptest.NewServer(http.NotFoundHandler())
		url := closed.URL
		closed.Close()
		_, _, err := New(opts).Fetch(context.Background(), url)
		if diff := cmp.Diff(kindOf{problem.SpecUnreachable, "the connection was refused"}, errKind(err)); diff != "" {
			t.Errorf("Fetch (-want +got):\n%s", diff)
		}
	})
}

func TestFetchFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "spec.yaml")
	large := filepath.Join(dir, "large.yaml")
	if err := os.WriteFile(small, []byte("openapi: 3.0.3"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(large, make([]byte, 65), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		opts     Options
		url      string
		want     kindOf
		wantData string
	}{
		{"refused without AllowFile", Options{MaxBytes: 64}, "file://" + small, kindOf{problem.URLNotAllowed, "file:// URLs are not allowed"}, ""},
		{"read with AllowFile", Options{MaxBytes: 64, AllowFile: true}, "file://" + small, kindOf{}, "openapi: 3.0.3"},
		{"size limit", Options{MaxBytes: 64, AllowFile: true}, "file://" + large, kindOf{problem.SpecTooLarge, "the document is over the size limit of 64 bytes"}, ""},
		{"missing", Options{MaxBytes: 64, AllowFile: true}, "file://" + dir + "/nope", kindOf{problem.SpecUnreachable, "cannot open " + dir + "/nope"}, ""},
		{"remote host", Options{MaxBytes: 64, AllowFile: true}, "file://example.com/etc/passwd", kindOf{problem.URLNotAllowed, "file:// URLs must name a local absolute path"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, _, err := New(tc.opts).Fetch(context.Background(), tc.url)
			if diff := cmp.Diff(tc.want, errKind(err)); diff != "" {
				t.Fatalf("Fetch (-want +got):\n%s", diff)
			}
			if string(data) != tc.wantData {
				t.Errorf("Fetch data = %q, want %q", data, tc.wantData)
			}
		})
	}
}

func TestTraceparentPropagates(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	var mu sync.Mutex
	var got string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Get("traceparent")
		mu.Unlock()
	})
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "fetch")
	defer span.End()

	if _, _, err := New(Options{AllowPrivate: true}).Fetch(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	traceID := span.SpanContext().TraceID().String()
	if !strings.HasPrefix(got, "00-"+traceID+"-") {
		t.Errorf("traceparent = %q, want trace id %s", got, traceID)
	}
}

func TestHTTPClientIsolation(t *testing.T) {
	c := New(Options{})
	a := c.HTTPClient()
	a.CheckRedirect = nil
	if c.HTTPClient().CheckRedirect == nil {
		t.Error("changing one HTTPClient changed the next")
	}
}

func TestLegacyIPv4FormsAreRefused(t *testing.T) {
	for host, want := range map[string]bool{
		"2130706433": true, "0177.0.0.1": true, "0x7f.0.0.1": true, "127.1": true, "0x7f000001": true, "017700000001": true,
		"127.0.0.1": false, "203.0.113.7": false, "::1": false, "example.com": false, "1.example": false, "0xzz.0.0.1": false,
		"api.v2": false, "": false, "1.2.3.4.5": false,
	} {
		if got := isLegacyIPv4(host); got != want {
			t.Errorf("isLegacyIPv4(%q) = %v, want %v", host, got, want)
		}
	}
}
