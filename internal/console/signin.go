package console

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

// apiTime is how the API writes times: ISO 8601 UTC with a Z.
const apiTime = "2006-01-02T15:04:05.000Z"

// csrfMatches reports whether got is the CSRF token of the session whose
// secret is secret.
func csrfMatches(got, secret string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(CSRFToken(secret))) == 1
}

// Authenticate returns who the session whose secret the cookie carries
// acts as: problem.Unauthenticated when it has ended, or when the client
// it was signed in with is revoked.
func (c *Console) Authenticate(ctx context.Context, secret string) (auth.Principal, error) {
	sess, err := c.session(ctx, secret)
	if err != nil {
		return auth.Principal{}, err
	}
	return principal(sess), nil
}

// principal is who a session acts as.
func principal(sess session.Session) auth.Principal {
	return auth.Principal{Subject: sess.Subject, ClientID: sess.ClientID, Tenant: sess.Tenant, Scopes: sess.Scopes, ExpiresAt: sess.ExpiresAt}
}

// session returns the session whose secret the cookie carries:
// problem.Unauthenticated when it has ended, or when the client it was
// signed in with is revoked (the session is then deleted: it ends with
// its client's tokens, within the revocation list's ttl).
func (c *Console) session(ctx context.Context, secret string) (session.Session, error) {
	sess, err := c.svc.Sessions.ConsoleSession(ctx, session.Hash(secret), c.svc.Now())
	if problem.Is(err, problem.NotFound) {
		return session.Session{}, problem.New(problem.Unauthenticated, "the console session has ended; sign in again")
	}
	if err != nil {
		return session.Session{}, err
	}
	if err := c.svc.Revocations.CheckClient(ctx, sess.ClientID, "this console session"); err != nil {
		if problem.Is(err, problem.Unauthenticated) {
			if derr := c.svc.Sessions.DeleteConsoleSession(ctx, sess.IDHash); derr != nil {
				return session.Session{}, derr
			}
		}
		return session.Session{}, err
	}
	return sess, nil
}

// secureCookies reports whether the console's cookie must be Secure: the
// request came over https, or the server's public URL is https (behind a
// proxy that ends TLS).
func (c *Console) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(c.svc.PublicURL, "https://")
}

// startSession makes a session for p, until expires at the latest, and
// sets its cookie.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, p auth.Principal, expires time.Time) error {
	now := c.svc.Now()
	if limit := now.Add(session.MaxSession); expires.IsZero() || expires.After(limit) {
		expires = limit
	}
	if !expires.After(now) {
		return problem.New(problem.Unauthenticated, "the token behind this sign-in has expired")
	}
	secret := RandomToken()
	sess := session.Session{IDHash: session.Hash(secret), Tenant: p.Tenant, Subject: p.Subject, ClientID: p.ClientID,
		Scopes: p.Scopes, CreatedAt: now, ExpiresAt: expires}
	if err := c.svc.Sessions.CreateConsoleSession(r.Context(), sess); err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Principal, info.Session = &p, secret
	http.SetCookie(w, SessionCookie(secret, expires, c.secureCookies(r)))
	return nil
}

// linkRequest is the optional body of POST /v1/console/links.
type linkRequest struct {
	// Next is the console page the link opens (default the console's home).
	Next string `json:"next,omitempty"`
}

// linkResponse is the answer of POST /v1/console/links.
type linkResponse struct {
	URL              string `json:"url"`
	ExpiresAt        string `json:"expires_at"`
	SessionExpiresAt string `json:"session_expires_at"`
}

// CreateSignInLink mints a one-time sign-in link for the caller's
// identity, tenant and scopes, valid for session.LinkTTL; the session it
// makes ends no later than the caller's token.
func (c *Console) CreateSignInLink(w http.ResponseWriter, r *http.Request) error {
	var req linkRequest
	if r.ContentLength != 0 {
		if err := frontdoor.DecodeJSON(r, &req); err != nil {
			return err
		}
	}
	if req.Next != "" && ReturnPath(req.Next) != req.Next {
		return problem.Field("next", "must be a console path, such as /console/approvals")
	}
	p := frontdoor.Principal(r)
	now := c.svc.Now()
	sessionEnd := p.ExpiresAt
	if limit := now.Add(session.MaxSession); sessionEnd.IsZero() || sessionEnd.After(limit) {
		sessionEnd = limit
	}
	g := session.Grant{Tenant: p.Tenant, Subject: p.Subject, ClientID: p.ClientID, Scopes: p.Scopes,
		SessionExpiresAt: sessionEnd, Next: req.Next, CreatedAt: now, ExpiresAt: now.Add(session.LinkTTL)}
	link, err := MintLink(r.Context(), c.svc.Sessions, c.svc.PublicURL, g)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return frontdoor.WriteJSON(w, http.StatusCreated, linkResponse{
		URL:       link,
		ExpiresAt: g.ExpiresAt.UTC().Format(apiTime), SessionExpiresAt: sessionEnd.UTC().Format(apiTime),
	})
}

// signInPage is what the sign-in page shows.
type signInPage struct {
	Refused string
	// OIDC names the identity provider people may sign in with ("" none).
	OIDC string
	// Next is the console page to open after signing in.
	Next string
}

// switchPage asks a person signed in as Current to confirm signing in as
// New with the one-time Grant the form posts.
type switchPage struct {
	Current, New *User
	Grant        string
}

// SignIn redeems a one-time link (?link=) into a session, or shows how to
// sign in. A link that is unknown, used, expired or its client's revoked
// is refused with a page that says which. A link opened in a browser
// signed in as another identity does not replace that session: the page
// asks to confirm (ConfirmSignIn), so a link someone else sent cannot
// silently sign the reader in as them.
func (c *Console) SignIn(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	link := q.Get("link")
	secret, signedIn := SessionSecret(r)
	var current session.Session
	if signedIn {
		var err error
		if current, err = c.session(r.Context(), secret); problem.Is(err, problem.Unauthenticated) {
			signedIn = false
		} else if err != nil {
			return err
		}
	}
	if link == "" {
		if signedIn {
			http.Redirect(w, r, ReturnPath(q.Get("next")), http.StatusSeeOther)
			return nil
		}
		return render(w, r, "signin", Page{Title: "Sign in", Data: signInPage{OIDC: c.signInName(), Next: q.Get("next")}})
	}
	g, err := c.redeemGrant(w, r, session.GrantLink, link)
	if err != nil || g == nil {
		return err
	}
	if signedIn && !sameIdentity(current, *g) {
		return c.askToSwitch(w, r, secret, current, *g)
	}
	return c.switchSession(w, r, current.IDHash, *g)
}

// redeemGrant redeems the one-time grant of kind with secret. A grant that
// is unknown, used, expired or made by a revoked client is answered here
// with the sign-in page saying which, and g is nil.
func (c *Console) redeemGrant(w http.ResponseWriter, r *http.Request, kind, secret string) (*session.Grant, error) {
	now := c.svc.Now()
	g, first, err := c.svc.Sessions.RedeemConsoleGrant(r.Context(), kind, session.Hash(secret), now)
	refused := ""
	status := http.StatusGone
	switch {
	case problem.Is(err, problem.NotFound):
		refused, status = "This sign-in link is not valid. Run agentplane console for a new one.", http.StatusNotFound
	case err != nil:
		return nil, err
	case !first:
		refused = "This sign-in link was already used: each link signs in once. Run agentplane console for a new one."
	case !now.Before(g.ExpiresAt):
		refused = "This sign-in link has expired: links work for 60 seconds. Run agentplane console for a new one."
	default:
		err := c.svc.Revocations.CheckClient(r.Context(), g.ClientID, "this sign-in link")
		if !problem.Is(err, problem.Unauthenticated) {
			return &g, err
		}
		refused, status = "This sign-in link was made with a token of a revoked client: it signs nobody in.", http.StatusForbidden
	}
	info := frontdoor.InfoFrom(r.Context())
	if err == nil {
		info.Tenant = g.Tenant
	}
	info.AddDetail("refused", refused)
	info.Problem = &problem.Error{Code: problem.Unauthenticated, Detail: refused}
	return nil, renderStatus(w, status, "signin", Page{Title: "Sign in", Data: signInPage{Refused: refused, OIDC: c.signInName()}})
}

// sameIdentity reports whether a grant signs in as the session's identity
// (its scopes may differ: a new token may hold others).
func sameIdentity(sess session.Session, g session.Grant) bool {
	return sess.Tenant == g.Tenant && sess.Subject == g.Subject && sess.ClientID == g.ClientID
}

// askToSwitch shows the page that asks a person signed in as current to
// confirm signing in as g's identity. g was redeemed; the page's form
// carries a new one-time grant for the same sign-in, which only a POST
// with the current session's CSRF token redeems, before the link would
// have expired.
func (c *Console) askToSwitch(w http.ResponseWriter, r *http.Request, secret string, current session.Session, g session.Grant) error {
	grant := RandomToken()
	g.IDHash, g.Kind, g.CreatedAt = session.Hash(grant), session.GrantSwitch, c.svc.Now()
	if err := c.svc.Sessions.CreateConsoleGrant(r.Context(), g); err != nil {
		return err
	}
	p := principal(current)
	info := frontdoor.InfoFrom(r.Context())
	info.Principal, info.Session = &p, secret
	info.AddDetail("confirm", "signed in as another identity")
	return render(w, r, "switch", Page{Title: "Switch identity", Data: switchPage{
		Current: currentUser(r),
		New:     &User{Subject: g.Subject, ClientID: g.ClientID, Tenant: g.Tenant, Scopes: g.Scopes},
		Grant:   grant,
	}})
}

// ConfirmSignIn replaces the session with the identity of the one-time
// grant the switch page posted; the session's CSRF token was checked on
// the way in (ReadForm).
func (c *Console) ConfirmSignIn(w http.ResponseWriter, r *http.Request) error {
	grant, err := FormValue(r.PostForm, "grant", 64)
	if err != nil {
		return err
	}
	g, err := c.redeemGrant(w, r, session.GrantSwitch, grant)
	if err != nil || g == nil {
		return err
	}
	return c.switchSession(w, r, session.Hash(frontdoor.InfoFrom(r.Context()).Session), *g)
}

// switchSession ends the session with idHash (none when "") and starts
// one from g, then opens g's page.
func (c *Console) switchSession(w http.ResponseWriter, r *http.Request, idHash string, g session.Grant) error {
	if idHash != "" {
		if err := c.svc.Sessions.DeleteConsoleSession(r.Context(), idHash); err != nil {
			return err
		}
	}
	p := auth.Principal{Subject: g.Subject, ClientID: g.ClientID, Tenant: g.Tenant, Scopes: g.Scopes}
	if err := c.startSession(w, r, p, g.SessionExpiresAt); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, ReturnPath(g.Next), http.StatusSeeOther)
	return nil
}

// SignOut ends the session and removes its cookie.
func (c *Console) SignOut(w http.ResponseWriter, r *http.Request) error {
	if err := c.svc.Sessions.DeleteConsoleSession(r.Context(), session.Hash(frontdoor.InfoFrom(r.Context()).Session)); err != nil {
		return err
	}
	http.SetCookie(w, ClearCookie(c.secureCookies(r)))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
	return nil
}
