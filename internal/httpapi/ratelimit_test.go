package httpapi_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/ratelimit"
)

func TestTenantRateLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *httpapi.Config, _ *httpapi.Deps) {
		c.RateLimits.Default = ratelimit.Limit{Rate: 5, Burst: 5, Period: time.Minute}
	})
	tok := h.token("acme", "audit:read")
	for i := range 5 {
		r := h.do("GET", "/v1/audit/verify", tok, nil)
		if r.Status != 200 {
			t.Fatalf("request %d: %d", i+1, r.Status)
		}
		if got := r.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(4-i) {
			t.Errorf("request %d: remaining %q, want %d", i+1, got, 4-i)
		}
		if r.Header.Get("X-RateLimit-Limit") != "5" || r.Header.Get("X-RateLimit-Reset") == "" {
			t.Errorf("request %d headers %v", i+1, r.Header)
		}
	}
	r := h.do("GET", "/v1/audit/verify", tok, nil)
	if r.Status != 429 || r.problem(t).Code != "rate-limited" {
		t.Fatalf("sixth: %d %s", r.Status, r.Body)
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	// Another tenant has its own quota.
	if r := h.do("GET", "/v1/audit/verify", h.token("globex", "audit:read"), nil); r.Status != 200 {
		t.Fatalf("other tenant: %d", r.Status)
	}
}

func TestUnauthenticatedTrafficIsLimitedPerIP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *httpapi.Config, _ *httpapi.Deps) {
		c.RateLimits.IP = ratelimit.Limit{Rate: 3, Burst: 3, Period: time.Minute}
	})
	for range 3 {
		if r := h.do("GET", "/v1/tools", "", nil); r.Status != 401 {
			t.Fatalf("%d", r.Status)
		}
	}
	if r := h.do("GET", "/v1/tools", "", nil); r.Status != 429 {
		t.Fatalf("fourth unauthenticated request: %d", r.Status)
	}
	// Health probes are never limited.
	if r := h.do("GET", "/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz: %d", r.Status)
	}
}

// TestUnmatchedRoutesAreLimited checks that requests no route serves, which
// are audited too, are limited: by IP without a valid token, by the
// caller's tenant (with the rate-limit headers) with one.
func TestUnmatchedRoutesAreLimited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *httpapi.Config, _ *httpapi.Deps) {
		c.RateLimits.IP = ratelimit.Limit{Rate: 3, Burst: 3, Period: time.Minute}
		c.RateLimits.Default = ratelimit.Limit{Rate: 5, Burst: 5, Period: time.Minute}
	})
	tok := h.token("acme", "audit:read")
	for _, tc := range []struct {
		token, method, path string
		status              int
	}{
		{"", "GET", "/v1/nowhere", 404},
		{"", "DELETE", "/v1/audit/verify", 405},
		{"", "GET", "/nowhere/else", 404},
		{"", "GET", "/v1/nowhere", 429},
		// The IP's quota is spent; the tenant's is not.
		{tok, "GET", "/v1/nowhere", 404},
	} {
		r := h.do(tc.method, tc.path, tc.token, nil)
		if r.Status != tc.status {
			t.Fatalf("%s %s: %d, want %d (%s)", tc.method, tc.path, r.Status, tc.status, r.Body)
		}
		if tc.status == 429 && (r.problem(t).Code != "rate-limited" || r.Header.Get("Retry-After") == "") {
			t.Fatalf("%s %s: %v %s", tc.method, tc.path, r.Header, r.Body)
		}
		if tc.token != "" && r.Header.Get("X-RateLimit-Limit") != "5" {
			t.Errorf("%s %s with a token: X-RateLimit-Limit %q, want the tenant's 5", tc.method, tc.path, r.Header.Get("X-RateLimit-Limit"))
		}
	}
}

// TestGatewayRequestsWithoutARunTokenAreLimitedPerIP: a run gateway
// request without a valid run token is unauthenticated traffic, limited
// per client IP, its 429 in the provider's shape; a run's own requests
// are not, whatever its IP spent.
func TestGatewayRequestsWithoutARunTokenAreLimitedPerIP(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms), func(c *httpapi.Config, _ *httpapi.Deps) {
		c.RateLimits.IP = ratelimit.Limit{Rate: 3, Burst: 3, Period: time.Minute}
	})
	w := newFraudWorld(t, h)
	chat := `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`
	for range 3 {
		if r := h.do("POST", "/gateway/openai/v1/chat/completions", "apr_guess", chat); r.Status != 401 {
			t.Fatalf("a guessed token: %d %s", r.Status, r.Body)
		}
	}
	r := h.do("POST", "/gateway/openai/v1/chat/completions", "apr_guess", chat)
	if _, typ := openAIError(r.Body); r.Status != 429 || typ != "rate_limit_error" || r.Header.Get("Retry-After") == "" {
		t.Errorf("the fourth guess at the OpenAI endpoint: %d %v %s", r.Status, r.Header, r.Body)
	}
	r = h.do("POST", "/gateway/anthropic/v1/messages", "", `{}`, "x-api-key", "apr_guess")
	var anthropicErr struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	json.Unmarshal(r.Body, &anthropicErr)
	if r.Status != 429 || anthropicErr.Type != "error" || anthropicErr.Error.Type != "rate_limit_error" {
		t.Errorf("a guess at the Anthropic endpoint: %d %s", r.Status, r.Body)
	}
	answers, url := rawAgent(t, "/chat/completions", map[string]string{"chat": chat})
	deployExternal(t, h, w.admin, "ext-limited", map[string]any{"url": url, "tools": []string{"payments"}, "models": []string{"gpt"}})
	if r := h.do("POST", "/v1/agents/ext-limited/invoke", w.admin, map[string]any{"goal": "go"}); r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if a := (<-answers)["chat"]; a.status != 200 {
		t.Errorf("the run's own request from the same IP: %d %s", a.status, a.body)
	}
}
