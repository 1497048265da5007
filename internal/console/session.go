package console

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// Grant kinds: a one-time sign-in link; the same sign-in waiting for a
// person signed in as another identity to confirm the switch (the link
// is used by then); and a pending OpenID Connect login (its state, PKCE
// verifier and nonce until the provider sends the person back).
const (
	GrantLink   = "link"
	GrantSwitch = "switch"
	GrantOIDC   = "oidc"
)

// Lifetimes of the sign-in records.
const (
	// LinkTTL is how long a one-time sign-in link may be used.
	LinkTTL = 60 * time.Second
	// LoginTTL is how long a person has at the OpenID Connect provider.
	LoginTTL = 10 * time.Minute
	// MaxSession bounds a session however long its token or ID token lives.
	MaxSession = 12 * time.Hour
)

// Grant is a one-time sign-in record: redeemed once, by its secret.
type Grant struct {
	// IDHash is Hash of the secret the link or state carries.
	IDHash string
	Kind   string
	// Tenant, Subject, ClientID and Scopes are the session's to be (a link's).
	Tenant, Subject, ClientID string
	Scopes                    []string
	// SessionExpiresAt bounds the session a link makes: its token's expiry.
	SessionExpiresAt time.Time
	// Verifier and Nonce belong to an OpenID Connect login; Next is the
	// console page to return to.
	Verifier, Nonce, Next string
	CreatedAt, ExpiresAt  time.Time
}

// Session is a signed-in person's session.
type Session struct {
	// IDHash is Hash of the secret in the session cookie.
	IDHash                    string
	Tenant, Subject, ClientID string
	Scopes                    []string
	CreatedAt, ExpiresAt      time.Time
}

// Store keeps sign-in grants and sessions, so that any replica serves any
// session.
type Store interface {
	// CreateConsoleGrant stores g, dropping grants expired long ago.
	CreateConsoleGrant(ctx context.Context, g Grant) error
	// RedeemConsoleGrant marks the grant of kind with idHash used and
	// returns it, with first false when it had been used before; an
	// unknown grant is problem.NotFound. Expiry is the caller's to check.
	RedeemConsoleGrant(ctx context.Context, kind, idHash string, now time.Time) (g Grant, first bool, err error)
	// CreateConsoleSession stores s, dropping expired sessions.
	CreateConsoleSession(ctx context.Context, s Session) error
	// ConsoleSession returns the unexpired session with idHash, or
	// problem.NotFound.
	ConsoleSession(ctx context.Context, idHash string, now time.Time) (Session, error)
	// DeleteConsoleSession ends a session; ending an unknown one is no error.
	DeleteConsoleSession(ctx context.Context, idHash string) error
}

// CookieName is the session cookie's name. The __Host- prefix (which
// requires Secure) is used over https only.
const CookieName = "agentplane_console"

// SecureCookieName is the session cookie's name over https.
const SecureCookieName = "__Host-agentplane_console"

// SessionCookie is the cookie that carries a session's secret: HttpOnly,
// SameSite=Lax, Secure over https, for the whole console.
func SessionCookie(secret string, expires time.Time, secure bool) *http.Cookie {
	c := &http.Cookie{Name: CookieName, Value: secret, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Expires: expires, Secure: secure}
	if secure {
		c.Name = SecureCookieName
	}
	return c
}

// ClearCookie removes the session cookie.
func ClearCookie(secure bool) *http.Cookie {
	c := SessionCookie("", time.Unix(0, 0), secure)
	c.MaxAge = -1
	return c
}

// SessionSecret returns the session secret the request's cookie carries.
func SessionSecret(r *http.Request) (string, bool) {
	for _, name := range []string{SecureCookieName, CookieName} {
		if c, err := r.Cookie(name); err == nil && len(c.Value) == 64 {
			return c.Value, true
		}
	}
	return "", false
}

// MintLink stores a one-time sign-in link for the session g describes
// (Tenant, Subject, ClientID, Scopes, SessionExpiresAt, Next, CreatedAt,
// ExpiresAt) and returns its address under base.
func MintLink(ctx context.Context, st Store, base string, g Grant) (string, error) {
	secret := RandomToken()
	g.IDHash, g.Kind = Hash(secret), GrantLink
	if err := st.CreateConsoleGrant(ctx, g); err != nil {
		return "", err
	}
	return strings.TrimSuffix(base, "/") + "/console/signin?link=" + secret, nil
}
