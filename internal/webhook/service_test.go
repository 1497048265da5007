package webhook_test

import (
	"strings"
	"testing"
	"time"

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
		case !ok && !problem.Is(err, problem.ValidationFailed):
			t.Errorf("%s: %v, want validation-failed", url, err)
		}
	}
}
