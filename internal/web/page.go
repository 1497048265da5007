// Package web is the replay viewer: templates and assets, embedded. Its
// pages are reached by signed links that carry no bearer token (Signer);
// they use no script and load nothing but their stylesheet, which Assets
// serves from the server itself, so they work under PageHeaders' CSP.
package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/workflow"
)

//go:embed templates/*.html static/*
var files embed.FS

var pages = template.Must(template.New("").ParseFS(files, "templates/*.html"))

// AssetsPath is where Assets is mounted: GET AssetsPath serves the static files.
const AssetsPath = "/viewer/assets/"

// ContentSecurityPolicy is the CSP of every viewer page.
const ContentSecurityPolicy = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// static is the viewer's stylesheet, served at AssetsPath.
var static = NewStatic(files, "static", AssetsPath)

// stylesheet is the versioned link of the viewer's stylesheet.
var stylesheet = static.Link("viewer.css")

// PageHeaders sets the headers a viewer page is served with: never cached,
// never sent as a referrer, no script, nothing loaded from elsewhere.
func PageHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
}

// HasAsset reports whether name is one of the viewer's static files.
func HasAsset(name string) bool { return static.Has(name) }

// Assets serves the viewer's static files; mount it at "GET "+AssetsPath.
func Assets() http.Handler { return static }

// VersionDiffLink is the console's side-by-side diff of two versions of an
// agent, each name@version; "" when they are one version or of two agents.
func VersionDiffLink(from, to string) string {
	name, fromV, ok1 := strings.Cut(from, "@")
	toName, toV, ok2 := strings.Cut(to, "@")
	if !ok1 || !ok2 || name != toName || fromV == toV {
		return ""
	}
	return "/console/agents/" + url.PathEscape(name) + "/diff?" + url.Values{"from": {fromV}, "to": {toV}}.Encode()
}

// VersionReader reads an agent's version.
type VersionReader interface {
	AgentVersion(ctx context.Context, tenant, name, version string) (*agent.Version, error)
}

// TargetURL is the URL a replay's or a batch's target (name@version) runs
// at when it is an external version, for the pages to name; "" for a
// defined version, or one that cannot be read.
func TargetURL(ctx context.Context, versions VersionReader, tenant, target string) string {
	name, version, ok := strings.Cut(target, "@")
	if !ok {
		return ""
	}
	v, err := versions.AgentVersion(ctx, tenant, name, version)
	if err != nil || v.External == nil {
		return ""
	}
	return v.External.URL
}

// ReplayPage is what a replay's page shows.
type ReplayPage struct {
	Replay *replay.Replay
	// Agent and Goal are the original workflow's.
	Agent string
	Goal  string
	// Tools says whose args, request and response bodies are shown; the
	// others' are left out of the page.
	Tools Tools
	// TargetURL is the URL the replay invoked, when its target is an
	// external agent version.
	TargetURL string
}

// RenderReplay writes the HTML page of a replay; nothing is written on error.
func RenderReplay(w io.Writer, p ReplayPage) error {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "replay.html", newReplayView(p)); err != nil {
		return err
	}
	_, err := buf.WriteTo(w)
	return err
}

// RenderRefusedLink writes the HTML page of a signed link that opens no
// page: expired, or badly signed, for a person who followed it in a
// browser; it says how to get a fresh link to the page of kind (KindReplay
// or KindBatch) id names.
func RenderRefusedLink(w io.Writer, kind, id string, expired bool) error {
	v := struct {
		Expired                   bool
		What, Command, Stylesheet string
	}{Expired: expired, Stylesheet: stylesheet,
		What: "replay viewer", Command: "agentplane replays get " + id}
	if kind == KindBatch {
		v.What, v.Command = "batch report", "agentplane batches get "+id
	}
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "refused.html", v); err != nil {
		return err
	}
	_, err := buf.WriteTo(w)
	return err
}

// replayView is the template's data: everything formatted, hidden bodies
// already left out, so the template cannot show them by mistake.
type replayView struct {
	*replay.Replay
	Agent, Goal string
	// TargetURL is the external agent the replay invoked ("" for a
	// defined version).
	TargetURL      string
	Stylesheet     string
	Created        string
	CreatedISO     string
	OutcomeChanged bool
	// DiffLink opens the console's diff of the two versions ("" when the
	// replay ran the version the original did).
	DiffLink     string
	Legend       []legendEntry
	Rows         []rowView
	Conversation *conversationView
}

type legendEntry struct{ Kind, Label, About string }

type rowView struct {
	Kind, Label, About string
	Fields             []string
	Original, Replay   *stepView
}

type stepView struct {
	Side                       string
	Step                       int
	Action, Kind, Status       string
	Tool, Call, Score, Queue   string
	Outcome, Error, HTTPStatus string
	// ErrorCode is the stable cause of a failed step (timeout,
	// circuit_open, llm_error, …; docs/workflows.md).
	ErrorCode             string
	Args, Request, Result string
	// Reason and the decision belong to approve steps.
	Reason, DecidedBy, Comment     string
	DecidedAt, DecidedAtISO        string
	TimedOut                       bool
	Changed                        map[string]bool
	HasCall, HasBodies, BodyHidden bool
	// Failed marks a step that did not do what it set out to (denied, an
	// error, …): its own colour shows whatever the row's kind of change.
	Failed bool
	// Injected says which fault answered the step's call instead of the
	// tool, and with what ("" when none did).
	Injected string
}

// kinds are the legend, in its order: label and meaning of each row kind.
var kinds = []legendEntry{
	{replay.Same, "= same", "the step is the same in both runs"},
	{replay.Changed, "≠ changed", "both runs have the step, but its call, status, score, queue or result differ"},
	{replay.Added, "+ added", "only the replay has the step"},
	{replay.Removed, "− removed", "only the original run has the step"},
}

func newReplayView(p ReplayPage) replayView {
	r := p.Replay
	v := replayView{
		Replay:         r,
		TargetURL:      p.TargetURL,
		Agent:          p.Agent,
		Goal:           p.Goal,
		Stylesheet:     stylesheet,
		OutcomeChanged: r.OriginalOutcome != r.ReplayOutcome,
		DiffLink:       VersionDiffLink(r.OriginalVersion, r.Target),
		Legend:         kinds,
	}
	v.Created, v.CreatedISO = formatTime(r.CreatedAt)
	v.Conversation = newConversationView(r, p.Tools)
	for _, e := range r.Steps {
		row := rowView{Kind: e.Kind, Label: e.Kind, Fields: e.Fields}
		if i := slices.IndexFunc(kinds, func(k legendEntry) bool { return k.Kind == e.Kind }); i >= 0 {
			row.Label, row.About = kinds[i].Label, kinds[i].About
		}
		row.Original = newStepView("Original", e.Original, e.Fields, p.Tools)
		row.Replay = newStepView("Replay", e.Replay, e.Fields, p.Tools)
		v.Rows = append(v.Rows, row)
	}
	return v
}

// failedStatus are the step statuses shown as failures.
var failedStatus = map[string]bool{"denied": true, "error": true, "failed": true, "limit_exceeded": true,
	"unrecorded": true, "cancelled": true}

func newStepView(side string, s *workflow.Step, changed []string, tools Tools) *stepView {
	if s == nil {
		return nil
	}
	v := &stepView{
		Side: side, Step: s.Step, Action: s.Action, Kind: s.Kind, Status: s.Status,
		Tool: s.Tool, Queue: s.Queue, Outcome: s.Outcome, Error: s.Error, ErrorCode: s.ErrorCode,
		HasCall: s.Operation != "",
		Changed: make(map[string]bool, len(changed)),
		Failed:  failedStatus[s.Status],
	}
	for _, f := range changed {
		v.Changed[f] = true
	}
	switch {
	case s.Tool != "" && s.Operation != "":
		v.Call = s.Tool + "." + s.Operation
	case s.Operation != "":
		v.Call = s.Operation
	}
	if s.Score != nil {
		v.Score = strconv.FormatFloat(*s.Score, 'f', -1, 64)
	}
	if s.HTTPStatus != 0 {
		v.HTTPStatus = strconv.Itoa(s.HTTPStatus)
	}
	if in := s.Injected; in != nil {
		what := in.Error
		if what == "" {
			what = "status " + strconv.Itoa(in.Status)
		}
		v.Injected = "faults[" + strconv.Itoa(in.Fault) + "]: " + what + "; the call was not sent"
	}
	v.Reason = s.Reason
	if s.Kind == agent.KindApprove && len(s.Result) > 0 {
		var d struct {
			DecidedBy string    `json:"decided_by"`
			DecidedAt time.Time `json:"decided_at"`
			Comment   string    `json:"comment"`
			TimedOut  bool      `json:"timed_out"`
		}
		if json.Unmarshal(s.Result, &d) == nil && d.DecidedBy != "" {
			v.DecidedBy, v.Comment, v.TimedOut = d.DecidedBy, d.Comment, d.TimedOut
			v.DecidedAt, v.DecidedAtISO = formatTime(d.DecidedAt)
		}
	}
	v.HasBodies = len(s.Args) > 0 || len(s.Request) > 0 || len(s.Result) > 0
	if workflow.BodiesHidden(tools, *s) {
		v.BodyHidden = true
		return v
	}
	v.Args, v.Request, v.Result = pretty(s.Args), pretty(s.Request), pretty(s.Result)
	return v
}

// pretty indents a JSON body, or returns it as it is when it is not JSON.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
