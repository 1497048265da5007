package console

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Services are what the console's pages and sign-in read and write.
type Services struct {
	// Sessions keeps sessions and one-time grants; Revocations ends those
	// of a revoked client.
	Sessions    session.Store
	Revocations *auth.Revocations
	// Verifier checks the access token an OpenID Connect sign-in receives,
	// as the API checks a bearer token.
	Verifier  auth.Verifier
	Workflows workflow.Store
	Agents    agent.VersionStore
	// Replays lists a workflow's replays; Viewer signs their pages' links.
	Replays replay.Store
	Viewer  *web.Signer
	Tools   tool.Store
	// SearchOperations is the operation search of GET /v1/operations.
	SearchOperations OperationSearch
	Models           *model.Service
	Audit            audit.Store
	// Schedules and Webhooks are nil when the server runs without them:
	// their pages then answer 503.
	Schedules *schedule.Service
	Webhooks  *webhook.Service
	// Rollouts shows an agent's rollout on its page (nil: none shown).
	Rollouts *rollout.Service
	// PublicURL is the base of absolute links (sign-in links, viewer pages).
	PublicURL string
	Logger    *slog.Logger
	Now       func() time.Time
}

// OperationSearch searches the operations of the tenant's tools (of the one
// named toolName when it is not ""), for q, with their schemas.
type OperationSearch func(ctx context.Context, tenant, toolName, q string) ([]Operation, error)

// Operation is an operation the search found, with its schemas.
type Operation struct {
	tool.OperationRef
	Input, Output []byte
}

// Console serves the console's pages and its sign-in. Its methods are the
// handlers internal/httpapi's route table mounts; the table says each
// one's scope and audit action, and the middleware there admits a request
// by its session (Authenticate, ReadForm) before they run.
type Console struct {
	svc  Services
	oidc *OIDC
}

// New returns the console of svc.
func New(svc Services) *Console {
	if svc.Now == nil {
		svc.Now = time.Now
	}
	if svc.Logger == nil {
		svc.Logger = slog.Default()
	}
	return &Console{svc: svc}
}

// UseOIDC lets people sign in through o (see OIDC.ForServer); it is
// called, if at all, before the console serves.
func (c *Console) UseOIDC(o *OIDC) { c.oidc = o }

// maxFormBytes bounds a console form.
const maxFormBytes = 64 << 10

// ReadForm reads the form of a console POST, bounded, and checks that it
// carries the CSRF token of the session whose secret is secret.
func ReadForm(w http.ResponseWriter, r *http.Request, secret string) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			return problem.New(problem.PayloadTooLarge, "the form is larger than %d KiB", maxFormBytes>>10)
		}
		return problem.Wrap(problem.MalformedRequest, err, "the form could not be read")
	}
	if !csrfMatches(r.PostForm.Get("csrf"), secret) {
		return problem.New(problem.CSRFTokenInvalid, "the form's CSRF token is not this session's; reload the page and send it again")
	}
	return nil
}

// FormValue reads one form field, bounded.
func FormValue(f url.Values, name string, max int) (string, error) {
	v := f.Get(name)
	if len(v) > max {
		return "", problem.Field(name, "must be at most %d characters", max)
	}
	return v, nil
}

// ReturnPath is a form's return page when it is a console path, else the
// console's home: never a link elsewhere.
func ReturnPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, Path) || strings.Contains(u.Path, "..") || strings.HasPrefix(p, "//") {
		return Path
	}
	return u.RequestURI()
}

// currentUser is the signed-in user of a console request, nil when none.
func currentUser(r *http.Request) *User {
	info := frontdoor.InfoFrom(r.Context())
	if info.Principal == nil || info.Session == "" {
		return nil
	}
	p := info.Principal
	return &User{Subject: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes, CSRF: CSRFToken(info.Session)}
}

// render writes a console page with status 200.
func render(w http.ResponseWriter, r *http.Request, name string, p Page) error {
	p.User = currentUser(r)
	return renderStatus(w, http.StatusOK, name, p)
}

// renderStatus writes page p with status; nothing is written on error.
func renderStatus(w http.ResponseWriter, status int, name string, p Page) error {
	var buf bytes.Buffer
	if err := Render(&buf, name, p); err != nil {
		return err
	}
	Headers(w.Header())
	w.WriteHeader(status)
	_, err := buf.WriteTo(w)
	return err
}

// errorPage is what the console's error page shows.
type errorPage struct {
	Detail, RequestID string
	SignIn, OIDC      bool
}

// ProblemPage returns the writer of a console route's problems as pages
// (frontdoor.Info.ProblemPage). On a route that needs a session
// (signInFirst), a GET that is not signed in goes to the sign-in page
// instead.
func ProblemPage(signInFirst bool) func(http.ResponseWriter, *http.Request, *problem.Error, int) {
	return func(w http.ResponseWriter, r *http.Request, pe *problem.Error, status int) {
		if pe.Code == problem.Unauthenticated && r.Method == http.MethodGet && signInFirst {
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
		p := Page{Title: title, User: currentUser(r), Data: errorPage{Detail: pe.Detail, RequestID: frontdoor.InfoFrom(r.Context()).RequestID,
			SignIn: pe.Code == problem.Unauthenticated,
			// Only the provider's own routes refuse a sign-in when it is set up.
			OIDC: strings.HasPrefix(r.URL.Path, oidcCookiePath)}}
		if err := renderStatus(w, status, "error", p); err != nil {
			Headers(w.Header())
			w.WriteHeader(status)
			w.Write([]byte("<!doctype html><title>" + strconv.Itoa(status) + "</title><p>" + strconv.Itoa(status) + "</p>"))
		}
	}
}

// Home opens the first page of the nav the user may see.
func (c *Console) Home(w http.ResponseWriter, r *http.Request) error {
	for _, n := range (Page{User: currentUser(r)}).NavFor() {
		http.Redirect(w, r, n.Path, http.StatusSeeOther)
		return nil
	}
	return render(w, r, "error", Page{Title: "Nothing to show",
		Data: errorPage{Detail: "Your scopes open none of the console's pages."}})
}

// ServeAssets serves the console's static files.
func ServeAssets(w http.ResponseWriter, r *http.Request) error {
	Assets().ServeHTTP(w, r)
	return nil
}
