package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/workflow"
)

// backend is everything the server keeps, in SQLite or PostgreSQL.
type backend interface {
	httpapi.Store
	tool.Store
	agent.VersionStore
	workflow.Store
	replay.Store
	replay.BatchStore
	Close() error
}

// counting counts the workflow store's reads a follower makes.
type counting struct {
	workflow.Store
	reads atomic.Int64
}

func (c *counting) Workflow(ctx context.Context, tenant, id string) (*workflow.Workflow, error) {
	c.reads.Add(1)
	return c.Store.Workflow(ctx, tenant, id)
}

func (c *counting) Steps(ctx context.Context, id string, after int) ([]workflow.Step, error) {
	c.reads.Add(1)
	return c.Store.Steps(ctx, id, after)
}

// countingFeed is counting over a store with a change feed, which the
// runner must still see.
type countingFeed struct {
	*counting
	feed workflow.ChangeFeed
}

func (c countingFeed) WatchChanges(ctx context.Context, w workflow.Watch) error {
	return c.feed.WatchChanges(ctx, w)
}

// server is the in-process server of one measurement.
type server struct {
	url    string
	client *http.Client
	tokens []string // one per tenant
	count  *counting
	stop   func()
}

func startServer(ctx context.Context, db backend, tenants int) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	iss, err := auth.NewIssuer(ctx, db, url, time.Now)
	if err != nil {
		ln.Close()
		return nil, err
	}
	out := outbound.New(outbound.Options{AllowPrivate: true})
	policy, err := secrets.NewPolicy([]string{"env://TOOL_*"}, false)
	if err != nil {
		ln.Close()
		return nil, err
	}
	resolver, err := secrets.NewResolver(secrets.Options{Policy: policy})
	if err != nil {
		ln.Close()
		return nil, err
	}
	tools := &tool.Service{Store: db, Fetcher: out, Secrets: policy, MaxSpecBytes: 32 << 20, Now: time.Now,
		Importers: map[string]tool.Importer{tool.OpenAPI: openapi.New()}}
	count := &counting{Store: db}
	var ws workflow.Store = count
	if cf, ok := db.(workflow.ChangeFeed); ok {
		ws = countingFeed{counting: count, feed: cf}
	}
	runner := workflow.New(workflow.Options{Store: ws, Versions: db, Tools: db, Logger: logger,
		Caller: call.New(call.Options{Client: out, Secrets: resolver, Timeout: 10 * time.Second})})
	runCtx, stopRunner := context.WithCancel(context.Background())
	go runner.Run(runCtx)
	replays := &replay.Service{Workflows: db, Versions: db, Programs: runner, Runner: runner, Store: db, Now: time.Now}
	batches := &replay.BatchRunner{Service: replays, Store: db, Owner: runner.Owner(), Logger: logger}
	viewer, err := web.LoadSigner(ctx, db, 0)
	if err != nil {
		stopRunner()
		ln.Close()
		return nil, err
	}
	limiter := ratelimit.NewMemory()
	unlimited := ratelimit.Limit{Rate: 100_000_000, Period: time.Minute}
	h := httpapi.NewServer(httpapi.Config{
		RateLimits: ratelimit.Policy{Default: unlimited, IP: unlimited},
		Version:    "bench", PublicURL: url, AuthorizationServer: url,
	}, httpapi.Deps{
		Logger: logger, Store: db, Verifier: auth.NewEmbeddedVerifier(db, auth.Config{Issuer: url}), Issuer: iss,
		Limiter: limiter, Metrics: telemetry.NewMetrics(prometheus.NewRegistry()),
		Tools: tools, ToolStore: db, Agents: db, Runner: runner, Workflows: db,
		Replays: replays, ReplayStore: db, Batches: batches, BatchStore: db, Viewer: viewer,
	})
	ts := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	ts.Start()
	s := &server{url: url, count: count,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		stop: func() {
			ts.Close()
			stopRunner()
			runner.Close(context.Background())
			limiter.Close()
		}}
	for i := range tenants {
		tok, err := iss.Mint(ctx, auth.MintRequest{Tenant: "t" + strconv.Itoa(i), Subject: "bench", Scopes: auth.ParseScopes(scopes)})
		if err != nil {
			s.stop()
			return nil, err
		}
		s.tokens = append(s.tokens, tok)
	}
	return s, nil
}

// do sends a JSON request as tenant t and returns the status and body.
func (s *server) do(ctx context.Context, t int, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.tokens[t])
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// open opens the store of one measurement, with the URL of its
// PostgreSQL database ("" for SQLite); drop removes it after.
func open(ctx context.Context, o options, dir, store string) (db backend, url string, drop func() error, err error) {
	if store == "sqlite" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", nil, err
		}
		db, err := sqlite.Open(ctx, filepath.Join(dir, "agentplane.db"))
		return db, "", func() error { return nil }, err
	}
	url, drop, err = benchserver.CreateDatabase(ctx, o.databaseURL)
	if err != nil {
		return nil, "", nil, err
	}
	pg, err := postgres.Open(ctx, url)
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	return pg, url, drop, nil
}
