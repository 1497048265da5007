package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

// Defaults and limits of token validation (SPEC §2).
const (
	DefaultAudience    = "agentplane"
	DefaultTenantClaim = "tenant"
	// MaxLeeway is the most clock skew tolerated on exp, nbf and iat.
	MaxLeeway = 60 * time.Second
	// maxTokenLen bounds the work done on an arbitrary Authorization header.
	maxTokenLen = 16 << 10
)

// allowedAlgs is the signature algorithm allow-list: never none, never HMAC.
var allowedAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Verifier checks a raw bearer token and returns the principal it names.
// Every refusal is a *problem.Error of code Unauthenticated whose detail is a
// short reason safe to send; the token itself never appears in an error.
type Verifier interface {
	Verify(ctx context.Context, raw string) (Principal, error)
}

// Config is what a verifier checks beyond the signature.
type Config struct {
	// Issuer is the exact iss the tokens must carry. NewOIDCVerifier sets it
	// to the issuer URL it discovers.
	Issuer string
	// Audience must be one of the token's aud values; default "agentplane".
	Audience string
	// TenantClaim names the claim holding the tenant; default "tenant".
	TenantClaim string
	// Leeway is the clock skew tolerated on exp, nbf and iat: zero means the
	// default of 60 s, more than 60 s is capped, a negative value means none.
	Leeway time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// HTTPClient, when set, makes NewOIDCVerifier's discovery and JWKS
	// requests (for example a client that refuses private addresses).
	HTTPClient *http.Client
}

func (c Config) withDefaults() Config {
	if c.Audience == "" {
		c.Audience = DefaultAudience
	}
	if c.TenantClaim == "" {
		c.TenantClaim = DefaultTenantClaim
	}
	switch {
	case c.Leeway == 0, c.Leeway > MaxLeeway:
		c.Leeway = MaxLeeway
	case c.Leeway < 0:
		c.Leeway = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Issuer = strings.TrimSuffix(c.Issuer, "/")
	return c
}

// unauthenticated returns the refusal of a token with a reason safe to send.
// cause is kept for the server's log and must not contain the token.
func unauthenticated(reason string, cause error) *problem.Error {
	return &problem.Error{Code: problem.Unauthenticated, Detail: reason, Err: cause}
}

// wellFormed reports whether raw has the shape of a JWS compact serialization:
// three base64url segments. It refuses whitespace, which go-jose would strip,
// so that only the exact issued string is accepted.
func wellFormed(raw string) bool {
	if raw == "" || len(raw) > maxTokenLen || strings.Count(raw, ".") != 2 {
		return false
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	// Each segment must be canonical base64url: unused trailing bits zero.
	// Otherwise several strings decode to one signed token, and anything
	// keyed on the token's text (a deny list, a cache) could be sidestepped.
	for _, seg := range strings.Split(raw, ".") {
		if _, err := base64.RawURLEncoding.Strict().DecodeString(seg); err != nil {
			return false
		}
	}
	return true
}

// principal checks the claims of a token whose signature is already verified
// and returns the principal they name.
func (c Config) principal(claims map[string]any) (Principal, error) {
	if iss, _ := claims["iss"].(string); iss != c.Issuer {
		return Principal{}, unauthenticated(fmt.Sprintf("issuer mismatch: the token's issuer is %q, this server's is %q "+
			"(mint tokens with the server's --public-url, or its --addr when it has none)", iss, c.Issuer), nil)
	}
	if !audienceContains(claims["aud"], c.Audience) {
		return Principal{}, unauthenticated("audience mismatch", nil)
	}
	now := c.Now()
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return Principal{}, unauthenticated("token has no valid exp claim", nil)
	}
	if now.After(exp.Add(c.Leeway)) {
		return Principal{}, unauthenticated("token expired", nil)
	}
	if v, present := claims["nbf"]; present {
		nbf, ok := numericDate(v)
		if !ok {
			return Principal{}, unauthenticated("token has an invalid nbf claim", nil)
		}
		if now.Add(c.Leeway).Before(nbf) {
			return Principal{}, unauthenticated("token not yet valid", nil)
		}
	}
	if v, present := claims["iat"]; present {
		iat, ok := numericDate(v)
		if !ok {
			return Principal{}, unauthenticated("token has an invalid iat claim", nil)
		}
		if now.Add(c.Leeway).Before(iat) {
			return Principal{}, unauthenticated("token issued in the future", nil)
		}
	}
	tenant, _ := claims[c.TenantClaim].(string)
	if tenant == "" {
		return Principal{}, unauthenticated("token has no "+c.TenantClaim+" claim", nil)
	}
	if audit.Text(tenant) != tenant {
		return Principal{}, unauthenticated("token's "+c.TenantClaim+" is not valid text", nil)
	}
	sub, subOK := optionalString(claims, "sub")
	clientID, clientOK := optionalString(claims, "client_id")
	if !subOK || !clientOK {
		return Principal{}, unauthenticated("token has an invalid sub or client_id claim", nil)
	}
	if sub == "" && clientID == "" {
		return Principal{}, unauthenticated("token has no subject", nil)
	}
	scopes, ok := scopeClaim(claims["scope"])
	if !ok {
		return Principal{}, unauthenticated("token has an invalid scope claim", nil)
	}
	if reservedTenant(tenant, scopes) {
		return Principal{}, unauthenticated("token's "+c.TenantClaim+" is reserved", nil)
	}
	return Principal{Subject: sub, ClientID: clientID, Tenant: tenant, Scopes: scopes, ExpiresAt: exp.Add(c.Leeway)}, nil
}

// systemScope is the one scope a principal of audit.SystemTenant may hold.
const systemScope = "audit:read"

// reservedTenant reports whether a principal of tenant with scopes is
// refused: audit.SystemTenant holds the audit chain of requests without a
// valid tenant, so its principals may only read and verify that chain (an
// operator's `agentplane token --tenant _system --scope audit:read`).
func reservedTenant(tenant string, scopes []string) bool {
	return tenant == audit.SystemTenant && slices.ContainsFunc(scopes, func(s string) bool { return s != systemScope })
}

// audienceContains reports whether aud (a string or an array of strings)
// holds want.
func audienceContains(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		return slices.ContainsFunc(a, func(v any) bool { s, _ := v.(string); return s == want })
	}
	return false
}

// numericDate reads a JSON NumericDate (seconds since the epoch).
func numericDate(v any) (time.Time, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return time.Time{}, false
		}
	default:
		return time.Time{}, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// optionalString returns claim name as a string; ok is false when it is
// present with another type.
func optionalString(claims map[string]any, name string) (string, bool) {
	v, present := claims[name]
	if !present || v == nil {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
}

// scopeClaim reads scope: a space-separated string (RFC 9068), or an array
// of strings as some issuers write it. A missing scope is no scopes.
func scopeClaim(v any) ([]string, bool) {
	switch s := v.(type) {
	case nil:
		return []string{}, true
	case string:
		return append([]string{}, ParseScopes(s)...), true
	case []any:
		out := make([]string, 0, len(s))
		for _, e := range s {
			str, ok := e.(string)
			if !ok || !ValidScope(str) {
				return nil, false
			}
			out = append(out, str)
		}
		return out, true
	}
	return nil, false
}
