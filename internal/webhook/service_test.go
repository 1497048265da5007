package webhook_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/outbound/outboundtest"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/webhook"
)

// TestPlainHTTPOnlyToAllowedHosts: a receiver's URL must be https, unless
// the server allows plain http (demos) or the host is one it allows.
func TestPlainHTTPOnlyToAllowedHosts(t *testing.T) {
	db := sqlite.NewTestDB(t)
	svc := &webhook.Service{Store: db, Versions: db, Now: time.Now,
		HTTPHost: func(raw string) bool { return strings.HasPrefix(raw, "http://hooks.internal:9000/") }}
	for url, ok := range map[string]bool{
		"https://hooks.example.com/agentplane":  true,
		"http://hooks.internal:9000/agentplane": true,
		"http://hooks.example.com/agentplane":   false,
	} {
		_, err := svc.Create(t.Context(), "acme", webhook.Input{URL: url, Events: []string{webhook.WorkflowCompleted}}, nil)
		switch {
		case ok && err != nil:
			t.Errorf("%s: %v, want it accepted", url, err)
		case !ok && !problem.Is(err, problem.URLNotAllowed):
			t.Errorf("%s: %v, want url-not-allowed", url, err)
		}
	}
}

// TestAReceiverIsCheckedAtRegistration: a URL whose scheme is not http(s)
// or whose host name resolves to a private address is refused when the
// webhook is created, url-not-allowed, with a detail that names the flag
// allowing it and never the address the name resolved to.
func TestAReceiverIsCheckedAtRegistration(t *testing.T) {
	db := sqlite.NewTestDB(t)
	client := outbound.New(outbound.Options{Resolver: outboundtest.Names{
		"hooks.internal.test": netip.MustParseAddr("127.0.0.1"),
		"hooks.example.test":  netip.MustParseAddr("93.184.215.14"),
		"localhost":           netip.MustParseAddr("::1"),
	}})
	svc := &webhook.Service{Store: db, Versions: db, Now: time.Now, CheckHost: client.CheckHost}
	for _, tc := range []struct {
		url  string
		code problem.Code
		says string
	}{
		{"https://hooks.internal.test/agentplane", problem.URLNotAllowed, "hooks.internal.test resolves to a private address"},
		{"https://localhost:8443/agentplane", problem.URLNotAllowed, "localhost resolves to a private address"},
		{"https://127.0.0.1/agentplane", problem.URLNotAllowed, "127.0.0.1 is a loopback address"},
		{"https://[2002:7f00:1::]/agentplane", problem.URLNotAllowed, "loopback"},
		{"gopher://hooks.example.test:70/_x", problem.URLNotAllowed, `scheme "gopher" is not allowed`},
		{"file:///etc/passwd", problem.URLNotAllowed, `scheme "file" is not allowed`},
		{"hooks.example.test/agentplane", problem.ValidationFailed, "absolute https URL"},
		{"https://user:pw@hooks.example.test/agentplane", problem.ValidationFailed, "credentials"},
		{"https://hooks.example.test/agentplane", "", ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := svc.Create(t.Context(), "acme", webhook.Input{URL: tc.url, Events: []string{webhook.WorkflowCompleted}}, nil)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !problem.Is(err, tc.code) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want %s saying %q", err, tc.code, tc.says)
			}
			if tc.code != problem.URLNotAllowed || !strings.Contains(tc.says, "resolves") {
				return
			}
			if d := problem.As(err).Detail; strings.Contains(d, "127.0.0.1") || strings.Contains(d, "::1") || !strings.Contains(d, "--allow-private-host") {
				t.Errorf("detail %q reveals the address or does not name --allow-private-host", d)
			}
		})
	}
}
