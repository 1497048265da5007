package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

// Where the OpenID Connect provider sends a person back, under the public
// URL, and the cookie that ties the login to the browser that started it.
const (
	OIDCCallbackPath = "/console/oidc/callback"
	oidcStateCookie  = "agentplane_oidc_state"
	oidcCookiePath   = "/console/oidc/"
	// oidcTimeout bounds the code exchange with the provider.
	oidcTimeout = 10 * time.Second
	// maxProviderText bounds what of a provider's error is shown.
	maxProviderText = 300
)

// OIDCConfig is the console's client at an OpenID Connect provider.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (discovered at
	// Issuer/.well-known/openid-configuration).
	Issuer string
	// ClientID and ClientSecret are the console's client; the ID token's
	// audience must be ClientID.
	ClientID, ClientSecret string
	// HTTPClient makes discovery, JWKS and token requests (default: one
	// with a 10 s timeout).
	HTTPClient *http.Client
}

// OIDC signs people in to the console through an OpenID Connect provider
// (authorization code with PKCE). The access token it receives is checked
// by the API's own verifier, so a session gets the tenant, subject and
// scopes a bearer token of that provider gets.
type OIDC struct {
	name     string
	client   *http.Client
	oauth    oauth2.Config
	idTokens *oidc.IDTokenVerifier
}

// NewOIDC discovers cfg.Issuer and returns the console's sign-in through
// it. The server it is given to sets the redirect URL (its public URL +
// OIDCCallbackPath) and the scopes it asks for (ForServer).
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("a console client id and secret are required")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: oidcTimeout}
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, hc), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover oidc issuer %s: %w", cfg.Issuer, err)
	}
	name := cfg.Issuer
	if u, err := url.Parse(cfg.Issuer); err == nil && u.Host != "" {
		name = u.Host
	}
	return &OIDC{
		name:   name,
		client: hc,
		oauth:  oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: provider.Endpoint()},
		// The verifier keeps the discovery context for its JWKS requests.
		idTokens: provider.VerifierContext(oidc.ClientContext(context.WithoutCancel(ctx), hc), &oidc.Config{ClientID: cfg.ClientID}),
	}, nil
}

// ForServer returns o with the redirect URL of the server at publicURL and
// the scopes the console's routes need.
func (o *OIDC) ForServer(publicURL string, scopes []string) *OIDC {
	c := *o
	c.oauth.RedirectURL = strings.TrimSuffix(publicURL, "/") + OIDCCallbackPath
	c.oauth.Scopes = append([]string{oidc.ScopeOpenID}, scopes...)
	return &c
}

// signInName is how the sign-in page names the provider ("" without one).
func (c *Console) signInName() string {
	if c.oidc == nil {
		return ""
	}
	return c.oidc.name
}

// admitOIDC marks a request of the provider's routes in the audit record
// and refuses it when no provider is set up. (Those routes are public: the
// middleware limits them by client IP.)
func (c *Console) admitOIDC(r *http.Request) error {
	frontdoor.InfoFrom(r.Context()).AddDetail("via", "oidc")
	if c.oidc == nil {
		return problem.New(problem.NotFound, "sign-in through an identity provider is not configured on this server (serve --console-client-id)")
	}
	return nil
}

// OIDCLogin starts a sign-in at the provider: it keeps the state,
// nonce and PKCE verifier in the store (any replica may receive the
// callback), ties the state to this browser with a short-lived cookie,
// and redirects to the provider's authorization endpoint.
func (c *Console) OIDCLogin(w http.ResponseWriter, r *http.Request) error {
	if err := c.admitOIDC(r); err != nil {
		return err
	}
	now := c.svc.Now()
	state, nonce, verifier := RandomToken(), RandomToken(), oauth2.GenerateVerifier()
	g := session.Grant{IDHash: session.Hash(state), Kind: session.GrantOIDC, Verifier: verifier, Nonce: nonce,
		Next: ReturnPath(r.URL.Query().Get("next")), CreatedAt: now, ExpiresAt: now.Add(session.LoginTTL)}
	if err := c.svc.Sessions.CreateConsoleGrant(r.Context(), g); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: oidcStateCookie, Value: state, Path: oidcCookiePath, MaxAge: int(session.LoginTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.secureCookies(r)})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, c.oidc.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusSeeOther)
	return nil
}

// OIDCCallback finishes a sign-in: it checks the state against the
// browser's cookie and the store, exchanges the code with the PKCE
// verifier, verifies the ID token (signature, audience = the console's
// client id, nonce), checks the access token as the API checks a bearer
// token of the provider, and starts a session with that token's tenant,
// subject and scopes, ending no later than either token.
func (c *Console) OIDCCallback(w http.ResponseWriter, r *http.Request) error {
	info := frontdoor.InfoFrom(r.Context())
	if err := c.admitOIDC(r); err != nil {
		return err
	}
	// The state cookie is single use whatever the outcome.
	http.SetCookie(w, &http.Cookie{Name: oidcStateCookie, Path: oidcCookiePath, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.secureCookies(r)})
	w.Header().Set("Cache-Control", "no-store")
	refuse := func(format string, args ...any) error {
		detail := fmt.Sprintf(format, args...)
		info.AddDetail("refused", detail)
		return problem.New(problem.Unauthenticated, "%s", detail)
	}
	q := r.URL.Query()
	state := q.Get("state")
	cookie, err := r.Cookie(oidcStateCookie)
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(state)) != 1 {
		return refuse("This sign-in was not started from this browser, or took longer than %d minutes (its state does not match). Start again from the sign-in page.", int(session.LoginTTL.Minutes()))
	}
	now := c.svc.Now()
	g, first, err := c.svc.Sessions.RedeemConsoleGrant(r.Context(), session.GrantOIDC, session.Hash(state), now)
	switch {
	case problem.Is(err, problem.NotFound):
		return refuse("This sign-in is not one this server started. Start again from the sign-in page.")
	case err != nil:
		return err
	case !first:
		return refuse("This sign-in was already completed: each one works once. Start again from the sign-in page.")
	case !now.Before(g.ExpiresAt):
		return refuse("This sign-in took longer than %d minutes at the identity provider. Start again from the sign-in page.", int(session.LoginTTL.Minutes()))
	}
	if code := q.Get("error"); code != "" {
		return refuse("The identity provider refused the sign-in: %s.", providerText(code, q.Get("error_description")))
	}
	code := q.Get("code")
	if code == "" {
		return refuse("The identity provider sent no authorization code. Start again from the sign-in page.")
	}

	ctx, cancel := context.WithTimeout(oidc.ClientContext(r.Context(), c.oidc.client), oidcTimeout)
	defer cancel()
	tok, err := c.oidc.oauth.Exchange(ctx, code, oauth2.VerifierOption(g.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return refuse("The identity provider refused the authorization code: %s.", providerText(re.ErrorCode, re.ErrorDescription))
		}
		c.svc.Logger.Warn("oidc code exchange failed", "request_id", info.RequestID, "err", err)
		return problem.New(problem.Unavailable, "the identity provider could not be reached to finish the sign-in; try again")
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		return refuse("The identity provider returned no ID token: the console's client must be allowed the openid scope.")
	}
	idToken, err := c.oidc.idTokens.Verify(ctx, rawID)
	if err != nil {
		c.svc.Logger.Info("oidc id token refused", "request_id", info.RequestID, "err", err)
		return refuse("The identity provider's ID token is not valid for this console (its signature, issuer, audience %q or expiry).", c.oidc.oauth.ClientID)
	}
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(g.Nonce)) != 1 {
		return refuse("The identity provider's ID token is not for this sign-in (its nonce does not match). Start again from the sign-in page.")
	}
	// The access token is checked as the API checks a bearer token: the
	// session holds what a request with it would.
	p, err := c.svc.Verifier.Verify(ctx, tok.AccessToken)
	if err != nil {
		return refuse("The identity provider's access token is not one this server accepts: %s.", problem.As(err).Detail)
	}
	switch {
	case p.Subject == "":
		return refuse("The identity provider's access token names no subject (sub): a console session needs the identity it acts as.")
	case p.Subject != idToken.Subject:
		return refuse("The identity provider's access and ID tokens name different subjects.")
	}
	expires := idToken.Expiry
	for _, t := range []time.Time{p.ExpiresAt, tok.Expiry} {
		if !t.IsZero() && t.Before(expires) {
			expires = t
		}
	}
	if err := c.startSession(w, r, p, expires); err != nil {
		return err
	}
	http.Redirect(w, r, ReturnPath(g.Next), http.StatusSeeOther)
	return nil
}

// providerText is an error code and description a provider sent, bounded
// and made safe to show and audit.
func providerText(code, description string) string {
	t := code
	if description != "" {
		t += ": " + description
	}
	if len(t) > maxProviderText {
		t = t[:maxProviderText] + "…"
	}
	return audit.Text(strings.ToValidUTF8(t, ""))
}
