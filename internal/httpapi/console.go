package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
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
	p, err := s.console.Authenticate(r.Context(), secret)
	if problem.Is(err, problem.Unauthenticated) {
		if err := s.limitIP(w, r); err != nil {
			return err
		}
		return err
	}
	if err != nil {
		return err
	}
	info.Principal, info.Session = &p, secret
	if err := s.limitTenant(w, r, p.Tenant); err != nil {
		return err
	}
	if r.Method == http.MethodPost {
		if err := console.ReadForm(w, r, secret); err != nil {
			return err
		}
	}
	if rt.scope != "" && !p.Has(rt.scope) {
		return &problem.Error{Code: problem.InsufficientScope, Scope: rt.scope,
			Detail: "this page needs the scope " + rt.scope}
	}
	return nil
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
		h.ServeHTTP(&redirectWriter{ResponseWriter: w, to: console.ReturnPath(r.PostForm.Get("return")), info: frontdoor.InfoFrom(r.Context())}, r)
	})
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

// Forms of the console's actions: each returns the JSON body of the API
// route the action is.

func formNone(url.Values) (any, error) { return nil, nil }

func formDecide(f url.Values) (any, error) {
	comment, err := console.FormValue(f, "comment", 4000)
	if err != nil {
		return nil, err
	}
	req := decideRequest{Decision: f.Get("decision"), Comment: comment}
	if v := strings.TrimSpace(f.Get("budget")); v != "" && req.Decision == agent.DecisionApprove {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, problem.Field("budget", "must be a whole number of tokens or tool calls, from 1 to 100000000; leave it empty to grant the same budget again")
		}
		req.Budget = &n
	}
	return req, nil
}

func formReplay(f url.Values) (any, error) {
	dry := f.Get("dry_run") == "true"
	req := replayRequest{TargetAgentVersion: f.Get("version"), DryRun: &dry}
	if dry {
		// A real replay requests every completion: llm is a dry run's.
		req.LLM = f.Get("llm")
	}
	return req, nil
}

// formDefault is the promote form as PUT /v1/agents/{id}/default's body.
func formDefault(f url.Values) (any, error) {
	return map[string]string{"version": f.Get("version")}, nil
}

// consoleScopes are the scopes the console's routes need, sorted: what a
// sign-in through an identity provider asks for.
func consoleScopes(routes []route) []string {
	var out []string
	for _, rt := range routes {
		if rt.console && rt.scope != "" && !slices.Contains(out, rt.scope) {
			out = append(out, rt.scope)
		}
	}
	slices.Sort(out)
	return out
}

// newConsole is the console of the server's services.
func (s *Server) newConsole() *console.Console {
	d := s.deps
	return console.New(console.Services{
		Sessions: d.Store, Revocations: d.Revocations, Verifier: d.Verifier,
		Workflows: d.Workflows, Agents: d.Agents, Replays: d.ReplayStore, Viewer: d.Viewer,
		Tools: d.ToolStore, SearchOperations: s.consoleSearch, Models: d.Models, Audit: d.Store,
		Schedules: d.Schedules, Webhooks: d.Webhooks, Rollouts: d.Rollouts,
		PublicURL: s.cfg.PublicURL, Logger: d.Logger, Now: d.Now,
	})
}

// consoleSearch is the console's operation search: GET /v1/operations's
// first page, with schemas.
func (s *Server) consoleSearch(ctx context.Context, tenant, toolName, q string) ([]console.Operation, error) {
	oq := opQuery{q: q, limit: defaultOpLimit, full: true}
	if errs := oq.check(); len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	pg, err := s.searchOperations(ctx, tenant, toolName, oq)
	if err != nil {
		return nil, err
	}
	out := make([]console.Operation, len(pg.Operations))
	for i, op := range pg.Operations {
		out[i] = console.Operation{OperationRef: op.OperationRef, Input: op.Input, Output: op.Output}
	}
	return out, nil
}
