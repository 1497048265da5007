package call

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/tool"
)

// cached lists the executor's token and schema entries, sorted, as
// "tool@revision" and "tool@revision/operation/which".
func cached(ex *Executor) (tokens, schemas []string) {
	for _, k := range ex.tokens.Keys() {
		tokens = append(tokens, fmt.Sprintf("%s@%d", k.tool, k.revision))
	}
	for _, k := range ex.schema.lru.Keys() {
		schemas = append(schemas, fmt.Sprintf("%s@%d/%s/%s", k.tool, k.revision, k.operation, k.which))
	}
	slices.Sort(tokens)
	slices.Sort(schemas)
	return tokens, schemas
}

// charge calls create_charge of tl, which authenticates with oauth2 and
// validates its body against a schema: it fills both caches.
func charge(t *testing.T, ex *Executor, tl *tool.Tool) {
	t.Helper()
	create, _, _ := billingOps()
	_, err := ex.Call(context.Background(), tool.CallRequest{Tool: tl, Operation: create,
		Args: map[string]any{"customer_id": "c", "amount": float64(5)}})
	if err != nil {
		t.Fatalf("call %s@%d: %v", tl.ID, tl.Revision, err)
	}
}

// billing is a token server, an API and an executor with opts; tool
// returns a revision of an oauth2 tool of that API with the secret ref.
type billing struct {
	tokens *tokenServer
	api    *recorder
	ex     *Executor
}

func newBilling(t *testing.T, opts Options) *billing {
	return &billing{
		tokens: newTokenServer(t, "json-client", testSecret),
		api:    newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {}),
		ex:     newExecutor(t, opts),
	}
}

func (b *billing) tool(id string, revision int, secretsRef string) *tool.Tool {
	return &tool.Tool{ID: id, Name: "billing", Revision: revision, BaseURL: b.api.URL,
		Auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: secretsRef, TokenURL: b.tokens.URL}}
}

func TestCachesHoldAtMostTheirBound(t *testing.T) {
	b := newBilling(t, Options{CacheSize: 3})
	ex := b.ex
	for i := range 5 {
		charge(t, ex, b.tool(fmt.Sprintf("tool_%d", i), 1, "env://TOOL_OAUTH"))
	}
	gotTokens, gotSchemas := cached(ex)
	want := []string{"tool_2@1", "tool_3@1", "tool_4@1"} // the least recently used went first
	if diff := cmp.Diff(want, gotTokens); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	wantSchemas := []string{"tool_2@1/create_charge/body", "tool_3@1/create_charge/body", "tool_4@1/create_charge/body"}
	if diff := cmp.Diff(wantSchemas, gotSchemas); diff != "" {
		t.Errorf("schemas (-want +got):\n%s", diff)
	}
	// A dropped token is requested again; a kept one is not.
	charge(t, ex, b.tool("tool_4", 1, "env://TOOL_OAUTH"))
	charge(t, ex, b.tool("tool_0", 1, "env://TOOL_OAUTH"))
	if n := b.tokens.count(); n != 6 {
		t.Errorf("the token server issued %d tokens, want 6", n)
	}
}

func TestUpdatedToolGetsATokenWithItsNewSecret(t *testing.T) {
	b := newBilling(t, Options{})
	ex := b.ex
	charge(t, ex, b.tool("tool_b", 1, "env://TOOL_OAUTH"))
	charge(t, ex, b.tool("tool_b", 1, "env://TOOL_OAUTH"))

	// The tool is updated to a new secret, which from now on is the only
	// one the token server accepts; the service forgets the tool.
	b.tokens.rotate("rotated-secret")
	ex.Forget("tool_b")
	if gotTokens, gotSchemas := cached(ex); len(gotTokens)+len(gotSchemas) != 0 {
		t.Errorf("after Forget: tokens %v, schemas %v", gotTokens, gotSchemas)
	}
	charge(t, ex, b.tool("tool_b", 2, "env://TOOL_OAUTH_ROTATED"))

	var auths []string
	for _, r := range b.api.requests() {
		auths = append(auths, r.Header.Get("Authorization"))
	}
	want := []string{"Bearer access-token-1", "Bearer access-token-1", "Bearer access-token-2"}
	if diff := cmp.Diff(want, auths); diff != "" {
		t.Errorf("Authorization of each call (-want +got):\n%s", diff)
	}
	if gotTokens, _ := cached(ex); !slices.Equal(gotTokens, []string{"tool_b@2"}) {
		t.Errorf("tokens = %v, want only the new revision's", gotTokens)
	}
}

func TestForgetDropsOnlyThatToolsEntries(t *testing.T) {
	b := newBilling(t, Options{})
	ex := b.ex
	// Two revisions of a deleted tool (another replica updated it) and a
	// tool that stays.
	charge(t, ex, b.tool("tool_gone", 1, "env://TOOL_OAUTH"))
	charge(t, ex, b.tool("tool_gone", 2, "env://TOOL_OAUTH"))
	charge(t, ex, b.tool("tool_kept", 1, "env://TOOL_OAUTH"))
	ex.Forget("tool_gone")
	gotTokens, gotSchemas := cached(ex)
	if diff := cmp.Diff([]string{"tool_kept@1"}, gotTokens); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool_kept@1/create_charge/body"}, gotSchemas); diff != "" {
		t.Errorf("schemas (-want +got):\n%s", diff)
	}
}
