package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
)

func code(err error) problem.Code {
	if err == nil {
		return ""
	}
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "not a problem"
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		ref  string
		want Ref
		code problem.Code
	}{
		{ref: "env://TOOL_STRIPE", want: Ref{Scheme: Env, Name: "TOOL_STRIPE"}},
		{ref: "file:///run/secrets/stripe", want: Ref{Scheme: File, Path: "/run/secrets/stripe"}},
		{ref: "vault://kv/tenants/acme/stripe#api_key", want: Ref{Scheme: Vault, Mount: "kv", Path: "tenants/acme/stripe", Key: "api_key"}},
		{ref: "vault://kv/stripe", want: Ref{Scheme: Vault, Mount: "kv", Path: "stripe"}},
		{ref: "TOOL_STRIPE", code: problem.ValidationFailed},
		{ref: "env://TOOL-STRIPE", code: problem.ValidationFailed},
		{ref: "env://", code: problem.ValidationFailed},
		{ref: "file://run/secrets", code: problem.ValidationFailed},
		{ref: "file:///run/secrets/../../etc/shadow", code: problem.ValidationFailed},
		{ref: "vault://kv", code: problem.ValidationFailed},
		{ref: "vault://kv/tenants/acme/../globex/x#k", code: problem.ValidationFailed},
		{ref: "vault://kv//x#k", code: problem.ValidationFailed},
		{ref: "vault://kv/x#", code: problem.ValidationFailed},
		{ref: "https://example.com/secret", code: problem.ValidationFailed},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := ParseRef(tc.ref)
			if c := code(err); c != tc.code {
				t.Fatalf("ParseRef error = %v, want code %q", err, tc.code)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseRef (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyCheck(t *testing.T) {
	def, err := NewPolicy(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := NewPolicy([]string{"env://TOOL_*", "vault://kv/tenants/{tenant}/*", "file:///run/secrets/{tenant}/*", "env://KEY_{tenant}"}, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		policy *Policy
		tenant string
		ref    string
		want   problem.Code
	}{
		{"default allows TOOL_ env", def, "acme", "env://TOOL_STRIPE", ""},
		{"default refuses other env", def, "acme", "env://DATABASE_URL", problem.SecretRefNotAllowed},
		{"default refuses prefix alone", def, "acme", "env://TOOL", problem.SecretRefNotAllowed},
		{"default refuses vault", def, "acme", "vault://kv/tenants/acme/x#k", problem.SecretRefNotAllowed},
		{"default refuses file", def, "acme", "file:///run/secrets/x", problem.SecretRefNotAllowed},
		{"own tenant's vault path", ops, "acme", "vault://kv/tenants/acme/stripe#api_key", ""},
		{"own tenant's nested vault path", ops, "acme", "vault://kv/tenants/acme/a/b", ""},
		{"other tenant's vault path", ops, "globex", "vault://kv/tenants/acme/stripe#api_key", problem.SecretRefNotAllowed},
		{"tenant prefix is not the tenant", ops, "acme", "vault://kv/tenants/acme2/stripe#k", problem.SecretRefNotAllowed},
		{"traversal is malformed", ops, "acme", "vault://kv/tenants/acme/../globex/x#k", problem.ValidationFailed},
		{"file allowed with flag and pattern", ops, "acme", "file:///run/secrets/acme/stripe", ""},
		{"file of another tenant", ops, "acme", "file:///run/secrets/globex/stripe", problem.SecretRefNotAllowed},
		{"file of a tenant the caller's is a prefix of", ops, "acme", "file:///run/secrets/acme-prod/stripe", problem.SecretRefNotAllowed},
		{"tenant with glob characters is literal", ops, "*", "vault://kv/tenants/acme/x#k", problem.SecretRefNotAllowed},
		{"tenant with a slash matches no tenant pattern", ops, "acme/prod", "vault://kv/tenants/acme/prod/x", problem.SecretRefNotAllowed},
		{"tenant with a space matches no tenant pattern", ops, "acme corp", "file:///run/secrets/acme corp/x", problem.SecretRefNotAllowed},
		{"env name of the tenant", ops, "acme_prod", "env://KEY_acme_prod", ""},
		{"env name of a longer tenant", ops, "acme", "env://KEY_acme_prod", problem.SecretRefNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := code(tc.policy.Check(tc.tenant, tc.ref)); got != tc.want {
				t.Errorf("Check(%q, %q) code = %q, want %q", tc.tenant, tc.ref, got, tc.want)
			}
		})
	}
}

func TestNewPolicyRefusesFileWithoutFlag(t *testing.T) {
	if _, err := NewPolicy([]string{"file:///run/secrets/*"}, false); err == nil {
		t.Error("NewPolicy accepted a file:// pattern without allowFile")
	}
	if _, err := NewPolicy([]string{"TOOL_*"}, false); err == nil {
		t.Error("NewPolicy accepted a pattern without a scheme")
	}
}

func TestNewPolicyRefusesAmbiguousTenantPatterns(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
	}{
		{"tenant then dash then star", []string{"file:///run/secrets/{tenant}-*"}},
		{"tenant then underscore then star", []string{"env://TOOL_{tenant}_*"}},
		{"tenant then dot", []string{"file:///run/secrets/{tenant}.json"}},
		{"tenant then star", []string{"vault://kv/tenants/{tenant}*"}},
		{"tenant twice in a row", []string{"vault://kv/{tenant}{tenant}/x"}},
		{"star before tenant", []string{"vault://*/{tenant}/*"}},
		{"tenant after a star", []string{"vault://kv/*/x/{tenant}"}},
		{"prefix of another tenant pattern", []string{"vault://kv/{tenant}/*", "vault://kv/shared/{tenant}/*"}},
		{"prefix of another tenant pattern, other order", []string{"env://TOOL_X{tenant}", "env://TOOL_{tenant}"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPolicy(tc.patterns, true); err == nil || !strings.Contains(err.Error(), "{tenant}") {
				t.Errorf("NewPolicy(%q) error = %v, want one about {tenant}", tc.patterns, err)
			}
		})
	}
	for _, ok := range [][]string{
		{"vault://kv/tenants/{tenant}/*", "file:///run/secrets/{tenant}/*", "env://TOOL_{tenant}"},
		{"vault://kv/{tenant}/a/*", "vault://kv/{tenant}/b/*", "vault://kv/shared/*"},
		{"vault://kv/tenants/{tenant}/x/{tenant}/*"},
	} {
		if _, err := NewPolicy(ok, true); err != nil {
			t.Errorf("NewPolicy(%q): %v", ok, err)
		}
	}
}

// TestTenantPatternGrantsOneTenant checks, for every tenant drawn from a set
// of names that are prefixes and extensions of one another, that no reference
// is granted to two tenants.
func TestTenantPatternGrantsOneTenant(t *testing.T) {
	policy, err := NewPolicy([]string{
		"vault://kv/tenants/{tenant}/*", "file:///run/secrets/{tenant}/*", "env://TOOL_{tenant}", "env://KEY_{tenant}",
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	tenants := []string{"acme", "acme-prod", "acme_prod", "acme.prod", "acme/prod", "acme-prod-stripe", "prod", "a"}
	refs := []string{
		"file:///run/secrets/acme-prod-stripe", "file:///run/secrets/acme-prod/stripe",
		"file:///run/secrets/acme/prod/x", "env://TOOL_acme_prod_KEY", "env://TOOL_acme_prod",
		"vault://kv/tenants/acme/prod/x", "vault://kv/tenants/acme-prod/x#k", "vault://kv/tenants/acme.prod/x",
	}
	for _, ref := range refs {
		var granted []string
		for _, tenant := range tenants {
			if policy.Check(tenant, ref) == nil {
				granted = append(granted, tenant)
			}
		}
		if len(granted) > 1 {
			t.Errorf("%s is granted to tenants %q", ref, granted)
		}
	}
	if err := policy.Check("acme", "vault://kv/tenants/acme/prod/x"); err != nil {
		t.Errorf("tenant acme refused its own vault://kv/tenants/acme/prod/x: %v", err)
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, ref string
		want         bool
	}{
		{"env://TOOL_*", "env://TOOL_", true},
		{"env://TOOL_*", "env://TOOL_X", true},
		{"env://TOOL_X", "env://TOOL_X", true},
		{"env://TOOL_X", "env://TOOL_XY", false},
		{"env://*_KEY", "env://STRIPE_KEY", true},
		{"env://*_KEY", "env://STRIPE_KEYS", false},
		{"env://A*B*C", "env://AxxBxxC", true},
		{"env://A*B*C", "env://AxxC", false},
		{"env://AB*BA", "env://ABA", false},
	}
	for _, tc := range tests {
		t.Run(tc.pattern+" "+tc.ref, func(t *testing.T) {
			if got := match(tc.pattern, "t", tc.ref); got != tc.want {
				t.Errorf("match = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResolveEnvAndFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "acme"), 0o700); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(dir, "acme", "stripe")
	if err := os.WriteFile(secretFile, []byte("file-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bigFile := filepath.Join(dir, "acme", "big")
	if err := os.WriteFile(bigFile, []byte(strings.Repeat("x", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	policy, err := NewPolicy([]string{"env://TOOL_*", "file://" + dir + "/{tenant}/*"}, true)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOOL_STRIPE": "env-value", "OTHER": "nope"}
	r, err := NewResolver(Options{
		Policy:       policy,
		Getenv:       func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		MaxFileBytes: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref        string
		want       string
		code       problem.Code
		unresolved bool
	}{
		{ref: "env://TOOL_STRIPE", want: "env-value"},
		{ref: "env://TOOL_MISSING", unresolved: true},
		{ref: "env://OTHER", code: problem.SecretRefNotAllowed},
		{ref: "file://" + secretFile, want: "file-value"},
		{ref: "file://" + dir + "/acme/missing", unresolved: true},
		{ref: "file://" + bigFile, unresolved: true},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := r.Resolve(context.Background(), "acme", tc.ref)
			if tc.unresolved {
				if !errors.Is(err, ErrUnresolved) || !strings.Contains(err.Error(), tc.ref) {
					t.Fatalf("Resolve error = %v, want ErrUnresolved naming the ref", err)
				}
				return
			}
			if c := code(err); c != tc.code {
				t.Fatalf("Resolve error = %v, want code %q", err, tc.code)
			}
			if got != tc.want {
				t.Errorf("Resolve = %q, want %q", got, tc.want)
			}
		})
	}
}

// vaultServer speaks the KV v2 read API for one mount.
func vaultServer(t *testing.T, token string, secrets map[string]map[string]any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Vault-Token") != token {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"errors":["permission denied"]}`))
			return
		}
		path, ok := strings.CutPrefix(r.URL.Path, "/v1/kv/data/")
		data, found := secrets[path]
		if r.Method != http.MethodGet || !ok || !found {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[]}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"data": map[string]any{
				"data":     data,
				"metadata": map[string]any{"version": 3, "created_time": "2024-01-01T00:00:00Z", "deletion_time": "", "destroyed": false},
			},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestResolveVault(t *testing.T) {
	srv := vaultServer(t, "s.test-token", map[string]map[string]any{
		"tenants/acme/stripe": {"api_key": "vault-value"},
		"tenants/acme/oauth":  {"client_id": "cid", "client_secret": "csecret"},
	})
	policy, err := NewPolicy([]string{"vault://kv/tenants/{tenant}/*"}, false)
	if err != nil {
		t.Fatal(err)
	}
	newResolver := func(token string, hc *http.Client) *Resolver {
		r, err := NewResolver(Options{
			Policy:          policy,
			Getenv:          func(k string) (string, bool) { return map[string]string{"VAULT_ADDR": srv.URL}[k], k == "VAULT_ADDR" },
			VaultToken:      token,
			VaultHTTPClient: hc,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	allowed := outbound.New(outbound.Options{AllowPrivate: true}).HTTPClient()
	good := newResolver("s.test-token", allowed)

	tests := []struct {
		name       string
		r          *Resolver
		ref        string
		want       string
		unresolved string
	}{
		{name: "one key", r: good, ref: "vault://kv/tenants/acme/stripe#api_key", want: "vault-value"},
		{name: "whole secret", r: good, ref: "vault://kv/tenants/acme/oauth", want: `{"client_id":"cid","client_secret":"csecret"}`},
		{name: "missing key", r: good, ref: "vault://kv/tenants/acme/stripe#other", unresolved: "the secret has no such key"},
		{name: "missing secret", r: good, ref: "vault://kv/tenants/acme/none#k", unresolved: "vault has no such secret"},
		{name: "bad token", r: newResolver("wrong", allowed), ref: "vault://kv/tenants/acme/stripe#api_key", unresolved: "vault answered status 403"},
		{name: "private address refused by default", r: newResolver("s.test-token", nil), ref: "vault://kv/tenants/acme/stripe#api_key", unresolved: "vault request refused: 127.0.0.1 is a loopback address; the server's operator can allow such addresses with agentplane serve --allow-private-networks (on with --demo), or one host with --allow-private-host HOST[:PORT]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Resolve(context.Background(), "acme", tc.ref)
			if tc.unresolved != "" {
				if !errors.Is(err, ErrUnresolved) || !strings.HasSuffix(err.Error(), tc.unresolved) {
					t.Fatalf("Resolve error = %v, want ErrUnresolved ending %q", err, tc.unresolved)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Resolve = %q, want %q", got, tc.want)
			}
		})
	}

	if _, err := good.Resolve(context.Background(), "globex", "vault://kv/tenants/acme/stripe#api_key"); code(err) != problem.SecretRefNotAllowed {
		t.Errorf("another tenant's secret: error %v, want secret-ref-not-allowed", err)
	}
}
