// Package auth authenticates callers: the Principal a verified access token
// names, scope checks, JWT verification against a JWKS (embedded or from an
// external OIDC issuer), and the embedded issuer with its client-credentials
// grant. Keys and clients live in a Store, so replicas share them.
package auth

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	Subject  string
	ClientID string
	Tenant   string
	Scopes   []string
	// ExpiresAt is when the token stops being accepted (its exp plus the
	// leeway); zero when unknown.
	ExpiresAt time.Time
}

// expiry returns ExpiresAt when it is known.
func (p Principal) expiry() (time.Time, bool) {
	return p.ExpiresAt, !p.ExpiresAt.IsZero()
}

// Has reports whether the principal holds scope.
func (p Principal) Has(scope string) bool {
	return slices.Contains(p.Scopes, scope)
}

// CanUseTool reports whether the principal holds tool:<name> or tool:*.
func (p Principal) CanUseTool(name string) bool {
	return p.Has("tool:*") || p.Has("tool:"+name)
}

// Tools lists the tools whose bodies p may see, by its tool:<name>
// scopes: "*" for tool:*.
func (p Principal) Tools() []string {
	var tools []string
	for _, sc := range p.Scopes {
		if name, ok := strings.CutPrefix(sc, "tool:"); ok {
			tools = append(tools, name)
		}
	}
	return tools
}

// ID is the principal's identity for idempotency keys: sub, else client_id.
func (p Principal) ID() string {
	if p.Subject != "" {
		return p.Subject
	}
	return p.ClientID
}

// Actor is the principal as an audit actor.
func (p Principal) Actor() audit.Actor {
	return audit.Actor{Sub: p.Subject, ClientID: p.ClientID}
}

// ParseScopes splits a space-separated scope string.
func ParseScopes(s string) []string {
	return strings.Fields(s)
}

// SigningKey is one of the embedded issuer's keys.
type SigningKey struct {
	ID        string
	Algorithm string
	// PrivateJWK is the private key as a JSON Web Key.
	PrivateJWK []byte
	CreatedAt  time.Time
}

// Client is an OAuth client of the client-credentials grant.
type Client struct {
	ID     string
	Tenant string
	Name   string
	// SecretHash is hex(SHA-256(secret)); secrets are 256-bit random values.
	SecretHash string
	Scopes     []string
	CreatedAt  time.Time
	// RevokedAt is when the client was revoked (nil while it is not): it
	// gets no new token and its tokens are refused.
	RevokedAt *time.Time
}

// Store keeps the embedded issuer's keys, OAuth clients and server secrets.
type Store interface {
	// SigningKeys returns the keys, newest first; the first is current.
	SigningKeys(ctx context.Context) ([]SigningKey, error)
	// AddSigningKey stores k as the newest key. When onlyIfNone is set it
	// stores k only if there is no key yet, so replicas starting together
	// agree on one; it reports whether k was stored.
	AddSigningKey(ctx context.Context, k SigningKey, onlyIfNone bool) (bool, error)
	// CreateClient stores a new client, appending rec in the same transaction.
	CreateClient(ctx context.Context, c Client, rec *audit.Record) error
	// Client returns a client by id, or a problem.NotFound error.
	Client(ctx context.Context, id string) (Client, error)
	// ServerSecret returns the secret of the given name, storing value as it
	// when there is none yet (first writer wins across replicas).
	ServerSecret(ctx context.Context, name string, value []byte) ([]byte, error)
}
