package auth

import (
	"context"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentplane/agentplane/internal/problem"
)

// Key cache intervals of the embedded verifier.
const (
	// verifierMaxAge bounds how long a removed or superseded key stays
	// accepted by a replica that has not seen the change.
	verifierMaxAge = time.Minute
	// verifierMinRefresh is the least time between reloads on an unknown kid.
	verifierMinRefresh = 5 * time.Second
)

// EmbeddedVerifier verifies tokens of the embedded issuer against the keys
// in the Store. It accepts the two newest keys (those the JWKS publishes)
// and reloads them on an unknown key id, so a key rotated by another replica
// is accepted without a restart.
type EmbeddedVerifier struct {
	cfg  Config
	keys *keyring
}

var _ Verifier = (*EmbeddedVerifier)(nil)

// NewEmbeddedVerifier returns a verifier of the embedded issuer's tokens.
// cfg.Issuer must be the issuer URL the Issuer was made with.
func NewEmbeddedVerifier(store Store, cfg Config) *EmbeddedVerifier {
	cfg = cfg.withDefaults()
	return &EmbeddedVerifier{
		cfg:  cfg,
		keys: newKeyring(store, cfg.Now, verifierMaxAge, verifierMinRefresh),
	}
}

// Verify checks raw and returns the principal it names.
func (v *EmbeddedVerifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if !wellFormed(raw) {
		return Principal{}, unauthenticated("malformed token", nil)
	}
	tok, err := jwt.ParseSigned(raw, allowedAlgs)
	if err != nil {
		return Principal{}, unauthenticated("malformed token or algorithm not allowed", err)
	}
	if len(tok.Headers) != 1 {
		return Principal{}, unauthenticated("malformed token", nil)
	}
	h := tok.Headers[0]
	// Media types compare case-insensitively (RFC 7515 §4.1.9).
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
		return Principal{}, unauthenticated("token is not an access token (typ)", nil)
	}
	if h.KeyID == "" {
		return Principal{}, unauthenticated("token has no key id", nil)
	}
	k, ok, err := v.keys.lookup(ctx, h.KeyID)
	if err != nil {
		return Principal{}, problem.Wrap(problem.Unavailable, err, "signing keys unavailable")
	}
	if !ok {
		return Principal{}, unauthenticated("unknown signing key", nil)
	}
	if jose.SignatureAlgorithm(h.Algorithm) != k.alg {
		return Principal{}, unauthenticated("algorithm does not match the key", nil)
	}
	claims := map[string]any{}
	if err := tok.Claims(k.public.Key, &claims); err != nil {
		return Principal{}, unauthenticated("invalid token signature", err)
	}
	return v.cfg.principal(claims)
}
