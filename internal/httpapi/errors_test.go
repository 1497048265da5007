package httpapi_test

import (
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/httpapi"
)

func TestErrorsAreProblemDocuments(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *httpapi.Config, _ *httpapi.Deps) { c.MaxBodyBytes = 64 })
	tok := h.token("acme", "audit:read")
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code                     string
	}{
		{"unknown route", "GET", "/v1/nothing-here", "", nil, 404, "not-found"},
		{"method not allowed", "DELETE", "/v1/audit/verify", "", nil, 405, "method-not-allowed"},
		{"malformed JSON", "POST", "/v1/audit/query", `{"limit":`, nil, 400, "malformed-request"},
		{"unknown field", "POST", "/v1/audit/query", `{"limmit": 3}`, nil, 400, "malformed-request"},
		{"wrong type", "POST", "/v1/audit/query", `{"limit": "3"}`, nil, 400, "malformed-request"},
		{"too large", "POST", "/v1/audit/query", `{"action": "` + strings.Repeat("x", 100) + `"}`, nil, 413, "payload-too-large"},
		{"not JSON", "POST", "/v1/audit/query", `limit=3`, []string{"Content-Type", "text/plain"}, 415, "unsupported-media-type"},
		{"invalid filter", "GET", "/v1/audit/query?limit=5000", "", nil, 422, "validation-failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := h.do(tc.method, tc.path, tok, body, tc.headers...)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			d := r.problem(t)
			if string(d.Code) != tc.code || d.Type != "https://agentplane.dev/problems/"+tc.code || d.Status != tc.status {
				t.Errorf("problem %+v", d)
			}
			if d.RequestID == "" || d.RequestID != r.Header.Get("Request-Id") || d.TraceID == "" || d.Instance != strings.Split(tc.path, "?")[0] {
				t.Errorf("request_id %q (header %q), trace_id %q, instance %q", d.RequestID, r.Header.Get("Request-Id"), d.TraceID, d.Instance)
			}
			if tc.status == 405 && r.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

func TestProblemPagesAreServed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do("GET", "/problems/idempotency-key-reused", "", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), "Idempotency key reused") {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/problems/no-such-code", "", nil); r.Status != 404 {
		t.Fatalf("unknown code: %d", r.Status)
	}
}

func TestPublicRoutesNeedNoToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/.well-known/openid-configuration", "/.well-known/jwks.json", "/v1/openapi.json"} {
		if r := h.do("GET", p, "", nil); r.Status != 200 {
			t.Errorf("GET %s: %d %s", p, r.Status, r.Body)
		}
	}
}

func TestProblemDetailsAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do("GET", "/v1/tools", "", nil)
	if !strings.Contains(string(r.Body), "Bearer <access token>") {
		t.Fatalf("detail escaped: %s", r.Body)
	}
}
