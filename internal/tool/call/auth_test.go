package call

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

func TestCallAuth(t *testing.T) {
	tokens := newTokenServer(t, "json-client", testSecret)
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		_, _ = w.Write([]byte(`{}`))
	})
	_, get, _ := billingOps()
	type saw struct {
		Authorization, APIKey, Token, Query string
		User, Password                      string
	}
	tests := []struct {
		name string
		auth tool.Auth
		// tokenURL is the spec's token URL.
		tokenURL string
		want     outcome
		wantSaw  *saw
	}{
		{name: "none", auth: tool.Auth{Type: tool.AuthNone}, wantSaw: &saw{Query: "fields=name"}},
		{name: "bearer", auth: tool.Auth{Type: tool.AuthBearer, SecretsRef: "env://TOOL_SECRET"},
			wantSaw: &saw{Authorization: "Bearer " + testSecret, Query: "fields=name"}},
		{name: "basic", auth: tool.Auth{Type: tool.AuthBasic, SecretsRef: "env://TOOL_BASIC"},
			wantSaw: &saw{Authorization: "Basic YWxpY2U6cGE6c3M=", User: "alice", Password: "pa:ss", Query: "fields=name"}},
		{name: "api key in the default header", auth: tool.Auth{Type: tool.AuthAPIKey, SecretsRef: "env://TOOL_SECRET"},
			wantSaw: &saw{APIKey: testSecret, Query: "fields=name"}},
		{name: "api key in a named header", auth: tool.Auth{Type: tool.AuthAPIKey, SecretsRef: "env://TOOL_SECRET", Header: "X-Token"},
			wantSaw: &saw{Token: testSecret, Query: "fields=name"}},
		{name: "api key in the query", auth: tool.Auth{Type: tool.AuthAPIKey, SecretsRef: "env://TOOL_SECRET", In: "query", Name: "key"},
			wantSaw: &saw{Query: "fields=name&key=" + testSecret}},
		{name: "oauth2 with a JSON secret and the spec's token URL", auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_OAUTH"},
			tokenURL: tokens.URL, wantSaw: &saw{Authorization: "Bearer access-token-1", Query: "fields=name"}},
		{name: "oauth2 with a wrong client", auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_SECRET", ClientID: "other", TokenURL: tokens.URL},
			want: outcome{Status: 401, Msg: "auth: the token endpoint answered 401 Unauthorized (invalid_client)"}},
		{name: "oauth2 without a token URL", auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_OAUTH"},
			want: outcome{Msg: "auth: oauth2 needs a token URL: set auth.token_url (the spec names none)"}},
		{name: "oauth2 without a client id", auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_SECRET", TokenURL: tokens.URL},
			want: outcome{Msg: "auth: oauth2 needs auth.client_id when the secret is only the client secret"}},
		{name: "basic secret without a colon", auth: tool.Auth{Type: tool.AuthBasic, SecretsRef: "env://TOOL_SECRET"},
			want: outcome{Msg: "auth: the basic secret must be user:password"}},
		{name: "reference outside the allow-list", auth: tool.Auth{Type: tool.AuthBearer, SecretsRef: "env://OTHER"},
			want: outcome{Code: problem.SecretRefNotAllowed, Msg: "secrets_ref env://OTHER is not among the references allowed for this tenant"}},
		{name: "unset variable", auth: tool.Auth{Type: tool.AuthBearer, SecretsRef: "env://TOOL_MISSING"},
			want: outcome{Msg: "auth: secret could not be resolved: env://TOOL_MISSING: the environment variable is not set"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(api.requests())
			ex := newExecutor(t, Options{})
			res, err := ex.Call(context.Background(), tool.CallRequest{
				Tenant:    "acme",
				Tool:      &tool.Tool{ID: "tool_" + string(rune('a'+i)), Name: "t", BaseURL: api.URL, Auth: tc.auth, SpecTokenURL: tc.tokenURL},
				Operation: get,
				Args:      map[string]any{"customer_id": "c", "fields": "name"},
			})
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if err != nil && strings.Contains(err.Error(), testSecret) {
				t.Errorf("error carries the secret: %v", err)
			}
			reqs := api.requests()[before:]
			if tc.wantSaw == nil {
				if len(reqs) != 0 {
					t.Errorf("the API got %d requests, want none", len(reqs))
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("the API got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			got := saw{Authorization: r.Header.Get("Authorization"), APIKey: r.Header.Get("X-API-Key"), Token: r.Header.Get("X-Token"), Query: r.Query}
			if tc.auth.Type == tool.AuthBasic {
				req := &http.Request{Header: r.Header}
				got.User, got.Password, _ = req.BasicAuth()
			}
			if diff := cmp.Diff(*tc.wantSaw, got); diff != "" {
				t.Errorf("credentials the API saw (-want +got):\n%s", diff)
			}
			rec, _ := json.Marshal(res.Request)
			if strings.Contains(string(rec), testSecret) || strings.Contains(string(rec), "access-token") ||
				strings.Contains(string(rec), "YWxpY2U") {
				t.Errorf("recorded request carries a credential: %s", rec)
			}
			if want := api.URL + "/customers/c?fields=name"; res.Request.URL != want {
				t.Errorf("recorded URL = %s, want %s", res.Request.URL, want)
			}
		})
	}
}

func TestCallDoesNotCarryCredentialsAcrossOrigins(t *testing.T) {
	other := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {})
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
	})
	_, get, _ := billingOps()
	_, err := newExecutor(t, Options{}).Call(context.Background(), tool.CallRequest{
		Tool:      &tool.Tool{ID: "t", Name: "t", BaseURL: api.URL, Auth: tool.Auth{Type: tool.AuthAPIKey, SecretsRef: "env://TOOL_SECRET"}},
		Operation: get, Args: map[string]any{"customer_id": "c"},
	})
	if diff := cmp.Diff(outcome{Status: 302, Msg: "the API answered 302 Found"}, outcomeOf(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}
}

func TestCallRenewsTokenAfter401(t *testing.T) {
	tokens := newTokenServer(t, "json-client", testSecret)
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
	_, get, _ := billingOps()
	ex := newExecutor(t, Options{})
	tools := []*tool.Tool{
		{ID: "t_oauth", Name: "t", BaseURL: api.URL, Auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_OAUTH", TokenURL: tokens.URL}},
		{ID: "t_none", Name: "n", BaseURL: api.URL},
	}
	var got []outcome
	for _, tl := range []*tool.Tool{tools[0], tools[0], tools[1]} {
		_, err := ex.Call(context.Background(), tool.CallRequest{Tool: tl, Operation: get, Args: map[string]any{"customer_id": "c"}})
		got = append(got, outcomeOf(err))
	}
	want := []outcome{{Status: 401, Msg: "the API answered 401 Unauthorized"}, {}, {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	var auths []string
	for _, r := range api.requests() {
		auths = append(auths, r.Header.Get("Authorization"))
	}
	if diff := cmp.Diff([]string{"Bearer access-token-1", "Bearer access-token-2", ""}, auths); diff != "" {
		t.Errorf("Authorization of each call (-want +got):\n%s", diff)
	}
}
