package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/auth/oidctest"
)

// TestServeSignsInToTheConsoleThroughTheOIDCIssuer starts serve with
// --oidc-issuer and a console client whose secret is a file:// reference,
// and signs in through the provider's code flow as a browser would.
func TestServeSignsInToTheConsoleThroughTheOIDCIssuer(t *testing.T) {
	p := oidctest.New(t)
	addr := freeAddr(t)
	base := "http://" + addr
	p.Configure(func(o *oidctest.Options) { o.Redirect = base + "/console/oidc/callback" })
	secretFile := filepath.Join(t.TempDir(), "console-secret")
	if err := os.WriteFile(secretFile, []byte(p.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := serveInProcess(t, "--data", t.TempDir(), "--addr", addr, "--oidc-issuer", p.URL,
		"--console-client-id", p.ClientID, "--console-client-secret-ref", "file://"+secretFile)
	defer stop()
	waitReady(t, base)

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := browser.Get(base + "/console/oidc/login?next=/console/workflows")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/console/workflows" || !strings.Contains(string(body), "carol") {
		t.Fatalf("after signing in: %d at %s:\n%s", resp.StatusCode, resp.Request.URL, body)
	}
	if p.Redeemed() != 1 {
		t.Errorf("the provider exchanged %d codes, want 1", p.Redeemed())
	}
}

func TestServeRefusesAHalfGivenConsoleClient(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--oidc-issuer", "https://login.example", "--console-client-id", "c"}, "--console-client-secret-ref"},
		{[]string{"--oidc-issuer", "https://login.example", "--console-client-secret-ref", "env://X"}, "--console-client-id"},
		{[]string{"--console-client-id", "c", "--console-client-secret-ref", "env://X"}, "--oidc-issuer"},
	} {
		args := append([]string{"serve", "--data", t.TempDir(), "--addr", freeAddr(t)}, tc.args...)
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestServeRefusesAnUnresolvableConsoleSecret: a reference that resolves
// to nothing stops serve before it listens, naming the flag.
func TestServeRefusesAnUnresolvableConsoleSecret(t *testing.T) {
	p := oidctest.New(t)
	args := []string{"serve", "--data", t.TempDir(), "--addr", freeAddr(t), "--oidc-issuer", p.URL,
		"--console-client-id", p.ClientID, "--console-client-secret-ref", "file://" + filepath.Join(t.TempDir(), "missing")}
	err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--console-client-secret-ref") {
		t.Errorf("serve with a missing secret file: %v", err)
	}
}
