package auth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
)

// Paths of the embedded issuer's endpoints, relative to the issuer URL.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
	TokenPath     = "/oauth/token"
)

// Token lifetimes of the embedded issuer.
const (
	DefaultTokenTTL = time.Hour
	MaxTokenTTL     = 30 * 24 * time.Hour
	// issuerMaxAge bounds how long this replica signs with a key after
	// another replica rotated.
	issuerMaxAge = 10 * time.Second
)

// Issuer is the embedded token issuer: it signs RFC 9068 access tokens with
// the newest key in the Store and publishes the public keys.
type Issuer struct {
	store    Store
	issuer   string
	audience string
	ttl      time.Duration
	now      func() time.Time
	keys     *keyring
}

// IssuerOption adjusts an Issuer.
type IssuerOption func(*Issuer)

// WithAudience sets the aud of the tokens; default "agentplane".
func WithAudience(aud string) IssuerOption { return func(i *Issuer) { i.audience = aud } }

// NewIssuer returns the issuer named issuerURL (the server's external base
// URL). On first start it creates the signing key; when replicas start
// together the store keeps one key and every replica uses it.
func NewIssuer(ctx context.Context, store Store, issuerURL string, now func() time.Time, opts ...IssuerOption) (*Issuer, error) {
	u, err := url.Parse(issuerURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("issuer url %q: must be an absolute http(s) URL without query or fragment", issuerURL)
	}
	if now == nil {
		now = time.Now
	}
	i := &Issuer{
		store:    store,
		issuer:   strings.TrimSuffix(issuerURL, "/"),
		audience: DefaultAudience,
		ttl:      DefaultTokenTTL,
		now:      now,
	}
	for _, o := range opts {
		o(i)
	}
	i.keys = newKeyring(store, now, issuerMaxAge, issuerMaxAge)
	existing, err := store.SigningKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("load signing keys: %w", err)
	}
	if len(existing) == 0 {
		k, err := newSigningKey(now())
		if err != nil {
			return nil, err
		}
		if _, err := store.AddSigningKey(ctx, k, true); err != nil {
			return nil, fmt.Errorf("store first signing key: %w", err)
		}
	}
	// Re-read: another replica's key may have won.
	if _, err := i.keys.current(ctx); err != nil {
		return nil, err
	}
	return i, nil
}

// URL returns the issuer URL, the iss of its tokens.
func (i *Issuer) URL() string { return i.issuer }

// MintRequest describes an access token to sign.
type MintRequest struct {
	Tenant string
	// Subject is the sub; default ClientID, else "operator".
	Subject  string
	ClientID string
	Scopes   []string
	// TTL is the lifetime; default one hour, at most 30 days.
	TTL time.Duration
}

// Mint signs an access token.
func (i *Issuer) Mint(ctx context.Context, req MintRequest) (string, error) {
	var errs []problem.FieldError
	switch {
	case req.Tenant == "":
		errs = append(errs, problem.FieldError{Field: "tenant", Message: "is required"})
	case reservedTenant(req.Tenant, req.Scopes):
		errs = append(errs, problem.FieldError{Field: "tenant", Message: fmt.Sprintf("%q is reserved: its tokens may hold %s only", req.Tenant, systemScope)})
	}
	for _, s := range req.Scopes {
		if !ValidScope(s) {
			errs = append(errs, problem.FieldError{Field: "scope", Message: fmt.Sprintf("%q is not a valid scope", s)})
			break
		}
	}
	if req.TTL < 0 || req.TTL > MaxTokenTTL {
		errs = append(errs, problem.FieldError{Field: "ttl", Message: "must be positive and at most 720h"})
	}
	if len(errs) > 0 {
		return "", problem.Validation(errs...)
	}
	if req.TTL == 0 {
		req.TTL = DefaultTokenTTL
	}
	sub := req.Subject
	if sub == "" {
		sub = req.ClientID
	}
	if sub == "" {
		sub = "operator"
	}
	k, err := i.keys.current(ctx)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: k.alg, Key: k.private},
		(&jose.SignerOptions{}).WithType("at+jwt"),
	)
	if err != nil {
		return "", fmt.Errorf("new signer: %w", err)
	}
	now := i.now()
	claims := map[string]any{
		"iss":    i.issuer,
		"aud":    i.audience,
		"sub":    sub,
		"iat":    now.Unix(),
		"nbf":    now.Unix(),
		"exp":    now.Add(req.TTL).Unix(),
		"jti":    ids.NewAt("", now),
		"scope":  strings.Join(req.Scopes, " "),
		"tenant": req.Tenant,
	}
	if req.ClientID != "" {
		claims["client_id"] = req.ClientID
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return raw, nil
}

// Rotate adds a new signing key, which signs from now on. The previous key
// stays published, so tokens it signed keep verifying until they expire;
// the one before it is dropped.
func (i *Issuer) Rotate(ctx context.Context) (keyID string, err error) {
	id, err := RotateKey(ctx, i.store, i.now())
	if err != nil {
		return "", err
	}
	i.keys.invalidate()
	return id, nil
}

// RotateKey stores a new current signing key and returns its id; issuers
// and verifiers of every replica pick it up from the store.
func RotateKey(ctx context.Context, store Store, now time.Time) (string, error) {
	k, err := newSigningKey(now)
	if err != nil {
		return "", err
	}
	if _, err := store.AddSigningKey(ctx, k, false); err != nil {
		return "", fmt.Errorf("store signing key: %w", err)
	}
	return k.ID, nil
}

// JWKS returns the public JSON Web Key Set: the current and the previous key.
func (i *Issuer) JWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	keys, err := i.keys.all(ctx)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	if len(keys) == 0 {
		return jose.JSONWebKeySet{}, errors.New("no signing key")
	}
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, len(keys))}
	for n, k := range keys {
		set.Keys[n] = k.public
	}
	return set, nil
}

// DiscoveryDocument is the OpenID Provider metadata of the embedded issuer.
type DiscoveryDocument struct {
	Issuer                            string   `json:"issuer"`
	JWKSURI                           string   `json:"jwks_uri"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	IDTokenSigningAlgValuesSupported  []string `json:"id_token_signing_alg_values_supported"`
	ScopesSupported                   []string `json:"scopes_supported"`
	SubjectTypesSupported             []string `json:"subject_types_supported"`
}

// Discovery returns the document served at /.well-known/openid-configuration.
func (i *Issuer) Discovery() DiscoveryDocument {
	return DiscoveryDocument{
		Issuer:                            i.issuer,
		JWKSURI:                           i.issuer + JWKSPath,
		TokenEndpoint:                     i.issuer + TokenPath,
		GrantTypesSupported:               []string{"client_credentials"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post"},
		IDTokenSigningAlgValuesSupported:  []string{string(jose.ES256)},
		ScopesSupported:                   append(append([]string{}, EndpointScopes...), ScopeAllTools),
		SubjectTypesSupported:             []string{"public"},
	}
}
