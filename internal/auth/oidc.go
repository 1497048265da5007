package auth

import (
	"context"
	"fmt"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCVerifier verifies tokens of an external OpenID Connect issuer, found by
// discovery. go-oidc checks the signature against the issuer's JWKS, which
// it caches and refetches on an unknown key id; the claims are checked here
// as for the embedded issuer.
type OIDCVerifier struct {
	cfg      Config
	verifier *oidc.IDTokenVerifier
}

var _ Verifier = (*OIDCVerifier)(nil)

// NewOIDCVerifier discovers issuerURL (its /.well-known/openid-configuration)
// and returns a verifier of its access tokens. cfg.Issuer is ignored: tokens
// must carry the discovered issuer. cfg.HTTPClient, when set, makes the
// discovery and JWKS requests.
func NewOIDCVerifier(ctx context.Context, issuerURL string, cfg Config) (*OIDCVerifier, error) {
	if cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, cfg.HTTPClient)
	}
	provider, err := oidc.NewProvider(ctx, issuerURL)
	if err != nil {
		return nil, fmt.Errorf("discover oidc issuer %s: %w", issuerURL, err)
	}
	var meta struct {
		Issuer string `json:"issuer"`
	}
	if err := provider.Claims(&meta); err != nil {
		return nil, fmt.Errorf("read oidc discovery of %s: %w", issuerURL, err)
	}
	cfg.Issuer = meta.Issuer
	cfg = cfg.withDefaults()
	algs := make([]string, len(allowedAlgs))
	for i, a := range allowedAlgs {
		algs[i] = string(a)
	}
	// go-oidc checks only the signature and the algorithm: its expiry check
	// has no leeway and a fixed 5 min one on nbf, and cfg.principal checks
	// issuer, audience and times the same way for both verifiers.
	v := provider.VerifierContext(ctx, &oidc.Config{
		SupportedSigningAlgs: algs,
		SkipClientIDCheck:    true,
		SkipExpiryCheck:      true,
		SkipIssuerCheck:      true,
	})
	return &OIDCVerifier{cfg: cfg, verifier: v}, nil
}

// Verify checks raw and returns the principal it names.
func (v *OIDCVerifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if !wellFormed(raw) {
		return Principal{}, unauthenticated("malformed token", nil)
	}
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return Principal{}, unauthenticated("invalid token signature or format", err)
	}
	claims := map[string]any{}
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, unauthenticated("malformed token claims", err)
	}
	return v.cfg.principal(claims)
}
