package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

// catalogsFunc builds catalogs with a function.
type catalogsFunc func(ctx context.Context, tenant string, tools, models []string) (*Catalog, error)

func (f catalogsFunc) Catalog(ctx context.Context, tenant string, tools, models []string) (*Catalog, error) {
	return f(ctx, tenant, tools, models)
}

func TestNewVersion(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	v, err := NewVersion(context.Background(), catalogsFunc(func(_ context.Context, tenant string, _, _ []string) (*Catalog, error) {
		if tenant != "acme" {
			t.Errorf("catalog of tenant %q, want acme", tenant)
		}
		return testCatalog(), nil
	}), "acme", Deployment{Name: "triage", Version: "2", Description: "d", Definition: json.RawMessage(validBase)}, at)
	if err != nil {
		t.Fatal(err)
	}
	want := &Version{Tenant: "acme", Name: "triage", Version: "2", Description: "d",
		Definition: json.RawMessage(validBase), Tools: []string{"payments", "cases"}, DeployedAt: at}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("version (-want +got):\n%s", diff)
	}
}

func TestNewVersionErrors(t *testing.T) {
	catalogs := catalogsFunc(func(context.Context, string, []string, []string) (*Catalog, error) { return testCatalog(), nil })
	tests := []struct {
		name string
		d    Deployment
		want []problem.FieldError
	}{
		{
			name: "every field wrong",
			d:    Deployment{Name: "Triage", Version: "-1", Description: strings.Repeat("x", 2001)},
			want: []problem.FieldError{
				{Field: "name", Message: "must match ^[a-z][a-z0-9-]{0,62}$"},
				{Field: "version", Message: "must match ^[0-9A-Za-z][0-9A-Za-z.+_-]{0,31}$"},
				{Field: "description", Message: "must be at most 2000 characters"},
				{Field: "definition", Message: "is required: give exactly one of definition and external"},
			},
		},
		{
			name: "null definition",
			d:    Deployment{Name: "triage", Definition: json.RawMessage("null")},
			want: []problem.FieldError{{Field: "definition", Message: "is required: give exactly one of definition and external"}},
		},
		{
			name: "definition and external",
			d:    Deployment{Name: "triage", Definition: json.RawMessage(validBase), External: json.RawMessage(validExternal)},
			want: []problem.FieldError{{Field: "external", Message: "is given along with definition: give exactly one of definition and external"}},
		},
		{
			name: "definition that does not decode",
			d:    Deployment{Name: "triage", Definition: json.RawMessage(`{"tools": [], "steps": [], "extra": 1}`)},
			want: []problem.FieldError{{Field: "definition.extra", Message: `unknown field "extra"`}},
		},
		{
			name: "definition that does not compile",
			d:    Deployment{Name: "triage", Definition: json.RawMessage(strings.Replace(validBase, `"cases"]`, `"cases", "ghost"]`, 1))},
			want: []problem.FieldError{{Field: "definition.tools[2]", Message: `no tool named "ghost" is registered`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewVersion(context.Background(), catalogs, "acme", tc.d, time.Now())
			pe := problem.As(err)
			if pe.Code != problem.ValidationFailed {
				t.Fatalf("error = %v, want validation-failed", err)
			}
			if diff := cmp.Diff(tc.want, pe.Errors); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("catalog error", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := NewVersion(context.Background(), catalogsFunc(func(context.Context, string, []string, []string) (*Catalog, error) {
			return nil, boom
		}), "acme", Deployment{Name: "triage", Definition: json.RawMessage(validBase)}, time.Now())
		if !errors.Is(err, boom) {
			t.Errorf("error = %v, want the catalog's", err)
		}
	})
}

// validExternal deploys; each error case of TestNewVersionExternalErrors
// breaks it in one way.
const validExternal = `{
  "url": "https://agents.example.com/triage",
  "auth": {"type": "bearer", "secrets_ref": "env://TRIAGE_TOKEN"},
  "timeout": "20m", "max_attempts": 4,
  "tools": ["payments", "cases"], "models": ["gpt-4o-mini", "default"],
  "policies": {"financial": {"allow": "args.amount < 1000.0"}},
  "approvals": [{"when": "operation == 'refund'", "reason": "'refund of ' + string(args.amount)", "approver_scope": "approve:refunds"}],
  "limits": {"max_tool_calls": 20, "max_llm_tokens": 200000},
  "max_concurrency": 8
}`

func TestNewVersionExternal(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var asked []string
	v, err := NewVersion(context.Background(), catalogsFunc(func(_ context.Context, _ string, tools, models []string) (*Catalog, error) {
		asked = append(append(asked, tools...), models...)
		return testCatalog(), nil
	}), "acme", Deployment{Name: "triage", Description: "d", External: json.RawMessage(validExternal)}, at)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"payments", "cases", "gpt-4o-mini", "default"}, asked); diff != "" {
		t.Errorf("catalog asked for (-want +got):\n%s", diff)
	}
	want := &Version{Tenant: "acme", Name: "triage", Description: "d", DeployedAt: at,
		External: &External{
			URL:     "https://agents.example.com/triage",
			Auth:    &ExternalAuth{Type: ExternalAuthBearer, SecretsRef: "env://TRIAGE_TOKEN"},
			Timeout: "20m", MaxAttempts: 4,
			Tools: []string{"payments", "cases"}, Models: []string{"gpt-4o-mini", "default"},
			Policies:  map[string]Policy{"financial": {Allow: "args.amount < 1000.0"}},
			Approvals: []ApprovalRule{{When: "operation == 'refund'", Reason: "'refund of ' + string(args.amount)", ApproverScope: "approve:refunds"}},
			Limits:    &ExternalLimits{MaxToolCalls: 20, MaxLLMTokens: 200000}, MaxConcurrency: 8,
		},
		Tools: []string{"payments", "cases"}, Models: []string{"gpt-4o-mini", "default"}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("version (-want +got):\n%s", diff)
	}
}

func TestNewVersionExternalErrors(t *testing.T) {
	catalogs := catalogsFunc(func(context.Context, string, []string, []string) (*Catalog, error) { return testCatalog(), nil })
	// edit replaces one member of validExternal, or removes it when value is "".
	edit := func(member, value string) json.RawMessage {
		var x map[string]json.RawMessage
		if err := json.Unmarshal([]byte(validExternal), &x); err != nil {
			t.Fatal(err)
		}
		if value == "" {
			delete(x, member)
		} else {
			x[member] = json.RawMessage(value)
		}
		out, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tests := []struct {
		name     string
		external json.RawMessage
		// want maps each expected field to a fragment of its message.
		want map[string]string
	}{
		{"unknown member", edit("retries", `3`), map[string]string{"external.retries": `unknown field "retries"`}},
		{"not an object", json.RawMessage(`["https://a.example"]`), map[string]string{"external": "got JSON array"}},
		{"unknown tool", edit("tools", `["payments", "ghost"]`), map[string]string{"external.tools[1]": `no tool named "ghost" is registered`}},
		{"tool listed twice", edit("tools", `["payments", "payments"]`), map[string]string{"external.tools[1]": "listed twice"}},
		{"unknown model", edit("models", `["gpt-9"]`), map[string]string{"external.models[0]": `no model named "gpt-9": register it with POST /v1/models`}},
		{"model listed twice", edit("models", `["default", "default"]`), map[string]string{"external.models[1]": "listed twice"}},
		{"bad CEL in a policy", edit("policies", `{"financial": {"allow": "args.amount <"}}`), map[string]string{"external.policies.financial.allow": "Syntax error"}},
		{"policy not a bool", edit("policies", `{"financial": {"allow": "'yes'"}}`), map[string]string{"external.policies.financial.allow": "bool"}},
		{"bad CEL in approvals[i].when", edit("approvals", `[{"when": "true"}, {"when": "operation =="}]`), map[string]string{"external.approvals[1].when": "Syntax error"}},
		{"approval when not a bool", edit("approvals", `[{"when": "args"}]`), map[string]string{"external.approvals[0].when": "bool"}},
		{"approval without when", edit("approvals", `[{"approver_scope": "approve:refunds"}]`), map[string]string{"external.approvals[0].when": "is required"}},
		{"approval reason not a string", edit("approvals", `[{"when": "true", "reason": "1"}]`), map[string]string{"external.approvals[0].reason": "string"}},
		{"approval timeout", edit("approvals", `[{"when": "true", "timeout": "soon", "on_timeout": "maybe"}]`), map[string]string{
			"external.approvals[0].timeout": "not a duration", "external.approvals[0].on_timeout": `"deny" or "approve"`}},
		{"no url", edit("url", ""), map[string]string{"external.url": "is required"}},
		{"relative url", edit("url", `"agents.example.com/triage"`), map[string]string{"external.url": "is not an http(s) URL"}},
		{"bad scheme", edit("url", `"ftp://agents.example.com/triage"`), map[string]string{"external.url": "is not an http(s) URL"}},
		{"userinfo", edit("url", `"https://bot:pw@agents.example.com/triage"`), map[string]string{"external.url": "must not carry credentials"}},
		{"fragment", edit("url", `"https://agents.example.com/triage#x"`), map[string]string{"external.url": "#fragment"}},
		{"bearer without secrets_ref", edit("auth", `{"type": "bearer"}`), map[string]string{"external.auth.secrets_ref": "is required for auth type bearer"}},
		{"api_key without secrets_ref", edit("auth", `{"type": "api_key", "header": "X-Key"}`), map[string]string{"external.auth.secrets_ref": "is required for auth type api_key"}},
		{"unknown auth type", edit("auth", `{"type": "basic", "secrets_ref": "env://X"}`), map[string]string{"external.auth.type": "must be none, bearer or api_key"}},
		{"header without api_key", edit("auth", `{"type": "bearer", "secrets_ref": "env://X", "header": "X-Key"}`), map[string]string{"external.auth.header": "api_key only"}},
		{"timeout not a duration", edit("timeout", `"ten minutes"`), map[string]string{"external.timeout": "is not a duration"}},
		{"timeout over an hour", edit("timeout", `"61m"`), map[string]string{"external.timeout": "must be from 1s to 1h0m0s"}},
		{"timeout under a second", edit("timeout", `"10ms"`), map[string]string{"external.timeout": "must be from 1s to 1h0m0s"}},
		{"max_attempts over 10", edit("max_attempts", `11`), map[string]string{"external.max_attempts": "must be from 1 to 10"}},
		{"max_attempts negative", edit("max_attempts", `-1`), map[string]string{"external.max_attempts": "must be from 1 to 10"}},
		{"max_concurrency negative", edit("max_concurrency", `-2`), map[string]string{"external.max_concurrency": "must be from 1 to 10000"}},
		{"max_tool_calls over 1000", edit("limits", `{"max_tool_calls": 1001}`), map[string]string{"external.limits.max_tool_calls": "must be from 1 to 1000"}},
		{"bad inputs schema", edit("inputs", `{"type": 7}`), map[string]string{"external.inputs": ""}},
		{"operations", edit("operations", `["payments.getTransaction", "payments.nope", "ghost", "payments/refund", "ledger.post"]`), map[string]string{
			"external.operations[1]": `tool "payments" has no operation "nope"`, "external.operations[2]": `tool "ghost" is not in the agent's tools`,
			"external.operations[3]": `tool "payments/refund" is not in the agent's tools`, "external.operations[4]": `tool "ledger" is not in the agent's tools`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewVersion(context.Background(), catalogs, "acme", Deployment{Name: "triage", External: tc.external}, time.Now())
			pe := problem.As(err)
			if pe.Code != problem.ValidationFailed {
				t.Fatalf("error = %v, want validation-failed", err)
			}
			got := map[string]string{}
			for _, e := range pe.Errors {
				got[e.Field] = e.Message
			}
			if diff := cmp.Diff(keys(tc.want), keys(got)); diff != "" {
				t.Fatalf("fields (-want +got):\n%s\nerrors: %v", diff, pe.Errors)
			}
			for f, frag := range tc.want {
				if !strings.Contains(got[f], frag) {
					t.Errorf("%s: message %q does not contain %q", f, got[f], frag)
				}
			}
		})
	}
}
