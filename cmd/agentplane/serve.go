package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentplane/agentplane/internal/catalogcache"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/a2a"
	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/tool/impact"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// serveConfig is everything `agentplane serve` is told.
type serveConfig struct {
	store  storeFlags
	issuer issuerFlags
	tools  toolFlags
	run    runFlags
	keep   retentionFlags
	sinks  auditSinkFlags

	oidcIssuer  string
	audience    string
	tenantClaim string
	// consoleClientID and consoleSecretRef are the console's client at
	// the --oidc-issuer, for signing in through it.
	consoleClientID  string
	consoleSecretRef string

	redisURL       string
	rateLimit      int
	rateLimitBurst int
	rateLimitIP    int
	tenantLimits   []string

	maxBodyBytes      int64
	maxStreams        int
	idempotencyTTL    time.Duration
	invokeIdempotency time.Duration

	logLevel        string
	shutdownTimeout time.Duration
	readTimeout     time.Duration
	debugAddr       string
	gcPercent       int
	maxProcs        int
	demo            bool
	viewerTTL       time.Duration
	batchWorkers    int
	revocationTTL   time.Duration
}

// checkConsoleClient refuses a console client that is half given or has
// no --oidc-issuer to sign in at.
func (c serveConfig) checkConsoleClient() error {
	switch {
	case c.consoleClientID == "" && c.consoleSecretRef == "":
		return nil
	case c.consoleClientID == "":
		return fmt.Errorf("--console-client-secret-ref needs --console-client-id: give the console's client id at the --oidc-issuer")
	case c.consoleSecretRef == "":
		return fmt.Errorf("--console-client-id needs --console-client-secret-ref: give the reference (env://, file://, vault://) of the client's secret")
	case c.oidcIssuer == "":
		return fmt.Errorf("--console-client-id and --console-client-secret-ref sign in at an external issuer: give --oidc-issuer too")
	}
	return nil
}

// consoleOIDC is the console's sign-in through the --oidc-issuer, nil
// without a console client.
func (c serveConfig) consoleOIDC(ctx context.Context, parts *toolParts) (*console.OIDC, error) {
	if c.consoleClientID == "" {
		return nil, nil
	}
	_, secret, err := operatorSecret("--console-client-secret-ref", c.consoleSecretRef, parts.client.HTTPClient())
	if err != nil {
		return nil, err
	}
	o, err := console.NewOIDC(ctx, console.OIDCConfig{Issuer: c.oidcIssuer, ClientID: c.consoleClientID, ClientSecret: secret})
	if err != nil {
		return nil, fmt.Errorf("--oidc-issuer for the console: %w", err)
	}
	return o, nil
}

// replaySweep is how often a replica looks for real replays left running
// after their workflows ended (their replica stopped in between).
const replaySweep = time.Minute

func newServeCommand(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var c serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the agentplane HTTP server",
		Long: `Runs the HTTP API. With no flags it keeps everything in embedded SQLite under
./data and issues its own tokens, so it needs no other setup. For several
replicas, point every one at the same PostgreSQL (--database-url) and Redis
(--redis-url). SIGINT or SIGTERM drains in-flight requests, then stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The demo's ready block is the point: its request logs would
			// bury it, so it logs warnings only unless told otherwise.
			if c.demo && !cmd.Flags().Changed("log-level") && getenv(envName("log-level")) == "" {
				c.logLevel = "warn"
			}
			return serve(cmd.Context(), c, getenv, stdout, stderr)
		},
	}
	f := cmd.Flags()
	c.store.register(f)
	c.tools.register(f)
	c.run.register(f)
	c.keep.register(f)
	c.sinks.register(f)
	f.StringVar(&c.issuer.addr, "addr", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&c.issuer.publicURL, "public-url", "", "public base URL of the server, for links and the token issuer (default http://<addr>)")
	f.StringVar(&c.oidcIssuer, "oidc-issuer", "", "external OpenID Connect issuer URL; turns the embedded issuer off")
	f.StringVar(&c.consoleClientID, "console-client-id", "", "the console's OAuth client id at the --oidc-issuer: people sign in to the console there (authorization code with PKCE; register <public-url>/console/oidc/callback as its redirect URI)")
	f.StringVar(&c.consoleSecretRef, "console-client-secret-ref", "", "secret reference (env://, file://, vault://) of the console's OAuth client secret at the --oidc-issuer")
	f.StringVar(&c.audience, "audience", "agentplane", "audience every access token must name")
	f.StringVar(&c.tenantClaim, "tenant-claim", "tenant", "JWT claim holding the caller's tenant")
	f.StringVar(&c.redisURL, "redis-url", "", "Redis URL (redis://…) to share rate limits across replicas")
	f.IntVar(&c.rateLimit, "rate-limit", 600, "requests a minute per tenant")
	f.IntVar(&c.rateLimitBurst, "rate-limit-burst", 0, "burst per tenant (default: the rate)")
	f.IntVar(&c.rateLimitIP, "rate-limit-ip", 120, "unauthenticated requests a minute per client IP")
	f.StringSliceVar(&c.tenantLimits, "rate-limit-tenant", nil, "per-tenant override tenant=rate[:burst], repeatable")
	f.Int64Var(&c.maxBodyBytes, "max-body-bytes", 1<<20, "largest request body accepted")
	f.IntVar(&c.maxStreams, "max-streams-per-tenant", httpapi.DefaultMaxStreamsPerTenant, "event streams (invoke with stream, GET /v1/workflows/{id}/events) one tenant may hold open on this server; more are refused with 429")
	f.DurationVar(&c.idempotencyTTL, "idempotency-ttl", 24*time.Hour, "how long idempotency keys are honoured")
	f.DurationVar(&c.invokeIdempotency, "invoke-idempotency-ttl", 7*24*time.Hour, "how long invoke's idempotency keys are honoured")
	f.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to drain in-flight requests on shutdown")
	f.DurationVar(&c.readTimeout, "read-timeout", time.Minute, "how long a client may take to send a request, headers and body (a response, such as an event stream, is not bounded)")
	f.StringVar(&c.debugAddr, "debug-addr", "", "address of a separate listener serving Go's /debug/pprof profiles (off when empty; keep it private)")
	f.IntVar(&c.batchWorkers, "replay-batch-workers", 0, "workflows a replay batch replays at once (default: the number of CPUs)")
	f.DurationVar(&c.revocationTTL, "revocation-ttl", auth.DefaultRevocationTTL, "how long a replica trusts the client revocation list it read (1s to 30s): a revoked client's tokens stop working within it")
	f.DurationVar(&c.viewerTTL, "viewer-ttl", web.DefaultTTL, "how long a signed viewer link (viewer_url) stays valid, at most 168h")
	f.BoolVar(&c.demo, "demo", false, "start three example APIs on loopback, register them as tools, deploy a fraud-triage agent in two versions, run a few invocations and print how to try them (allows private networks; logs warnings only unless --log-level is set)")
	f.IntVar(&c.maxProcs, "max-procs", 0, "CPUs the Go runtime runs the server's goroutines on at once, when GOMAXPROCS is unset (0: every CPU it may use); fewer leave CPUs to a database on the same machine and spare the runtime's wake-ups")
	f.IntVar(&c.gcPercent, "gc-percent", 400, "the Go garbage collector's target heap growth in percent when GOGC is unset (Go's own default is 100; higher spends memory to save CPU; -1 turns the collector off)")
	bindEnv(cmd, getenv)
	return cmd
}

func serve(ctx context.Context, c serveConfig, getenv func(string) string, stdout, stderr io.Writer) error {
	if c.demo {
		if c.oidcIssuer != "" {
			return fmt.Errorf("--demo mints its own token: it needs the embedded issuer, not --oidc-issuer")
		}
		c.tools.allowPrivate = true // the demo's APIs listen on loopback
	}
	if c.gcPercent < -1 || c.gcPercent == 0 {
		return fmt.Errorf("--gc-percent must be -1 or a positive percentage, not %d", c.gcPercent)
	}
	if c.readTimeout <= 0 {
		return fmt.Errorf("--read-timeout must be positive, not %s", c.readTimeout)
	}
	if c.revocationTTL < time.Second || c.revocationTTL > auth.DefaultRevocationTTL {
		return fmt.Errorf("--revocation-ttl must be from 1s to %s, not %s", auth.DefaultRevocationTTL, c.revocationTTL)
	}
	if c.maxStreams < 1 {
		return fmt.Errorf("--max-streams-per-tenant must be at least 1, not %d", c.maxStreams)
	}
	if c.run.maxRunning < 1 {
		return fmt.Errorf("--max-running must be at least 1, not %d", c.run.maxRunning)
	}
	if c.maxProcs < 0 {
		return fmt.Errorf("--max-procs must be 0 (every CPU) or a positive count, not %d", c.maxProcs)
	}
	if c.maxProcs > 0 && getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(c.maxProcs)
	}
	// The live heap is small and allocation steady, so at Go's default the
	// collector runs often: a larger target cut the server's CPU per
	// workflow by a tenth under load (docs/performance.md).
	if getenv("GOGC") == "" {
		debug.SetGCPercent(c.gcPercent)
	}
	keep, err := c.keep.policy()
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	shutdownTracing, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "agentplane", Version: version, Getenv: getenv})
	if err != nil {
		return fmt.Errorf("set up tracing: %w", err)
	}
	defer shutdownTracing(context.Background())

	st, err := c.store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()

	limits, err := rateLimits(c)
	if err != nil {
		return err
	}
	if err := c.checkConsoleClient(); err != nil {
		return err
	}
	limiter, toolLimiter, closeLimiter, err := newLimiter(ctx, c.redisURL)
	if err != nil {
		return err
	}
	defer closeLimiter()

	authCfg := auth.Config{Audience: c.audience, TenantClaim: c.tenantClaim}
	var (
		issuer   *auth.Issuer
		verifier auth.Verifier
	)
	if c.oidcIssuer != "" {
		authCfg.Issuer = c.oidcIssuer
		verifier, err = auth.NewOIDCVerifier(ctx, c.oidcIssuer, authCfg)
		if err != nil {
			return fmt.Errorf("external issuer %s: %w", c.oidcIssuer, err)
		}
	} else {
		issuer, err = auth.NewIssuer(ctx, st, c.issuer.issuerURL(), time.Now)
		if err != nil {
			return fmt.Errorf("embedded issuer: %w", err)
		}
		if c.store.databaseURL == "" {
			if err := recordIssuer(c.store.data, c.issuer.issuerURL()); err != nil {
				return fmt.Errorf("record the issuer in %s: %w", c.store.data, err)
			}
		}
		authCfg.Issuer = c.issuer.issuerURL()
		verifier = auth.NewEmbeddedVerifier(st, authCfg)
	}

	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	c.tools.limiter, c.tools.metrics = toolLimiter, metrics
	parts, err := newToolParts(c.tools, st)
	if err != nil {
		return err
	}
	models, err := newModelParts(c.run, st, parts)
	if err != nil {
		return err
	}
	// Rollouts choose each invocation's arm from the store, and count each
	// finished run, on every replica (docs/change-safety.md).
	// An invocation's reads of its agent, tools and rollout are kept while
	// its tenant's catalog does not change (docs/performance.md).
	catalog := catalogcache.New(st, 0)
	rollouts := &rollout.Service{Store: catalogcache.Rollouts{Store: st, Cache: catalog}, Versions: st, Workflows: st, Now: time.Now, Logger: logger}
	runner, err := newRunner(c.run, st, parts, models, metrics, logger, c.issuer.issuerURL(), rollouts, catalog)
	if err != nil {
		return err
	}
	// The background loops end with ctx and are waited for before the
	// store closes; stopBackground ends them on an early return too.
	var background sync.WaitGroup
	defer background.Wait()
	ctx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	invoker := &workflow.Invoker{Runner: runner, Workflows: st, Now: time.Now}
	replays := &replay.Service{Workflows: st, Versions: st, Programs: runner, Runner: runner, Invoker: invoker, Store: st, Reader: runner,
		Models: replay.RunnerModels{Runner: runner}, Judge: replay.ModelJudge(models.lookup, runner), Now: time.Now, Logger: logger,
		Masks: replayMasks{runner}, Externals: runner, Tools: st}
	rollouts.Shadows = replays
	// Every replica sends due webhook deliveries from the outbox, through
	// the outbound client (its address policy) without following redirects;
	// an A2A push-notification config receives the A2A payload.
	deliverer := &webhook.Deliverer{Store: st, Webhooks: st, HTTP: parts.client.HTTPClient(), Owner: runner.Owner(), Logger: logger,
		Format: a2a.PushBody}
	// Whichever replica ends a real replay's workflow completes the replay;
	// the sweep completes those a crash left running (docs/replay.md). A
	// workflow's end has queued its webhook deliveries: send them now
	// rather than at the deliverer's next tick.
	runner.OnFinish(func(ctx context.Context, wf *workflow.Workflow) {
		replays.Finished(ctx, wf)
		deliverer.Wake()
		// Last: a shadow's replay waits on the model.
		rollouts.Finished(ctx, wf)
	})
	background.Go(func() { runner.Run(ctx) })
	background.Go(func() { replays.RunSweeper(ctx, replaySweep) })
	// Every replica counts the finished workflows of active rollouts that a
	// stopped replica left uncounted.
	background.Go(func() { rollouts.RunSweeper(ctx, replaySweep) })
	batches := &replay.BatchRunner{Service: replays, Store: st, Owner: runner.Owner(), Lease: c.run.lease,
		Workers: c.batchWorkers, Logger: logger}
	batchesDone := make(chan struct{})
	go func() {
		defer close(batchesDone)
		batches.Run(ctx)
	}()

	// Every replica runs the scheduler; the store's claims make each due
	// time start one workflow across replicas (docs/schedules.md).
	// One revocation list for bearer tokens, console sessions and
	// schedules: a revoked client's identity stops on every path within
	// --revocation-ttl.
	revocations := auth.NewRevocations(st, c.revocationTTL, time.Now)
	scheduler := &schedule.Scheduler{Store: st, Invoker: invoker, Logger: logger, Revocations: revocations}
	background.Go(func() { scheduler.Run(ctx) })
	// Tools carrying refresh are refreshed on schedule; the store's claim
	// of each due time makes one replica refresh it.
	background.Go(func() { parts.service.RunScheduledRefreshes(ctx, schedule.DefaultTick, logger) })
	schedules := &schedule.Service{Store: st, Versions: st, Scheduler: scheduler, MaxToolCalls: c.run.maxToolCalls, Now: time.Now}

	background.Go(func() { deliverer.Run(ctx) })
	// Every replica runs the sweeper; the store's lease lets one sweep at a
	// time (docs/retention.md).
	deleted := retention.NewDeletedCounter(reg)
	sweeper := &retention.Sweeper{Store: st, Writes: st, Policy: keep, Owner: runner.Owner(),
		Every: c.keep.every, Share: c.keep.share, Logger: logger, Deleted: deleted}
	background.Go(func() { sweeper.Run(ctx) })
	// Every replica runs the audit sinks' pusher; a lease per sink has one
	// push it at a time (docs/audit.md).
	auditPusher, err := newAuditPusher(ctx, c.sinks, st, parts, reg, runner.Owner(), logger)
	if err != nil {
		return err
	}
	if auditPusher != nil {
		background.Go(func() { auditPusher.Run(ctx) })
	}
	// A webhook's receiver gets signed events, an external agent's url the
	// run's gateway token: one address rule for both.
	receivers := outbound.ReceiverRule{CheckHost: parts.client.CheckHost, AllowHTTP: c.tools.allowPrivate, HTTPHost: parts.client.IsAllowedHost}
	webhooks := &webhook.Service{Store: st, Versions: st, Now: time.Now,
		CheckHost: receivers.CheckHost, AllowHTTP: receivers.AllowHTTP, HTTPHost: receivers.HTTPHost}
	externalChecks := agent.ExternalChecks{URL: receivers.Check, Secret: parts.policy.Check}

	viewer, err := web.LoadSigner(ctx, st, c.viewerTTL)
	if err != nil {
		return fmt.Errorf("--viewer-ttl: %w", err)
	}

	consoleOIDC, err := c.consoleOIDC(ctx, parts)
	if err != nil {
		return err
	}

	// One signature check per token a minute, not one per request.
	verifier = auth.NewCachingVerifier(verifier, time.Minute, 100_000, time.Now)
	// A revoked client's tokens are refused within --revocation-ttl,
	// whatever the cache above remembers.
	verifier = revocations.Verifier(verifier)

	telemetry.RegisterExecutions(reg, runner.Executions)
	background.Go(func() { collectAfterBursts(ctx, burstEvery, runningOf(runner.Executions), runtime.GC) })
	srv := httpapi.NewServer(httpapi.Config{
		MaxBodyBytes:         c.maxBodyBytes,
		IdempotencyTTL:       c.idempotencyTTL,
		InvokeIdempotencyTTL: c.invokeIdempotency,
		RateLimits:           limits,
		Version:              version,
		PublicURL:            c.issuer.issuerURL(),
		AuthorizationServer:  authCfg.Issuer,
		MaxStreamsPerTenant:  c.maxStreams,
	}, httpapi.Deps{
		Logger:      logger,
		Store:       st,
		Verifier:    verifier,
		Revocations: revocations,
		Issuer:      issuer,
		Limiter:     limiter,
		Metrics:     metrics,
		Tools:       parts.service,
		ToolStore:   st,
		Impact:      &impact.Service{Tools: parts.service, Store: st, Now: time.Now},
		Models:      models.service,
		Agents:      st,
		Runner:      runner,
		Workflows:   st,
		Replays:     replays,
		ReplayStore: st,
		Batches:     batches,
		BatchStore:  st,
		Datasets:    st,
		Viewer:      viewer,
		Schedules:   schedules,
		Webhooks:    webhooks,
		Rollouts:    rollouts,
		Retention:   &retention.Service{Store: st, Deleted: deleted},
		ConsoleOIDC: consoleOIDC,

		ExternalChecks: externalChecks,
	})

	ln, err := net.Listen("tcp", c.issuer.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.issuer.addr, err)
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: min(10*time.Second, c.readTimeout),
		// The whole request; net/http lifts the deadline once the body
		// is read, so streamed responses are not cut.
		ReadTimeout:    c.readTimeout,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: httpapi.ServerMaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	background.Go(func() { purgeIdempotency(ctx, st, logger, time.Now) })
	if c.debugAddr != "" {
		background.Go(func() { serveDebug(ctx, c.debugAddr, logger) })
	}

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	logger.Info("agentplane serving", "addr", ln.Addr().String(), "store", storeKind(c.store), "version", version)
	if c.demo {
		model := "" // the demo model
		if c.run.llmBaseURL != "" {
			model = "default" // the server-wide model --llm-base-url defines
		}
		apis, err := startDemo(ctx, issuer, st, "http://"+ln.Addr().String(), c.issuer.issuerURL(), model, stdout)
		if err != nil {
			hs.Close()
			return err
		}
		defer apis.Close()
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: draining in-flight requests", "timeout", c.shutdownTimeout)
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("shutdown: %w", err)
		}
		hs.Close() // requests still running past the drain time, such as sync invokes
	}
	<-errc // Serve has returned
	// Workflows still running are stopped unfinished and their leases
	// released, before the store closes, so a restart (or another replica)
	// resumes them at once.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := runner.Close(rctx); err != nil {
		logger.Warn("workflows still stopping at shutdown", "err", err)
	}
	select {
	case <-batchesDone:
	case <-rctx.Done():
		logger.Warn("replay batches still stopping at shutdown")
	}
	// A shadow replay in flight ends (its dry run is not resumed).
	shadowsDone := make(chan struct{})
	go func() {
		rollouts.WaitShadows()
		close(shadowsDone)
	}()
	select {
	case <-shadowsDone:
	case <-rctx.Done():
		logger.Warn("shadow replays still running at shutdown")
	}
	return nil
}

func storeKind(f storeFlags) string {
	if f.databaseURL != "" {
		return "postgres"
	}
	return "sqlite"
}

func rateLimits(c serveConfig) (ratelimit.Policy, error) {
	overrides, err := ratelimit.ParseOverrides(c.tenantLimits)
	if err != nil {
		return ratelimit.Policy{}, fmt.Errorf("--rate-limit-tenant: %w", err)
	}
	burst := c.rateLimitBurst
	if burst <= 0 {
		burst = c.rateLimit
	}
	return ratelimit.Policy{
		Default: ratelimit.Limit{Rate: c.rateLimit, Burst: burst, Period: time.Minute},
		Tenants: overrides,
		IP:      ratelimit.Limit{Rate: c.rateLimitIP, Burst: c.rateLimitIP, Period: time.Minute},
	}, nil
}

// newLimiter returns the Redis limiters of tenants and of tools' calls
// when a URL is set, else the in-process ones.
func newLimiter(ctx context.Context, redisURL string) (ratelimit.Limiter, call.Limiter, func(), error) {
	if redisURL == "" {
		l := ratelimit.NewMemory()
		return l, call.NewMemoryLimiter(), func() { l.Close() }, nil
	}
	client, err := ratelimit.ConnectRedis(ctx, redisURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--redis-url: %w", err)
	}
	return ratelimit.NewRedis(client, "agentplane:"), call.NewRedisLimiter(client, "agentplane:", 0), func() { client.Close() }, nil
}

// purgeIdempotency deletes expired idempotency keys every few minutes.
func purgeIdempotency(ctx context.Context, st store, logger *slog.Logger, now func() time.Time) {
	t := time.NewTicker(5 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := st.PurgeIdempotency(ctx, now())
			if err != nil {
				logger.Warn("purge idempotency keys", "err", err)
			} else if n > 0 {
				logger.Debug("purged idempotency keys", "count", n)
			}
		}
	}
}

// serveDebug serves Go's profiling endpoints on their own listener, never
// on the API's, until ctx ends.
func serveDebug(ctx context.Context, addr string, logger *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var closer sync.WaitGroup
	defer closer.Wait()
	served := make(chan struct{})
	defer close(served)
	closer.Go(func() {
		select {
		case <-ctx.Done():
			srv.Close()
		case <-served: // the listener failed
		}
	})
	logger.Info("debug listener serving /debug/pprof", "addr", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("debug listener", "err", err)
	}
}
