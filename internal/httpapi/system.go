package httpapi

import (
	"context"
	_ "embed"
	"html/template"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/web"
)

func handleHealth(version string) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return frontdoor.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": version})
	}
}

// handleReady reports whether this replica should take traffic: the store
// answers and the server is not draining.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	select {
	case <-s.draining:
		return problem.New(problem.Unavailable, "the server is shutting down")
	default:
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.deps.Store.Ping(ctx); err != nil {
		return problem.Wrap(problem.Unavailable, err, "the store does not answer")
	}
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func handleMetrics(m *telemetry.Metrics) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if m == nil {
			return problem.New(problem.NotFound, "metrics are disabled")
		}
		m.Handler().ServeHTTP(w, r)
		return nil
	}
}

var problemPage = template.Must(template.New("problem").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · agentplane</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem;color:#1d1d1f}code{background:#f2f2f5;padding:.1em .3em;border-radius:3px}</style>
</head><body>
<h1>{{.Title}}</h1>
<p>HTTP status <code>{{.Status}}</code> · code <code>{{.Code}}</code></p>
<p>{{.About}}</p>
<p>Problem documents of this kind carry <code>"type": "https://agentplane.dev/problems/{{.Code}}"</code>, the bare <code>code</code>, and the <code>request_id</code> and <code>trace_id</code> that identify the request in the server's logs and audit records.</p>
</body></html>
`))

func handleProblemPage(w http.ResponseWriter, r *http.Request) error {
	k, ok := problemKind(problem.Code(r.PathValue("code")))
	if !ok {
		return problem.New(problem.NotFound, "no problem type %q", r.PathValue("code"))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	return problemPage.Execute(w, k)
}

//go:embed openapi.json
var openAPIDoc []byte

// viewerAssets serves the viewer pages' stylesheet.
var viewerAssets = web.Assets()

func handleAssets(w http.ResponseWriter, r *http.Request) error {
	if !web.HasAsset(r.PathValue("file")) {
		return problem.New(problem.NotFound, "no such viewer file")
	}
	viewerAssets.ServeHTTP(w, r)
	return nil
}

func handleOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}
