package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/a2atool"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/tool/graphql"
	"github.com/agentplane/agentplane/internal/tool/impact"
	"github.com/agentplane/agentplane/internal/tool/mcptool"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/tool/soap"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// harness is a real agentplane HTTP server on SQLite, for end-to-end tests
// of the HTTP layer.
type harness struct {
	t      *testing.T
	URL    string
	Issuer *auth.Issuer
	DB     *sqlite.DB
	DBPath string
	client *http.Client
}

type option func(*httpapi.Config, *httpapi.Deps)

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentplane.db")
	if err := sqlite.WriteTestFile(path); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	ts := httptest.NewUnstartedServer(nil)
	url := "http://" + ts.Listener.Addr().String()
	iss, err := auth.NewIssuer(ctx, db, url, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	out := outbound.New(outbound.Options{AllowPrivate: true})
	policy, err := secrets.NewPolicy([]string{"env://TOOL_*"}, false)
	if err != nil {
		t.Fatal(err)
	}
	tools := &tool.Service{
		Store: db, Fetcher: out, Secrets: policy, MaxSpecBytes: 32 << 20, Now: time.Now,
		Importers: map[string]tool.Importer{
			tool.OpenAPI: openapi.New(), tool.GraphQL: graphql.Importer{},
			tool.SOAP: &soap.Importer{Fetch: func(ctx context.Context, url string) ([]byte, error) {
				data, _, err := out.Fetch(ctx, url)
				return data, err
			}},
			tool.MCP: mcptool.Importer{}, tool.A2A: a2atool.Importer{},
		},
		MCPLister: mcptool.Lister{HTTP: out.HTTPClient(), MaxBytes: 32 << 20},
		Introspector: tool.IntrospectorFunc(func(ctx context.Context, endpoint string) ([]byte, error) {
			body, _ := json.Marshal(map[string]string{"query": graphql.IntrospectionQuery})
			return out.PostJSON(ctx, endpoint, body)
		}),
	}
	resolver, err := secrets.NewResolver(secrets.Options{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	rollouts := &rollout.Service{Store: db, Versions: db, Workflows: db}
	runner := workflow.New(workflow.Options{
		Store: db, Versions: db, Tools: db, Models: model.NewLookup(db, nil), Lease: 10 * time.Second, Arms: rollouts,
		Caller: toolcall.New(toolcall.Options{Client: out, Secrets: resolver, Timeout: 10 * time.Second}),
	})
	runCtx, stopRunner := context.WithCancel(context.Background())
	go runner.Run(runCtx)
	t.Cleanup(func() {
		stopRunner()
		runner.Close(context.Background())
	})
	replays := &replay.Service{Workflows: db, Versions: db, Programs: runner, Runner: runner, Store: db, Reader: runner, Tools: db,
		Invoker: &workflow.Invoker{Runner: runner, Workflows: db, Now: time.Now}}
	rollouts.Shadows = replays
	runner.OnFinish(func(ctx context.Context, wf *workflow.Workflow) { // as cmd/agentplane wires it
		replays.Finished(ctx, wf)
		rollouts.Finished(ctx, wf)
	})
	batches := &replay.BatchRunner{Service: replays, Store: db, Owner: "harness", Lease: 10 * time.Second}
	go batches.Run(runCtx)
	viewer, err := web.LoadSigner(ctx, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	limiter := ratelimit.NewMemory()
	t.Cleanup(func() { limiter.Close() })
	cfg := httpapi.Config{RateLimits: ratelimit.DefaultPolicy(), Version: "test", PublicURL: url, AuthorizationServer: url}
	deps := httpapi.Deps{
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Store:       db,
		Verifier:    auth.NewEmbeddedVerifier(db, auth.Config{Issuer: url}),
		Issuer:      iss,
		Limiter:     limiter,
		Metrics:     telemetry.NewMetrics(prometheus.NewRegistry()),
		Tools:       tools,
		ToolStore:   db,
		Impact:      &impact.Service{Tools: tools, Store: db, Now: time.Now},
		Models:      &model.Service{Store: db, Secrets: policy, Addresses: out, Now: time.Now},
		Agents:      db,
		Runner:      runner,
		Workflows:   db,
		Replays:     replays,
		ReplayStore: db,
		Batches:     batches,
		BatchStore:  db,
		Datasets:    db,
		Viewer:      viewer,
		Schedules: &schedule.Service{Store: db, Versions: db, MaxToolCalls: 100, Now: time.Now,
			Scheduler: &schedule.Scheduler{Store: db, Invoker: &workflow.Invoker{Runner: runner, Workflows: db, Now: time.Now}}},
		Webhooks: &webhook.Service{Store: db, Versions: db, AllowHTTP: true, Now: time.Now},
		Rollouts: rollouts,
		ExternalChecks: agent.ExternalChecks{URL: outbound.ReceiverRule{CheckHost: out.CheckHost, AllowHTTP: true}.Check,
			Secret: policy.Check},
	}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	ts.Config.Handler = httpapi.NewServer(cfg, deps)
	ts.Config.MaxHeaderBytes = httpapi.ServerMaxHeaderBytes
	ts.Start()
	t.Cleanup(ts.Close)
	return &harness{t: t, URL: url, Issuer: iss, DB: db, DBPath: path, client: ts.Client()}
}

// token mints an access token for tenant with the given scopes.
func (h *harness) token(tenant, scopes string) string {
	h.t.Helper()
	tok, err := h.Issuer.Mint(context.Background(), auth.MintRequest{Tenant: tenant, Subject: "alice", Scopes: auth.ParseScopes(scopes)})
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

func (r response) problem(t *testing.T) problem.Document {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json (body %s)", ct, r.Body)
	}
	var d problem.Document
	r.json(t, &d)
	return d
}

// do sends a request; body is JSON-encoded unless it is a string or []byte.
func (h *harness) do(method, path, token string, body any, headers ...string) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func mint(tenant, sub, scopes string) auth.MintRequest {
	return auth.MintRequest{Tenant: tenant, Subject: sub, Scopes: auth.ParseScopes(scopes)}
}

// fingerprintOf is the idempotency fingerprint of a JSON body.
func fingerprintOf(t *testing.T, body string) string {
	t.Helper()
	canon, err := jcs.Transform([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// rawDB is a connection of its own to the harness's database, for a test
// that changes rows behind the store's back, closed when the test ends. It
// waits for the store's writer like the store's own connections do, rather
// than failing with SQLITE_BUSY while a commit holds the lock.
func (h *harness) rawDB() *sql.DB {
	h.t.Helper()
	db, err := sql.Open("sqlite", "file:"+h.DBPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	return db
}

func TestMain(m *testing.M) {
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "agentplane-test", Getenv: func(string) string { return "" }})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	shutdown(context.Background())
	os.Exit(code)
}
