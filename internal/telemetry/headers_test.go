package telemetry

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{name: "empty", in: "", want: map[string]string{}},
		{name: "two pairs", in: "a=1, b = two", want: map[string]string{"a": "1", "b": "two"}},
		{name: "encoded value", in: "x-tenant=acme%20corp%3Dyes", want: map[string]string{"x-tenant": "acme corp=yes"}},
		{name: "value with equals", in: "k=a=b", want: map[string]string{"k": "a=b"}},
		{name: "malformed pairs skipped", in: "novalue,=x,ok=1,bad=%zz", want: map[string]string{"ok": "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseHeaders(tc.in)); diff != "" {
				t.Errorf("parseHeaders(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestRoutePathAndSpanName(t *testing.T) {
	tests := []struct {
		pattern, method, wantPath, wantName string
	}{
		{"POST /v1/tools", "POST", "/v1/tools", "POST /v1/tools"},
		{"GET /v1/tools/{id}", "HEAD", "/v1/tools/{id}", "HEAD /v1/tools/{id}"},
		{"/healthz", "GET", "/healthz", "GET /healthz"},
		{"", "GET", "", "GET"},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			got := []string{RoutePath(tc.pattern), SpanName(tc.method, tc.pattern)}
			if diff := cmp.Diff([]string{tc.wantPath, tc.wantName}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
