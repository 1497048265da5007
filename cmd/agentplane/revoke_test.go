package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/store/postgres"
)

// revocationTTL is the replicas' --revocation-ttl in these tests, so they
// need not wait the default 30 s.
const revocationTTL = time.Second

// TestARevokedClientIsRefusedOnASecondReplica runs two servers on one
// store: a client's token, obtained from replica a, works on replica b
// until the operator revokes the client; then b refuses it within the
// revocation ttl, and the token endpoint refuses the client.
func TestARevokedClientIsRefusedOnASecondReplica(t *testing.T) {
	if auth.DefaultRevocationTTL > 30*time.Second {
		t.Fatalf("the default --revocation-ttl %s is over SPEC's 30 s", auth.DefaultRevocationTTL)
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		testRevocationAcrossReplicas(t, func() []string { return []string{"--data", dir} })
	})
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(postgres.TestDatabaseEnv) == "" {
			t.Skip(postgres.TestDatabaseEnv + " not set: skipping the two-replica PostgreSQL revocation test " +
				"(set it to e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
		}
		dbURL := postgres.NewTestDatabase(t)
		testRevocationAcrossReplicas(t, func() []string { return []string{"--data", t.TempDir(), "--database-url", dbURL} })
	})
}

func testRevocationAcrossReplicas(t *testing.T, store func() []string) {
	operator := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append(args, store()...), func(string) string { return "" }, &out, io.Discard)
		return out.String(), err
	}
	out, err := operator("clients", "create", "--tenant", "acme", "--scope", "agents:read", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var cred struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(out), &cred); err != nil || cred.ClientID == "" {
		t.Fatalf("clients create printed %q (%v)", out, err)
	}
	serveFlags := func() []string {
		return append(store(), "--public-url", "http://agentplane.test", "--revocation-ttl", revocationTTL.String())
	}
	a := startChild(t, freeAddr(t), serveFlags()...)
	b := startChild(t, freeAddr(t), serveFlags()...)

	status, tok := tokenRequest(t, a.base, cred.ClientID, cred.ClientSecret)
	if status != http.StatusOK {
		t.Fatalf("token endpoint: %d %v", status, tok)
	}
	access, _ := tok["access_token"].(string)
	if code, body := b.do("GET", "/v1/agents", access, nil); code != http.StatusOK {
		t.Fatalf("replica b before the revocation: %d %v", code, body)
	}

	if _, err := operator("clients", "revoke", cred.ClientID); err != nil {
		t.Fatalf("clients revoke: %v", err)
	}
	revoked := time.Now()
	// Replica b read the list at its first request: the token works there
	// until that copy is older than the ttl, and no longer after.
	bound := revocationTTL + 2*time.Second
	for {
		code, body := b.do("GET", "/v1/agents", access, nil)
		if code == http.StatusUnauthorized {
			if !strings.Contains(body["detail"].(string), "revoked") {
				t.Errorf("refusal %v does not say the client is revoked", body)
			}
			t.Logf("replica b refused the token %v after the revocation (ttl %v)", time.Since(revoked).Round(time.Millisecond), revocationTTL)
			break
		}
		if code != http.StatusOK {
			t.Fatalf("replica b: %d %v", code, body)
		}
		if time.Since(revoked) > bound {
			t.Fatalf("replica b still accepts the revoked client's token %v after the revocation (ttl %v)", bound, revocationTTL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := a.do("GET", "/v1/agents", access, nil); code != http.StatusUnauthorized {
		t.Errorf("replica a after the ttl: %d %v, want 401", code, body)
	}

	for _, srv := range []*child{a, b} {
		status, body := tokenRequest(t, srv.base, cred.ClientID, cred.ClientSecret)
		if status != http.StatusUnauthorized || body["error"] != "invalid_client" {
			t.Errorf("token endpoint of %s for a revoked client: %d %v, want 401 invalid_client", srv.base, status, body)
		}
	}

	list, err := operator("clients", "list", "--tenant", "acme", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(list, cred.ClientSecret) || strings.Contains(list, "secret") {
		t.Errorf("clients list shows a secret: %s", list)
	}
	var doc struct {
		Clients []struct {
			ClientID  string  `json:"client_id"`
			Tenant    string  `json:"tenant"`
			RevokedAt *string `json:"revoked_at"`
		} `json:"clients"`
	}
	if err := json.Unmarshal([]byte(list), &doc); err != nil || len(doc.Clients) != 1 ||
		doc.Clients[0].ClientID != cred.ClientID || doc.Clients[0].Tenant != "acme" || doc.Clients[0].RevokedAt == nil {
		t.Errorf("clients list -o json = %s (%v), want the one client, revoked", list, err)
	}

	auditor, err := operator("token", "--tenant", "acme", "--scope", "audit:read", "--public-url", "http://agentplane.test")
	if err != nil {
		t.Fatal(err)
	}
	code, body := a.do("GET", "/v1/audit/query?action=client.revoke", strings.TrimSpace(auditor), nil)
	recs, _ := body["records"].([]any)
	if code != http.StatusOK || len(recs) != 1 || !strings.Contains(mustJSON(t, recs[0]), cred.ClientID) {
		t.Errorf("client.revoke records in acme's chain: %d %v, want one naming the client", code, body)
	}

	_, err = operator("clients", "revoke", "cl_nosuchclient")
	var stderr bytes.Buffer
	if code := report(err, &stderr); code != exitNotFound || !strings.Contains(stderr.String(), "cl_nosuchclient") {
		t.Errorf("revoke of an unknown client: exit %d, %q; want %d naming the client", code, stderr.String(), exitNotFound)
	}
}

// tokenRequest asks base's token endpoint for a client-credentials token.
func tokenRequest(t *testing.T, base, id, secret string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/oauth/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
