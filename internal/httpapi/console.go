package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

// The web console's routes sit in the route table beside the API's (see
// routes.go): console rows authenticate by the session cookie instead of a
// bearer token, every POST of theirs also by the session's CSRF token, and
// their errors are pages. A console action names, in its row's same, the
// API route it is: it takes that row's scope, audit action, idempotency and
// handler, so the console adds no second path into the domain; its row's
// form turns the submitted form into that handler's JSON body.

// maxFormBytes bounds a console form.
const maxFormBytes = 64 << 10

// withSame fills each console action's row from the API row it names.
func withSame(routes []route) []route {
	byPattern := map[string]route{}
	for _, rt := range routes {
		byPattern[rt.pattern] = rt
	}
	for i := range routes {
		rt := &routes[i]
		if rt.same == "" {
			continue
		}
		api, ok := byPattern[rt.same]
		if !ok {
			panic("console route " + rt.pattern + " names no API route " + rt.same)
		}
		rt.scope, rt.action, rt.resource, rt.h = api.scope, api.action, api.resource, api.h
		rt.idempotent, rt.ownKeys = api.idempotent, api.ownKeys
	}
	return routes
}

// admitConsole authenticates a console request by its session, checks the
// CSRF token of a POST, then the rate limit and the route's scope, as
// admit does for a bearer token.
func (s *Server) admitConsole(w http.ResponseWriter, r *http.Request, rt *route) error {
	info := frontdoor.InfoFrom(r.Context())
	info.AddDetail("via", "console")
	secret, ok := console.SessionSecret(r)
	if !ok {
		if err := s.limitIP(w, r); err != nil {
			return err
		}
		return problem.New(problem.Unauthenticated, "not signed in to the console")
	}
	sess, err := s.consoleSession(r.Context(), secret)
	if problem.Is(err, problem.Unauthenticated) {
		if err := s.limitIP(w, r); err != nil {
			return err
		}
		return err
	}
	if err != nil {
		return err
	}
	p := auth.Principal{Subject: sess.Subject, ClientID: sess.ClientID, Tenant: sess.Tenant, Scopes: sess.Scopes, ExpiresAt: sess.ExpiresAt}
	info.Principal, info.Session = &p, secret
	if err := s.limitTenant(w, r, p.Tenant); err != nil {
		return err
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				return problem.New(problem.PayloadTooLarge, "the form is larger than %d KiB", maxFormBytes>>10)
			}
			return problem.Wrap(problem.MalformedRequest, err, "the form could not be read")
		}
		want := console.CSRFToken(secret)
		if got := r.PostForm.Get("csrf"); subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return problem.New(problem.CSRFTokenInvalid, "the form's CSRF token is not this session's; reload the page and send it again")
		}
	}
	if rt.scope != "" && !p.Has(rt.scope) {
		return &problem.Error{Code: problem.InsufficientScope, Scope: rt.scope,
			Detail: "this page needs the scope " + rt.scope}
	}
	return nil
}

// consoleSession returns the session whose secret the cookie carries:
// problem.Unauthenticated when it has ended, or when the client it was
// signed in with is revoked (the session is then deleted: it ends with
// its client's tokens, within the revocation list's ttl).
func (s *Server) consoleSession(ctx context.Context, secret string) (session.Session, error) {
	sess, err := s.deps.Store.ConsoleSession(ctx, session.Hash(secret), s.deps.Now())
	if problem.Is(err, problem.NotFound) {
		return session.Session{}, problem.New(problem.Unauthenticated, "the console session has ended; sign in again")
	}
	if err != nil {
		return session.Session{}, err
	}
	if err := s.deps.Revocations.CheckClient(ctx, sess.ClientID, "this console session"); err != nil {
		if problem.Is(err, problem.Unauthenticated) {
			if derr := s.deps.Store.DeleteConsoleSession(ctx, sess.IDHash); derr != nil {
				return session.Session{}, derr
			}
		}
		return session.Session{}, err
	}
	return sess, nil
}

// consoleAction turns a console form into the request its API handler
// takes: the form's fields as the JSON body, its idempotency_key as the
// Idempotency-Key header. A success answers 303 to the form's return page;
// a problem is shown as a page (frontdoor.WriteProblem).
func (s *Server) consoleAction(rt *route, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := rt.form(r.PostForm)
		if err != nil {
			frontdoor.WriteProblem(w, r, err)
			return
		}
		b := []byte{}
		if body != nil {
			if b, err = json.Marshal(body); err != nil {
				frontdoor.WriteProblem(w, r, err)
				return
			}
			r.Header.Set("Content-Type", "application/json")
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		if key := r.PostForm.Get("idempotency_key"); key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		h.ServeHTTP(&redirectWriter{ResponseWriter: w, to: returnPath(r.PostForm.Get("return")), info: frontdoor.InfoFrom(r.Context())}, r)
	})
}

// returnPath is a form's return page when it is a console path, else the
// console's home: never a link elsewhere.
func returnPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, console.Path) || strings.Contains(u.Path, "..") || strings.HasPrefix(p, "//") {
		return console.Path
	}
	return u.RequestURI()
}

// redirectWriter answers a successful response with 303 See Other to the
// return page, dropping its JSON body; errors pass through. The request is
// audited with the handler's own status: the redirect is the console's
// presentation of the API call, not its result.
type redirectWriter struct {
	http.ResponseWriter
	to       string
	info     *frontdoor.Info
	redirect bool
}

func (rw *redirectWriter) WriteHeader(status int) {
	if status >= 400 {
		rw.ResponseWriter.WriteHeader(status)
		return
	}
	rw.info.HandlerStatus = status
	rw.redirect = true
	h := rw.Header()
	h.Del("Content-Type")
	h.Del("Content-Length")
	h.Set("Location", rw.to)
	h.Set("Cache-Control", "no-store")
	rw.ResponseWriter.WriteHeader(http.StatusSeeOther)
}

func (rw *redirectWriter) Write(b []byte) (int, error) {
	if rw.redirect {
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (rw *redirectWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// consoleUser is the signed-in user of a console request, nil when none.
func consoleUser(r *http.Request) *console.User {
	info := frontdoor.InfoFrom(r.Context())
	if info.Principal == nil || info.Session == "" {
		return nil
	}
	p := info.Principal
	return &console.User{Subject: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes, CSRF: console.CSRFToken(info.Session)}
}

// renderConsole writes a console page with status 200.
func renderConsole(w http.ResponseWriter, r *http.Request, name string, p console.Page) error {
	p.User = consoleUser(r)
	var buf bytes.Buffer
	if err := console.Render(&buf, name, p); err != nil {
		return err
	}
	console.Headers(w.Header())
	w.WriteHeader(http.StatusOK)
	_, err := buf.WriteTo(w)
	return err
}

// errorPage is what the console's error page shows.
type errorPage struct {
	Detail, RequestID string
	SignIn, OIDC      bool
}

// writeConsoleProblem shows a problem of a console route as a page; a GET
// that is not signed in goes to the sign-in page instead.
func writeConsoleProblem(w http.ResponseWriter, r *http.Request, pe *problem.Error, status int) {
	info := frontdoor.InfoFrom(r.Context())
	if pe.Code == problem.Unauthenticated && r.Method == http.MethodGet && routeOf(r.Context()) != nil && !routeOf(r.Context()).public {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, "/console/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	title := http.StatusText(status)
	for _, k := range problem.Kinds {
		if k.Code == pe.Code {
			title = k.Title
		}
	}
	p := console.Page{Title: title, User: consoleUser(r), Data: errorPage{Detail: pe.Detail, RequestID: info.RequestID,
		SignIn: pe.Code == problem.Unauthenticated,
		// Only the provider's own routes refuse a sign-in when it is set up.
		OIDC: strings.HasPrefix(r.URL.Path, oidcCookiePath)}}
	var buf bytes.Buffer
	if err := console.Render(&buf, "error", p); err != nil {
		buf.Reset()
		buf.WriteString("<!doctype html><title>" + strconv.Itoa(status) + "</title><p>" + strconv.Itoa(status) + "</p>")
	}
	console.Headers(w.Header())
	w.WriteHeader(status)
	buf.WriteTo(w)
}

// secureCookies reports whether the console's cookie must be Secure: the
// request came over https, or the server's public URL is https (behind a
// proxy that ends TLS).
func (s *Server) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.cfg.PublicURL, "https://")
}

// startSession makes a session for p, until expires at the latest, and
// sets its cookie.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, p auth.Principal, expires time.Time) error {
	now := s.deps.Now()
	if limit := now.Add(session.MaxSession); expires.IsZero() || expires.After(limit) {
		expires = limit
	}
	if !expires.After(now) {
		return problem.New(problem.Unauthenticated, "the token behind this sign-in has expired")
	}
	secret := console.RandomToken()
	sess := session.Session{IDHash: session.Hash(secret), Tenant: p.Tenant, Subject: p.Subject, ClientID: p.ClientID,
		Scopes: p.Scopes, CreatedAt: now, ExpiresAt: expires}
	if err := s.deps.Store.CreateConsoleSession(r.Context(), sess); err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Principal, info.Session = &p, secret
	http.SetCookie(w, console.SessionCookie(secret, expires, s.secureCookies(r)))
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

// handleCreateSignInLink mints a one-time sign-in link for the caller's
// identity, tenant and scopes, valid for session.LinkTTL; the session it
// makes ends no later than the caller's token.
func (s *Server) handleCreateSignInLink(w http.ResponseWriter, r *http.Request) error {
	var req linkRequest
	if r.ContentLength != 0 {
		if err := frontdoor.DecodeJSON(r, &req); err != nil {
			return err
		}
	}
	if req.Next != "" && returnPath(req.Next) != req.Next {
		return problem.Field("next", "must be a console path, such as /console/approvals")
	}
	p := frontdoor.Principal(r)
	now := s.deps.Now()
	sessionEnd := p.ExpiresAt
	if limit := now.Add(session.MaxSession); sessionEnd.IsZero() || sessionEnd.After(limit) {
		sessionEnd = limit
	}
	g := session.Grant{Tenant: p.Tenant, Subject: p.Subject, ClientID: p.ClientID, Scopes: p.Scopes,
		SessionExpiresAt: sessionEnd, Next: req.Next, CreatedAt: now, ExpiresAt: now.Add(session.LinkTTL)}
	link, err := console.MintLink(r.Context(), s.deps.Store, s.cfg.PublicURL, g)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return frontdoor.WriteJSON(w, http.StatusCreated, linkResponse{
		URL:       link,
		ExpiresAt: g.ExpiresAt.UTC().Format(timeFormat), SessionExpiresAt: sessionEnd.UTC().Format(timeFormat),
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
	Current, New *console.User
	Grant        string
}

// handleSignIn redeems a one-time link (?link=) into a session, or shows
// how to sign in. A link that is unknown, used, expired or its client's
// revoked is refused with a page that says which. A link opened in a
// browser signed in as another identity does not replace that session:
// the page asks to confirm (handleConfirmSignIn), so a link someone else
// sent cannot silently sign the reader in as them.
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	link := q.Get("link")
	secret, signedIn := console.SessionSecret(r)
	var current session.Session
	if signedIn {
		var err error
		if current, err = s.consoleSession(r.Context(), secret); problem.Is(err, problem.Unauthenticated) {
			signedIn = false
		} else if err != nil {
			return err
		}
	}
	if link == "" {
		if signedIn {
			http.Redirect(w, r, returnPath(q.Get("next")), http.StatusSeeOther)
			return nil
		}
		return renderConsole(w, r, "signin", console.Page{Title: "Sign in", Data: signInPage{OIDC: s.signInName(), Next: q.Get("next")}})
	}
	g, err := s.redeemGrant(w, r, session.GrantLink, link)
	if err != nil || g == nil {
		return err
	}
	if signedIn && !sameIdentity(current, *g) {
		return s.askToSwitch(w, r, secret, current, *g)
	}
	return s.switchSession(w, r, current.IDHash, *g)
}

// redeemGrant redeems the one-time grant of kind with secret. A grant that
// is unknown, used, expired or made by a revoked client is answered here
// with the sign-in page saying which, and g is nil.
func (s *Server) redeemGrant(w http.ResponseWriter, r *http.Request, kind, secret string) (*session.Grant, error) {
	now := s.deps.Now()
	g, first, err := s.deps.Store.RedeemConsoleGrant(r.Context(), kind, session.Hash(secret), now)
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
		err := s.deps.Revocations.CheckClient(r.Context(), g.ClientID, "this sign-in link")
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
	var buf bytes.Buffer
	if err := console.Render(&buf, "signin", console.Page{Title: "Sign in", Data: signInPage{Refused: refused, OIDC: s.signInName()}}); err != nil {
		return nil, err
	}
	console.Headers(w.Header())
	w.WriteHeader(status)
	_, err = buf.WriteTo(w)
	return nil, err
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
func (s *Server) askToSwitch(w http.ResponseWriter, r *http.Request, secret string, current session.Session, g session.Grant) error {
	grant := console.RandomToken()
	g.IDHash, g.Kind, g.CreatedAt = session.Hash(grant), session.GrantSwitch, s.deps.Now()
	if err := s.deps.Store.CreateConsoleGrant(r.Context(), g); err != nil {
		return err
	}
	p := auth.Principal{Subject: current.Subject, ClientID: current.ClientID, Tenant: current.Tenant, Scopes: current.Scopes, ExpiresAt: current.ExpiresAt}
	info := frontdoor.InfoFrom(r.Context())
	info.Principal, info.Session = &p, secret
	info.AddDetail("confirm", "signed in as another identity")
	return renderConsole(w, r, "switch", console.Page{Title: "Switch identity", Data: switchPage{
		Current: consoleUser(r),
		New:     &console.User{Subject: g.Subject, ClientID: g.ClientID, Tenant: g.Tenant, Scopes: g.Scopes},
		Grant:   grant,
	}})
}

// handleConfirmSignIn replaces the session with the identity of the
// one-time grant the switch page posted; the session's CSRF token was
// checked on the way in (admitConsole).
func (s *Server) handleConfirmSignIn(w http.ResponseWriter, r *http.Request) error {
	grant, err := formValue(r.PostForm, "grant", 64)
	if err != nil {
		return err
	}
	g, err := s.redeemGrant(w, r, session.GrantSwitch, grant)
	if err != nil || g == nil {
		return err
	}
	return s.switchSession(w, r, session.Hash(frontdoor.InfoFrom(r.Context()).Session), *g)
}

// switchSession ends the session with idHash (none when "") and starts
// one from g, then opens g's page.
func (s *Server) switchSession(w http.ResponseWriter, r *http.Request, idHash string, g session.Grant) error {
	if idHash != "" {
		if err := s.deps.Store.DeleteConsoleSession(r.Context(), idHash); err != nil {
			return err
		}
	}
	p := auth.Principal{Subject: g.Subject, ClientID: g.ClientID, Tenant: g.Tenant, Scopes: g.Scopes}
	if err := s.startSession(w, r, p, g.SessionExpiresAt); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, returnPath(g.Next), http.StatusSeeOther)
	return nil
}

// handleSignOut ends the session and removes its cookie.
func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request) error {
	if err := s.deps.Store.DeleteConsoleSession(r.Context(), session.Hash(frontdoor.InfoFrom(r.Context()).Session)); err != nil {
		return err
	}
	http.SetCookie(w, console.ClearCookie(s.secureCookies(r)))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
	return nil
}

// handleConsoleHome opens the first page of the nav the user may see.
func (s *Server) handleConsoleHome(w http.ResponseWriter, r *http.Request) error {
	for _, n := range (console.Page{User: consoleUser(r)}).NavFor() {
		http.Redirect(w, r, n.Path, http.StatusSeeOther)
		return nil
	}
	return renderConsole(w, r, "error", console.Page{Title: "Nothing to show",
		Data: errorPage{Detail: "Your scopes open none of the console's pages."}})
}

func handleConsoleAssets(w http.ResponseWriter, r *http.Request) error {
	console.Assets().ServeHTTP(w, r)
	return nil
}

// formValue reads one form field, bounded.
func formValue(f url.Values, name string, max int) (string, error) {
	v := f.Get(name)
	if len(v) > max {
		return "", problem.Field(name, "must be at most %d characters", max)
	}
	return v, nil
}

// Forms of the console's actions: each returns the JSON body of the API
// route the action is.

func formNone(url.Values) (any, error) { return nil, nil }

func formDecide(f url.Values) (any, error) {
	comment, err := formValue(f, "comment", 4000)
	if err != nil {
		return nil, err
	}
	return decideRequest{Decision: f.Get("decision"), Comment: comment}, nil
}

func formReplay(f url.Values) (any, error) {
	dry := f.Get("dry_run") == "true"
	return replayRequest{TargetAgentVersion: f.Get("version"), DryRun: &dry}, nil
}
