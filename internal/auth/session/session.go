// Package session holds the console's sign-in records: one-time sign-in
// links, pending OpenID Connect logins and sessions, and the Store that
// keeps them so that any replica serves any session. It is a domain
// package: the stores implement Store, and the console (cookies, pages)
// and the HTTP handlers use it.
package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// Hash is how a secret (a link's token, a session's id) is kept in the
// store: hex(SHA-256), so the store never holds a usable secret.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
