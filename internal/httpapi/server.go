// Package httpapi is agentplane's HTTP adapter: the route table with each
// route's scope, the middleware every request passes (tracing, request ids,
// logs, metrics, audit, authentication, rate limits, idempotency), and the
// handlers, which return errors that one adapter turns into RFC 9457 problems.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/a2a"
	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/gateway"
	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/mcp"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/impact"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Store is what the HTTP layer needs from storage.
type Store interface {
	audit.Store
	// AppendAuditLater appends records with the store's next commit and
	// returns at once; done gets the outcome.
	AppendAuditLater(done func(error), recs ...*audit.Record)
	auth.Store
	// RevokedClients returns the ids of every revoked client.
	RevokedClients(ctx context.Context) ([]string, error)
	idempotency.Store
	session.Store
	Ping(ctx context.Context) error
}

// Config holds the HTTP layer's limits and policies.
type Config struct {
	// MaxBodyBytes limits request bodies (default 1 MiB).
	MaxBodyBytes int64
	// IdempotencyTTL is how long keys are honoured (default 24 h);
	// InvokeIdempotencyTTL for invoke (default 7 days).
	IdempotencyTTL       time.Duration
	InvokeIdempotencyTTL time.Duration
	// IdempotencyLock is how long a running request's key blocks repeats
	// without word from it (default 30 s): the request renews it every
	// third of that while it runs, so only a request whose process died
	// lets it lapse.
	IdempotencyLock time.Duration
	// RateLimits gives each tenant's limit and the per-IP limit.
	RateLimits ratelimit.Policy
	// Version is reported by /healthz.
	Version string
	// PublicURL is the base of absolute links (viewer pages), never taken
	// from a request's Host.
	PublicURL string
	// AuthorizationServer is the issuer of the server's tokens, named in
	// the MCP endpoint's protected resource metadata.
	AuthorizationServer string
	// MaxStreamsPerTenant caps each tenant's open event streams on this
	// server (default DefaultMaxStreamsPerTenant).
	MaxStreamsPerTenant int
}

// Deps are the server's collaborators; cmd/agentplane wires them.
type Deps struct {
	Logger   *slog.Logger
	Store    Store
	Verifier auth.Verifier
	// Revocations is the client revocation list console sessions and
	// sign-in links are checked against (nil: the Verifier's when it is
	// an *auth.RevokingVerifier, else one read from Store with the
	// default ttl), so they end with their client's tokens.
	Revocations *auth.Revocations
	// Issuer is the embedded issuer, nil when an external issuer is used.
	Issuer  *auth.Issuer
	Limiter ratelimit.Limiter
	Metrics *telemetry.Metrics
	// Tools registers, updates and deletes tools; ToolStore reads them.
	Tools     *tool.Service
	ToolStore tool.Store
	// Impact answers what a tool revision breaks (nil: its route answers 503).
	Impact *impact.Service
	// Models registers, updates, deletes and reads the model registry.
	Models *model.Service
	// Agents keeps agent versions; Runner runs workflows; Workflows reads them.
	Agents    agent.VersionStore
	Runner    *workflow.Runner
	Workflows workflow.Store
	// ExternalChecks check an external version's url and secret reference
	// when it is deployed.
	ExternalChecks agent.ExternalChecks
	// Replays makes replays; ReplayStore reads them; Viewer signs and
	// checks the links of their pages.
	Replays     *replay.Service
	ReplayStore replay.Store
	// Batches runs replay batches in the background; BatchStore keeps them.
	Batches    *replay.BatchRunner
	BatchStore replay.BatchStore
	// Datasets keeps the datasets batches replay.
	Datasets replay.DatasetStore
	Viewer   *web.Signer
	Now      func() time.Time
	// Schedules manages schedules (nil: the schedule routes answer 503).
	Schedules *schedule.Service
	// Webhooks manages webhooks (nil: the webhook routes answer 503).
	Webhooks *webhook.Service
	// Rollouts manages agents' rollouts (nil: the rollout routes answer 503).
	Rollouts *rollout.Service
	// Retention deletes workflows on request (nil: DELETE
	// /v1/workflows/{id} answers 503).
	Retention *retention.Service
	// ConsoleOIDC signs people in to the console through an OpenID
	// Connect provider (nil: only one-time links sign in).
	ConsoleOIDC *console.OIDC
}

// Server is agentplane's HTTP API.
type Server struct {
	cfg     Config
	deps    Deps
	mux     *http.ServeMux
	routes  []route
	handler http.Handler
	// draining is closed when shutdown begins; /readyz then fails.
	draining chan struct{}
	// indexes are the operation search indexes of recently searched tools.
	indexes *tool.IndexCache
	// mcp is the tenant's MCP server.
	mcp *mcp.Server
	// streams caps each tenant's open event streams.
	streams *streamLimit
	// invoker starts workflows or attaches to the ones their keys made.
	invoker *workflow.Invoker
	// console serves the web console's pages and sign-in.
	console *console.Console
	// a2a serves each agent's A2A bindings and card.
	a2a *a2a.Server
	// gateway serves the run gateway of external agents.
	gateway *gateway.Gateway
}

// noRuns finds no run: the gateway of a server without a runner.
type noRuns struct{}

func (noRuns) Gateway(string) (*workflow.GatewayRun, bool) { return nil, false }

// NewServer builds the handler of the whole API.
func NewServer(cfg Config, deps Deps) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.InvokeIdempotencyTTL <= 0 {
		cfg.InvokeIdempotencyTTL = 7 * 24 * time.Hour
	}
	if cfg.IdempotencyLock <= 0 {
		cfg.IdempotencyLock = defaultRunningLock
	}
	if cfg.MaxStreamsPerTenant <= 0 {
		cfg.MaxStreamsPerTenant = DefaultMaxStreamsPerTenant
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Revocations == nil {
		if rv, ok := deps.Verifier.(*auth.RevokingVerifier); ok {
			deps.Revocations = rv.Revocations
		} else {
			deps.Revocations = auth.NewRevocations(deps.Store, 0, deps.Now)
		}
	}
	s := &Server{cfg: cfg, deps: deps, mux: http.NewServeMux(), draining: make(chan struct{}), indexes: tool.NewIndexCache(256),
		streams: newStreamLimit(cfg.MaxStreamsPerTenant),
		invoker: &workflow.Invoker{Runner: deps.Runner, Workflows: deps.Workflows, Now: deps.Now}}
	s.mcp = mcp.New(mcp.Config{Version: cfg.Version, PublicURL: cfg.PublicURL, AuthorizationServer: cfg.AuthorizationServer,
		KeyTTL: cfg.InvokeIdempotencyTTL}, mcp.Services{
		Agents: deps.Agents, Invoker: s.invoker, Runner: deps.Runner, Workflows: deps.Workflows, Logger: deps.Logger,
		Operations: s.finder(),
		View: func(r *http.Request, wf *workflow.Workflow, steps []workflow.Step) (any, error) {
			return s.workflowView(r, wf, steps, false, false)
		},
	})
	s.console = s.newConsole()
	s.a2a = s.newA2A()
	var runs gateway.Runs = noRuns{}
	if deps.Runner != nil {
		runs = deps.Runner
	}
	s.gateway = gateway.New(runs, cfg.Version, deps.Logger, s.limitIP)
	s.routes = withSame(s.routeTable())
	if deps.ConsoleOIDC != nil {
		s.console.UseOIDC(deps.ConsoleOIDC.ForServer(cfg.PublicURL, consoleScopes(s.routes)))
	}
	for i := range s.routes {
		rt := &s.routes[i]
		s.mux.Handle(rt.pattern, s.serveRoute(rt))
	}
	s.handler = telemetry.Middleware(http.HandlerFunc(s.observe), telemetry.MuxRoute(s.mux))
	return s
}

// Drain makes /readyz fail so load balancers stop sending new requests.
func (s *Server) Drain() {
	select {
	case <-s.draining:
	default:
		close(s.draining)
	}
}

// ServeHTTP runs the middleware chain around the router.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// dispatch routes a request; unknown paths and methods get problem documents.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	// No id or name holds a NUL or invalid UTF-8, and PostgreSQL refuses
	// both in a lookup, so such a path matches no route.
	text := audit.Text(r.URL.Path) == r.URL.Path
	if pattern != "" && text {
		s.mux.ServeHTTP(w, r) // sets the path values
		return
	}
	// Unmatched requests are audited too, so they are limited like the
	// others: by the caller's tenant when its token is valid, else by IP.
	s.identify(r)
	if strings.HasPrefix(r.URL.Path, "/gateway/") {
		// An agent's SDK reads the gateway's refusals in its provider's
		// shape, an endpoint the gateway does not serve among them.
		frontdoor.InfoFrom(r.Context()).ProblemPage = gateway.Problem
	}
	limit := s.limitIP(w, r)
	if p := frontdoor.InfoFrom(r.Context()).Principal; p != nil {
		limit = s.limitTenant(w, r, p.Tenant)
	}
	if limit != nil {
		frontdoor.WriteProblem(w, r, limit)
		return
	}
	if !text {
		frontdoor.WriteProblem(w, r, problem.New(problem.NotFound, "no route for %s %s", r.Method, r.URL.Path))
		return
	}
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	switch probe.status {
	case http.StatusMethodNotAllowed:
		frontdoor.WriteProblem(w, r, &problem.Error{
			Code: problem.MethodNotAllowed, Detail: r.Method + " is not allowed on " + r.URL.Path,
			Allow: probe.header.Values("Allow"),
		})
	case http.StatusMovedPermanently, http.StatusPermanentRedirect, http.StatusTemporaryRedirect:
		h.ServeHTTP(w, r) // path cleaning redirects
	default:
		pe := problem.New(problem.NotFound, "no route for %s %s", r.Method, r.URL.Path)
		if strings.HasPrefix(r.URL.Path, "/gateway/") {
			pe.Detail += ": the run gateway serves " + gateway.Endpoints
		}
		frontdoor.WriteProblem(w, r, pe)
	}
}

// identify records the caller of a request that matched no route, when it
// carries a valid token, so its audit record lands in the caller's chain.
func (s *Server) identify(r *http.Request) {
	raw, ok := auth.BearerToken(r)
	if !ok {
		return
	}
	if p, err := s.deps.Verifier.Verify(r.Context(), raw); err == nil {
		frontdoor.InfoFrom(r.Context()).Principal = &p
	}
}

// probeWriter captures what the mux would answer for an unmatched request.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header         { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) { return len(b), nil }
func (p *probeWriter) WriteHeader(code int)        { p.status = code }
