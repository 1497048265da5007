package console

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/auth/session"
)

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
func MintLink(ctx context.Context, st session.Store, base string, g session.Grant) (string, error) {
	secret := RandomToken()
	g.IDHash, g.Kind = session.Hash(secret), session.GrantLink
	if err := st.CreateConsoleGrant(ctx, g); err != nil {
		return "", err
	}
	return strings.TrimSuffix(base, "/") + "/console/signin?link=" + secret, nil
}
