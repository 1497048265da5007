package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
)

// testClientRevocation: clients are listed per tenant or all, a revoked
// client carries its revocation time everywhere it is read, the
// revocation list names it, and revoking again changes nothing.
func testClientRevocation(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	a := auth.Client{ID: "cli_a", Tenant: "acme", Name: "ci bot", SecretHash: "9f86d0", Scopes: []string{"tools:read"}, CreatedAt: base}
	b := auth.Client{ID: "cli_b", Tenant: "acme", Name: "leaked", SecretHash: "aa11", Scopes: []string{"agents:invoke"}, CreatedAt: base.Add(time.Second)}
	g := auth.Client{ID: "cli_g", Tenant: "globex", Name: "other", SecretHash: "bb22", Scopes: []string{"tools:read"}, CreatedAt: base}
	for _, c := range []auth.Client{a, b, g} {
		must(t, s.CreateClient(ctx, c, nil), "create "+c.ID)
	}
	ids, err := s.RevokedClients(ctx)
	must(t, err, "revoked clients")
	if len(ids) != 0 {
		t.Errorf("revoked before any revocation: %v", ids)
	}

	wantCode(t, s.RevokeClient(ctx, "cli_nope", base, nil), problem.NotFound, "revoke an unknown client")
	at := base.Add(time.Hour)
	rec := record("acme", "client.revoke", 1)
	must(t, s.RevokeClient(ctx, "cli_b", at, rec), "revoke b")
	must(t, s.RevokeClient(ctx, "cli_b", at.Add(time.Hour), record("acme", "client.revoke", 2)), "revoke b again")

	got, err := s.Client(ctx, "cli_b")
	must(t, err, "read b")
	want := b
	want.RevokedAt = &at
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("revoked client (-want +got):\n%s", diff)
	}
	ids, err = s.RevokedClients(ctx)
	must(t, err, "revoked clients")
	if diff := cmp.Diff([]string{"cli_b"}, ids); diff != "" {
		t.Errorf("revocation list (-want +got):\n%s", diff)
	}

	acme, err := s.ListClients(ctx, "acme")
	must(t, err, "list acme's clients")
	if diff := cmp.Diff([]auth.Client{a, want}, acme); diff != "" {
		t.Errorf("acme's clients (-want +got):\n%s", diff)
	}
	all, err := s.ListClients(ctx, "")
	must(t, err, "list every client")
	if got := len(all); got != 3 || !slices.ContainsFunc(all, func(c auth.Client) bool { return c.ID == "cli_g" }) {
		t.Errorf("every client: %d, want 3 with globex's", got)
	}

	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "client.revoke"})
	must(t, err, "query audit")
	if len(recs) != 1 {
		t.Errorf("%d client.revoke records, want 1 (revoking again appends none)", len(recs))
	}
	verifyOK(t, s, "acme", 1)
}
