package gateway

import (
	"net/http/httptest"
	"testing"

	"github.com/agentplane/agentplane/internal/workflow"
)

// oneRun knows one run token.
type oneRun string

func (o oneRun) Gateway(token string) (*workflow.GatewayRun, bool) {
	return &workflow.GatewayRun{}, token == string(o)
}

// TestRunTokenHeaders: the run token is taken as the API key however a
// provider's SDK sends it: Authorization with the scheme in any case, or
// x-api-key, also beside an Authorization the SDK adds from its
// environment (Anthropic's reads ANTHROPIC_AUTH_TOKEN and sends both).
func TestRunTokenHeaders(t *testing.T) {
	g := New(oneRun("apr_run"), "test", nil, nil)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    bool
	}{
		{"bearer", map[string]string{"Authorization": "Bearer apr_run"}, true},
		{"bearer in lower case", map[string]string{"Authorization": "bearer apr_run"}, true},
		{"x-api-key", map[string]string{"X-Api-Key": "apr_run"}, true},
		{"x-api-key beside another bearer token", map[string]string{"Authorization": "Bearer sk-ant-other", "X-Api-Key": "apr_run"}, true},
		{"bearer beside another key", map[string]string{"Authorization": "Bearer apr_run", "X-Api-Key": "sk-other"}, true},
		{"another token", map[string]string{"Authorization": "Bearer apr_other"}, false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/gateway/anthropic/v1/messages", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if _, got := g.lookup(r); got != tc.want {
				t.Errorf("lookup found a run: %v, want %v", got, tc.want)
			}
		})
	}
}
