// Package console is the web console, a front door of its own: its pages
// and sign-in (Console, built by New from the services they read), its
// templates and static files, embedded in the binary, the layout every
// page shares (the nav, the sign-out form, the CSRF token of each form),
// and the session cookie; the sign-in records the stores keep (one-time
// links, pending OpenID Connect logins, sessions) are
// internal/auth/session's. Its pages load nothing but the console's own
// stylesheet and scripts, so they work under ContentSecurityPolicy.
//
// internal/httpapi's route table mounts the handlers, with each one's
// scope and audit action; its middleware admits a console request by its
// session cookie (Authenticate) and the CSRF token of a POST (ReadForm),
// and makes each console action the API route it names, so an action runs
// the API handler itself.
package console

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/web"
)

//go:embed templates/*.html static/*
var files embed.FS

// Path is where the console is mounted; AssetsPath serves its static files.
const (
	Path       = "/console/"
	AssetsPath = "/console/assets/"
)

// ContentSecurityPolicy is the CSP of every console page: scripts, styles,
// fetches and event streams from this server only, never inline.
const ContentSecurityPolicy = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"

// Headers sets the headers a console page is served with: never cached,
// never sent as a referrer, nothing loaded from elsewhere.
func Headers(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
}

// static is the console's stylesheet and script, served at AssetsPath.
var static = web.NewStatic(files, "static", AssetsPath)

// Asset returns the versioned link of a static file.
func Asset(name string) string { return static.Link(name) }

// Assets serves the static files; mount it at "GET "+AssetsPath+"{file}".
func Assets() http.Handler { return static }

// NavItem is one entry of the nav: shown to a user who holds Scope.
type NavItem struct {
	Key, Label, Path, Scope string
}

// Nav lists the console's pages in the order the nav shows them. A page
// is added here, with its handler in this package and its route in
// internal/httpapi's route table.
var Nav = []NavItem{
	{Key: "workflows", Label: "Workflows", Path: "/console/workflows", Scope: "workflows:read"},
	{Key: "approvals", Label: "Approvals", Path: "/console/approvals", Scope: "workflows:approve"},
	{Key: "agents", Label: "Agents", Path: "/console/agents", Scope: "agents:read"},
	{Key: "tools", Label: "Tools", Path: "/console/tools", Scope: "tools:read"},
	{Key: "usage", Label: "Models and usage", Path: "/console/usage", Scope: "usage:read"},
	{Key: "schedules", Label: "Schedules", Path: "/console/schedules", Scope: "schedules:read"},
	{Key: "webhooks", Label: "Webhooks", Path: "/console/webhooks", Scope: "webhooks:read"},
	{Key: "audit", Label: "Audit", Path: "/console/audit", Scope: "audit:read"},
}

// User is the signed-in person a page is rendered for.
type User struct {
	Subject, ClientID, Tenant string
	Scopes                    []string
	// CSRF is the token every form of the session carries.
	CSRF string
}

// Has reports whether the user holds scope: a page shows an action only
// to a user who may take it.
func (u *User) Has(scope string) bool { return u != nil && slices.Contains(u.Scopes, scope) }

// Name is how the page names the user.
func (u *User) Name() string {
	if u.Subject != "" {
		return u.Subject
	}
	return u.ClientID
}

// Page is what the layout needs of every page; Data is the page's own.
type Page struct {
	Title string
	// Nav is the Key of the page's nav entry.
	Nav  string
	User *User
	// Live asks the page's script to keep the page current (its URL is
	// fetched again, or an event stream followed, see console.js).
	Live string
	Data any
}

// NavFor returns the nav entries the page's user may open.
func (p Page) NavFor() []NavItem {
	var out []NavItem
	for _, n := range Nav {
		if p.User.Has(n.Scope) {
			out = append(out, n)
		}
	}
	return out
}

var funcs = template.FuncMap{
	"asset": Asset,
	// newKey is a fresh Idempotency-Key for a form: a repeated submission
	// of one rendered form is one action.
	"newKey": func() string { return RandomToken()[:32] },
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ms":       FormatMS,
	"pretty":   Pretty,
	"headline": Headline,
	"idParts":  SplitID,
	"percent":  func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + " %" },
}

// IDParts is an id as a list shows it: Head and Tail on screen, Middle
// clipped to an ellipsis but still in the text, so the link's name and
// what a selection copies are the whole id.
type IDParts struct{ Head, Middle, Tail string }

// shownIDTail is how many of an id's last characters a list shows: a
// ULID's last characters are its random part, which tells apart ids made
// in the same second (their first characters are the time).
const shownIDTail = 8

// SplitID splits id (prefix_ULID) for a list: the prefix, the ULID's
// first characters, its last shownIDTail.
func SplitID(id string) IDParts {
	head, rest, ok := strings.Cut(id, "_")
	if !ok {
		head, rest = "", id
	} else {
		head += "_"
	}
	r := []rune(rest)
	if len(r) <= shownIDTail+1 {
		return IDParts{Head: head, Tail: rest}
	}
	cut := len(r) - shownIDTail
	return IDParts{Head: head, Middle: string(r[:cut]), Tail: string(r[cut:])}
}

// Headline is text shortened for a heading: its first line, at most 120
// characters.
func Headline(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 120 {
		return string(r[:119]) + "…"
	}
	return s
}

// Pretty is JSON indented for reading (as it came when it is not JSON).
func Pretty(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// FormatMS writes a duration in milliseconds as people read it.
func FormatMS(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// pages holds each page's template set: the layout and partials with the
// page's own file, so every page defines "content" for the layout.
var pages = func() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(files, "templates/_*.html"))
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if strings.HasPrefix(name, "_") {
			continue
		}
		out[name] = template.Must(template.Must(base.Clone()).ParseFS(files, n))
	}
	return out
}()

// Render writes page p with the template templates/<name>.html inside the
// layout; nothing is written on error.
func Render(w io.Writer, name string, p Page) error {
	t, ok := pages[name]
	if !ok {
		return fmt.Errorf("no console template %q", name)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return fmt.Errorf("render console page %s: %w", name, err)
	}
	_, err := buf.WriteTo(w)
	return err
}

// RandomToken is a new 256-bit secret, hex.
func RandomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// CSRFToken is the CSRF token of the session whose cookie holds id: keyed
// by the session's secret, so it needs no storage and differs per session.
func CSRFToken(id string) string {
	sum := sha256.Sum256([]byte("agentplane console csrf\x00" + id))
	return hex.EncodeToString(sum[:16])
}
