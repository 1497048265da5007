package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/problem"
)

// testConsoleGrants: a sign-in link is redeemed once (a second redemption
// says it was used), an unknown or other-kind grant is not found, and an
// OIDC login keeps its verifier, nonce and next page.
func testConsoleGrants(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	link := session.Grant{IDHash: session.Hash("link-secret"), Kind: session.GrantLink, Tenant: "acme", Subject: "ann",
		ClientID: "cli", Scopes: []string{"workflows:read", "workflows:approve"}, SessionExpiresAt: base.Add(time.Hour),
		CreatedAt: base, ExpiresAt: base.Add(session.LinkTTL)}
	must(t, s.CreateConsoleGrant(ctx, link), "create link")
	wantCode(t, s.CreateConsoleGrant(ctx, link), problem.Conflict, "create the same link twice")

	got, first, err := s.RedeemConsoleGrant(ctx, session.GrantLink, link.IDHash, base.Add(time.Second))
	must(t, err, "redeem")
	if !first {
		t.Fatal("first redemption: first = false")
	}
	if diff := cmp.Diff(link, got); diff != "" {
		t.Errorf("redeemed grant (-want +got):\n%s", diff)
	}
	if _, first, err = s.RedeemConsoleGrant(ctx, session.GrantLink, link.IDHash, base.Add(2*time.Second)); err != nil || first {
		t.Fatalf("second redemption: first = %v, err = %v; want false, nil", first, err)
	}
	_, _, err = s.RedeemConsoleGrant(ctx, session.GrantOIDC, link.IDHash, base)
	wantCode(t, err, problem.NotFound, "redeem a link as an OIDC login")
	_, _, err = s.RedeemConsoleGrant(ctx, session.GrantLink, session.Hash("unknown"), base)
	wantCode(t, err, problem.NotFound, "redeem an unknown link")

	login := session.Grant{IDHash: session.Hash("state"), Kind: session.GrantOIDC, Scopes: []string{},
		Verifier: "verifier-123", Nonce: "nonce-456", Next: "/console/approvals",
		SessionExpiresAt: base, CreatedAt: base, ExpiresAt: base.Add(session.LoginTTL)}
	must(t, s.CreateConsoleGrant(ctx, login), "create login")
	got, first, err = s.RedeemConsoleGrant(ctx, session.GrantOIDC, login.IDHash, base)
	must(t, err, "redeem login")
	if diff := cmp.Diff(login, got); diff != "" || !first {
		t.Errorf("redeemed login, first = %v (-want +got):\n%s", first, diff)
	}

	// A grant made two hours on sweeps the ones expired over an hour ago.
	later := session.Grant{IDHash: session.Hash("later"), Kind: session.GrantLink, Scopes: []string{},
		SessionExpiresAt: base, CreatedAt: base.Add(2 * time.Hour), ExpiresAt: base.Add(2*time.Hour + time.Minute)}
	must(t, s.CreateConsoleGrant(ctx, later), "create a later link")
	_, _, err = s.RedeemConsoleGrant(ctx, session.GrantLink, link.IDHash, base.Add(2*time.Hour))
	wantCode(t, err, problem.NotFound, "redeem a swept link")
}

// testConsoleSessions: a session is found by its hash until it expires,
// and not after sign-out.
func testConsoleSessions(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	sess := session.Session{IDHash: session.Hash("session-secret"), Tenant: "acme", Subject: "ann", ClientID: "cli",
		Scopes: []string{"workflows:read"}, CreatedAt: base, ExpiresAt: base.Add(time.Hour)}
	must(t, s.CreateConsoleSession(ctx, sess), "create session")
	got, err := s.ConsoleSession(ctx, sess.IDHash, base.Add(time.Minute))
	must(t, err, "load session")
	if diff := cmp.Diff(sess, got); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
	_, err = s.ConsoleSession(ctx, sess.IDHash, base.Add(time.Hour))
	wantCode(t, err, problem.NotFound, "load an expired session")
	_, err = s.ConsoleSession(ctx, session.Hash("other"), base)
	wantCode(t, err, problem.NotFound, "load an unknown session")

	must(t, s.DeleteConsoleSession(ctx, sess.IDHash), "sign out")
	_, err = s.ConsoleSession(ctx, sess.IDHash, base.Add(time.Minute))
	wantCode(t, err, problem.NotFound, "load a session after sign-out")
	must(t, s.DeleteConsoleSession(ctx, sess.IDHash), "sign out twice")
}
