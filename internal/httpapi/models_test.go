package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/secrets"
)

// azureModel is a registration of Azure OpenAI's v1 endpoint.
func azureModel(name string) map[string]any {
	return map[string]any{
		"name": name, "provider": "openai", "base_url": "https://contoso.openai.azure.com/openai/v1",
		"model": "gpt-4o-mini", "auth": map[string]any{"type": "api_key", "secrets_ref": "env://TOOL_AZURE_KEY", "header": "api-key"},
		"headers": map[string]any{"X-Team": "payments"}, "timeout": "90s", "max_concurrency": 4,
		"price": map[string]any{"input_per_mtok": 0.15, "output_per_mtok": 0.6}, "daily_token_budget": 1000000,
	}
}

func TestConformModels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "models:write models:read")
	key := []string{"Idempotency-Key", "register-gpt"}
	got := h.check(t,
		call{name: "register", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: tok, body: azureModel("gpt-small"), headers: key, status: 201},
		call{name: "replayed", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: tok, body: azureModel("gpt-small"), headers: key, status: 201},
		call{name: "name taken", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: tok, body: azureModel("gpt-small"), status: 409},
		call{name: "broken", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: tok, body: map[string]any{"name": "x"}, status: 422},
		call{name: "unknown field", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: tok, body: `{"name": "x", "api_key": "sk-1"}`, status: 400},
		call{name: "second", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: tok, body: azureModel("claude"), status: 201},
		call{name: "list", method: "GET", path: "/v1/models?limit=1", pattern: "GET /v1/models", token: tok, status: 200},
		call{name: "list rest", method: "GET", path: "/v1/models?cursor=claude", pattern: "GET /v1/models", token: tok, status: 200},
		call{name: "get", method: "GET", path: "/v1/models/gpt-small", pattern: "GET /v1/models/{name}", token: tok, status: 200},
		call{name: "get unknown", method: "GET", path: "/v1/models/nope", pattern: "GET /v1/models/{name}", token: tok, status: 404},
		call{name: "other tenant", method: "GET", path: "/v1/models/gpt-small", pattern: "GET /v1/models/{name}", token: h.token("globex", "models:read"), status: 404},
		call{name: "no scope", method: "GET", path: "/v1/models", pattern: "GET /v1/models", token: h.token("acme", "tools:read"), status: 403},
		call{name: "read only", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: h.token("acme", "models:read"), body: azureModel("x"), status: 403},
	)
	if loc := got["register"].Header.Get("Location"); loc != "/v1/models/gpt-small" {
		t.Errorf("Location = %q", loc)
	}
	if got["replayed"].Header.Get("Idempotent-Replayed") != "true" {
		t.Error("a repeated registration is not marked Idempotent-Replayed")
	}
	var m model.Model
	got["register"].json(t, &m)
	want := model.Model{
		ID: m.ID, Name: "gpt-small", Provider: "openai", BaseURL: "https://contoso.openai.azure.com/openai/v1",
		Model: "gpt-4o-mini", Auth: model.Auth{Type: "api_key", SecretsRef: "env://TOOL_AZURE_KEY", Header: "api-key"},
		Headers: map[string]string{"X-Team": "payments"}, Timeout: 90e9, MaxConcurrency: 4,
		Price: &model.Price{InputPerMTok: 0.15, OutputPerMTok: 0.6, Currency: "USD"}, DailyTokenBudget: 1000000,
		Revision: 1, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
	}
	if diff := cmp.Diff(want, m); diff != "" || !strings.HasPrefix(m.ID, "mdl_") {
		t.Errorf("registered model %s (-want +got):\n%s", m.ID, diff)
	}
	if !strings.Contains(string(got["register"].Body), `"timeout":"1m30s"`) {
		t.Errorf("timeout is not a duration string: %s", got["register"].Body)
	}
	var page struct {
		Models     []model.Model `json:"models"`
		NextCursor *string       `json:"next_cursor"`
	}
	got["list"].json(t, &page)
	if len(page.Models) != 1 || page.Models[0].Name != "claude" || page.NextCursor == nil || *page.NextCursor != "claude" {
		t.Errorf("first page: %s", got["list"].Body)
	}

	put := azureModel("gpt-small")
	put["model"], put["timeout"] = "gpt-4o", "15m"
	put["base_url"], put["http2_prior_knowledge"] = "http://127.0.0.1:8000/v1", true
	delete(put, "price")
	got = h.check(t,
		call{name: "put", method: "PUT", path: "/v1/models/gpt-small", pattern: "PUT /v1/models/{name}", token: tok, body: put, status: 200},
		call{name: "rename", method: "PUT", path: "/v1/models/gpt-small", pattern: "PUT /v1/models/{name}", token: tok, body: azureModel("gpt-big"), status: 422},
		call{name: "put unknown", method: "PUT", path: "/v1/models/nope", pattern: "PUT /v1/models/{name}", token: tok, body: azureModel("nope"), status: 404},
		call{name: "get after put", method: "GET", path: "/v1/models/gpt-small", pattern: "GET /v1/models/{name}", token: tok, status: 200},
		call{name: "delete", method: "DELETE", path: "/v1/models/gpt-small", pattern: "DELETE /v1/models/{name}", token: tok, status: 200},
		call{name: "deleted", method: "DELETE", path: "/v1/models/gpt-small", pattern: "DELETE /v1/models/{name}", token: tok, status: 404},
		call{name: "gone", method: "GET", path: "/v1/models/gpt-small", pattern: "GET /v1/models/{name}", token: tok, status: 404},
	)
	var upd model.Model
	got["get after put"].json(t, &upd)
	if upd.Revision != 2 || upd.Model != "gpt-4o" || upd.Price != nil || upd.Timeout.String() != "15m0s" || upd.ID != m.ID ||
		!upd.HTTP2PriorKnowledge || m.HTTP2PriorKnowledge {
		t.Errorf("a PUT is not seen at once: %s", got["get after put"].Body)
	}
}

func TestModelValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "models:write")
	with := func(change func(b map[string]any)) map[string]any {
		b := azureModel("gpt")
		change(b)
		return b
	}
	tests := []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"reserved name", with(func(b map[string]any) { b["name"] = "default" }), "name"},
		{"name with capitals", with(func(b map[string]any) { b["name"] = "GPT" }), "name"},
		{"unknown provider", with(func(b map[string]any) { b["provider"] = "gemini" }), "provider"},
		{"base_url with user-info", with(func(b map[string]any) { b["base_url"] = "https://me:sk-1@api.example.com/v1" }), "base_url"},
		{"base_url with a query", with(func(b map[string]any) { b["base_url"] = "https://api.example.com/v1?api-key=sk-1" }), "base_url"},
		{"base_url relative", with(func(b map[string]any) { b["base_url"] = "/v1" }), "base_url"},
		{"model missing", with(func(b map[string]any) { delete(b, "model") }), "model"},
		{"negative price", with(func(b map[string]any) { b["price"] = map[string]any{"input_per_mtok": -1, "output_per_mtok": 1} }), "price.input_per_mtok"},
		{"bad currency", with(func(b map[string]any) {
			b["price"] = map[string]any{"input_per_mtok": 1, "output_per_mtok": 1, "currency": "usd"}
		}), "price.currency"},
		{"timeout unparsable", with(func(b map[string]any) { b["timeout"] = "two minutes" }), "timeout"},
		{"timeout over 15m", with(func(b map[string]any) { b["timeout"] = "16m" }), "timeout"},
		{"negative max_concurrency", with(func(b map[string]any) { b["max_concurrency"] = -1 }), "max_concurrency"},
		{"negative daily_token_budget", with(func(b map[string]any) { b["daily_token_budget"] = -5 }), "daily_token_budget"},
		{"http2_prior_knowledge over https", with(func(b map[string]any) { b["http2_prior_knowledge"] = true }), "http2_prior_knowledge"},
		{"unknown auth type", with(func(b map[string]any) { b["auth"] = map[string]any{"type": "oauth2", "secrets_ref": "env://TOOL_K"} }), "auth.type"},
		{"bearer without secrets_ref", with(func(b map[string]any) { b["auth"] = map[string]any{"type": "bearer"} }), "auth.secrets_ref"},
		{"api_key without secrets_ref", with(func(b map[string]any) { b["auth"] = map[string]any{"type": "api_key", "header": "api-key"} }), "auth.secrets_ref"},
		{"Authorization header", with(func(b map[string]any) { b["headers"] = map[string]any{"Authorization": "Bearer sk-1"} }), "headers.Authorization"},
		{"api-key header", with(func(b map[string]any) { b["headers"] = map[string]any{"API-Key": "sk-1"} }), "headers.API-Key"},
		{"x-api-key header", with(func(b map[string]any) { b["headers"] = map[string]any{"x-api-key": "sk-ant-1"} }), "headers.x-api-key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/models", tok, tc.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			d := r.problem(t)
			var fields []string
			for _, e := range d.Errors {
				fields = append(fields, e.Field)
			}
			if d.Code != problem.ValidationFailed || !slices.Contains(fields, tc.field) {
				t.Errorf("%s %v, want validation-failed naming %s", d.Code, d.Errors, tc.field)
			}
			if strings.Contains(string(r.Body), "sk-") {
				t.Errorf("the answer repeats a secret: %s", r.Body)
			}
		})
	}
	// Every broken rule at once, each named.
	r := h.do("POST", "/v1/models", tok, map[string]any{"name": "default", "provider": "x", "base_url": "x", "timeout": "1h"})
	if d := r.problem(t); len(d.Errors) != 5 {
		t.Errorf("want 5 field errors (name, provider, base_url, model, timeout): %v", d.Errors)
	}
	if r := h.do("POST", "/v1/models", tok, with(func(b map[string]any) {
		b["auth"] = map[string]any{"type": "bearer", "secrets_ref": "env://OPENAI_API_KEY"}
	})); r.problem(t).Code != problem.SecretRefNotAllowed {
		t.Errorf("a reference outside the allow-list: %d %s", r.Status, r.Body)
	}
}

// TestModelBaseURLAddress: a base_url on a private address is refused at
// registration unless the operator allows private networks or that host.
func TestModelBaseURLAddress(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	allowed, err := outbound.ParseAllowedHost(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	withPolicy := func(opts outbound.Options) option {
		return func(_ *httpapi.Config, d *httpapi.Deps) {
			policy, _ := secrets.NewPolicy([]string{"env://TOOL_*"}, false)
			d.Models = &model.Service{Store: d.Models.Store, Secrets: policy, Addresses: outbound.New(opts)}
		}
	}
	strict := newHarness(t, withPolicy(outbound.Options{}))
	host := newHarness(t, withPolicy(outbound.Options{AllowHosts: []outbound.AllowedHost{allowed}}))
	body := func(base string) map[string]any {
		return map[string]any{"name": "ollama", "provider": "openai", "base_url": base, "model": "llama3"}
	}
	tests := []struct {
		name   string
		h      *harness
		base   string
		status int
	}{
		{"loopback refused", strict, srv.URL + "/v1", 422},
		{"localhost refused by its address", strict, fmt.Sprintf("http://localhost:%s/v1", u.Port()), 422},
		{"metadata refused", strict, "http://169.254.169.254/v1", 422},
		{"metadata name refused", strict, "http://metadata.google.internal/v1", 422},
		{"decimal loopback refused", strict, "http://2130706433:11434/v1", 422},
		{"mapped loopback refused", strict, "http://[::ffff:127.0.0.1]:11434/v1", 422},
		{"private network refused", strict, "https://10.0.0.7/v1", 422},
		{"public accepted", strict, "https://api.openai.com/v1", 201},
		{"allowed host", host, srv.URL + "/v1", 201},
		{"another port of the allowed host", host, "http://127.0.0.1:1/v1", 422},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.h.do("POST", "/v1/models", tc.h.token("t-"+strings.ReplaceAll(tc.name, " ", "-"), "models:write"), body(tc.base))
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.status == 422 && r.problem(t).Code != problem.URLNotAllowed {
				t.Errorf("code %s, want url-not-allowed", r.problem(t).Code)
			}
		})
	}
}

func TestModelChangesAreAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "models:write models:read")
	var m model.Model
	h.do("POST", "/v1/models", tok, azureModel("gpt")).json(t, &m)
	h.do("PUT", "/v1/models/gpt", tok, azureModel("gpt"))
	h.do("GET", "/v1/models/gpt", tok, nil)
	h.do("DELETE", "/v1/models/gpt", tok, nil)
	var page auditPage
	h.do("GET", "/v1/audit/query?resource_type=model", h.token("acme", "audit:read"), nil).json(t, &page)
	var got []string
	for _, rec := range page.Records {
		got = append(got, fmt.Sprintf("%s %d %s", rec.Action, rec.Status, rec.Resource.ID))
		if strings.Contains(string(rec.Details), "TOOL_AZURE_KEY") {
			t.Errorf("the record holds the registration: %s", rec.Details)
		}
	}
	want := []string{"model.delete 200 " + m.ID, "model.read 200 " + m.ID, "model.update 200 " + m.ID, "model.create 201 " + m.ID}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("model records, newest first (-want +got):\n%s", diff)
	}
}
