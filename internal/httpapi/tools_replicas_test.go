package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/tool/graphql"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/tool/soap"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/workflow"
)

// replicaIssuer is the public URL both replicas serve behind, as behind one
// load balancer: the iss of every token and what each verifier expects.
const replicaIssuer = "https://agentplane.test"

// replica is one agentplane server of a scaled-out deployment.
type replica struct {
	URL    string
	client *http.Client
	issuer *auth.Issuer
}

// harness is the replica as a harness, for the scenarios written for one.
func (r *replica) harness(t *testing.T) *harness {
	return &harness{t: t, URL: r.URL, Issuer: r.issuer, client: r.client}
}

func (r *replica) do(t *testing.T, method, path, token string, body []byte, headers ...string) response {
	t.Helper()
	resp, err := exchange(r.client, r.URL, method, path, token, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// newReplicas starts n servers, each with its own connection pool, issuer,
// verifier, limiter and tool service, on one new PostgreSQL database. It
// returns them with an issuer to mint tokens every replica accepts.
func newReplicas(t *testing.T, n int) ([]*replica, *auth.Issuer) {
	t.Helper()
	if os.Getenv(postgres.TestDatabaseEnv) == "" {
		t.Skip(postgres.TestDatabaseEnv + " not set: skipping the two-replica PostgreSQL test " +
			"(set it to e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	dbURL := postgres.NewTestDatabase(t)
	ctx := t.Context()
	var (
		replicas []*replica
		issuer   *auth.Issuer
	)
	for range n {
		db, err := postgres.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		iss, err := auth.NewIssuer(ctx, db, replicaIssuer, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if issuer == nil {
			issuer = iss
		}
		policy, err := secrets.NewPolicy(nil, false)
		if err != nil {
			t.Fatal(err)
		}
		out := outbound.New(outbound.Options{AllowPrivate: true})
		limiter := ratelimit.NewMemory()
		t.Cleanup(func() { limiter.Close() })
		resolver, err := secrets.NewResolver(secrets.Options{Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		runner := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Lease: 2 * time.Second,
			Caller: toolcall.New(toolcall.Options{Client: out, Secrets: resolver, Timeout: 10 * time.Second})})
		t.Cleanup(func() { runner.Close(context.Background()) })
		viewer, err := web.LoadSigner(ctx, db, 0)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.NewServer(
			httpapi.Config{RateLimits: ratelimit.DefaultPolicy(), Version: "test", PublicURL: replicaIssuer},
			httpapi.Deps{
				Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
				Store:     db,
				Verifier:  auth.NewEmbeddedVerifier(db, auth.Config{Issuer: replicaIssuer}),
				Issuer:    iss,
				Limiter:   limiter,
				Metrics:   telemetry.NewMetrics(prometheus.NewRegistry()),
				Tools:     newToolService(db, out, policy),
				ToolStore: db,
				Agents:    db,
				Runner:    runner,
				Workflows: db,
				Replays: &replay.Service{Workflows: db, Versions: db, Programs: runner, Runner: runner, Store: db,
					Invoker: &workflow.Invoker{Runner: runner, Workflows: db, Now: time.Now}},
				ReplayStore: db,
				Viewer:      viewer,
			}))
		t.Cleanup(srv.Close)
		replicas = append(replicas, &replica{URL: srv.URL, client: srv.Client(), issuer: iss})
	}
	return replicas, issuer
}

// newToolService wires the tool service as cmd/agentplane does.
func newToolService(st tool.Store, out *outbound.Client, policy *secrets.Policy) *tool.Service {
	return &tool.Service{
		Store: st, Fetcher: out, Secrets: policy, MaxSpecBytes: 32 << 20, Now: time.Now,
		Importers: map[string]tool.Importer{
			tool.OpenAPI: openapi.New(), tool.GraphQL: graphql.Importer{},
			tool.SOAP: &soap.Importer{Fetch: func(ctx context.Context, url string) ([]byte, error) {
				data, _, err := out.Fetch(ctx, url)
				return data, err
			}},
		},
		Introspector: tool.IntrospectorFunc(func(ctx context.Context, endpoint string) ([]byte, error) {
			body, _ := json.Marshal(map[string]string{"query": graphql.IntrospectionQuery})
			return out.PostJSON(ctx, endpoint, body)
		}),
	}
}

func TestToolReplicasShareIdempotency(t *testing.T) {
	t.Parallel()
	rs, iss := newReplicas(t, 2)
	one, two := rs[0], rs[1]
	tok, err := iss.Mint(t.Context(), mint("acme", "alice", "tools:write tools:read"))
	if err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		var page struct{ Tools []toolJSON }
		r := two.do(t, "GET", "/v1/tools", tok, nil)
		r.json(t, &page)
		return len(page.Tools)
	}

	t.Run("sequential", func(t *testing.T) {
		files := newSpecServer(t, "petstore31.yaml")
		body, _ := json.Marshal(map[string]any{"name": "pets", "type": "openapi", "spec_url": files.URL + "/petstore31.yaml"})
		first := one.do(t, "POST", "/v1/tools", tok, body, "Idempotency-Key", "K")
		if first.Status != http.StatusCreated {
			t.Fatalf("replica 1: %d %s", first.Status, first.Body)
		}
		again := two.do(t, "POST", "/v1/tools", tok, body, "Idempotency-Key", "K")
		if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replica 2: %d %v %s", again.Status, again.Header, again.Body)
		}
		if diff := cmp.Diff(string(first.Body), string(again.Body)); diff != "" {
			t.Errorf("replayed body (-replica 1 +replica 2):\n%s", diff)
		}
		if n := files.gets.Load(); n != 1 {
			t.Errorf("the spec was fetched %d times, want 1", n)
		}
		if n := listed(); n != 1 {
			t.Errorf("%d tools, want 1", n)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		spec := newSlowSpec(t, testdata(t, "petstore31.yaml"))
		body, _ := json.Marshal(map[string]any{"name": "pets-slow", "type": "openapi", "spec_url": spec.URL + "/petstore31.yaml"})
		post := func(r *replica) func() (response, error) {
			return func() (response, error) {
				return exchange(r.client, r.URL, "POST", "/v1/tools", tok, body, "Idempotency-Key", "K2")
			}
		}
		a, b := racePair(t, spec, post(one), post(two))
		checkOneCreated(t, a, b)
		if n := listed(); n != 2 {
			t.Errorf("%d tools, want 2 (one per key)", n)
		}
	})
}

// TestPathsPostgreSQLCannotStoreAreNotFound checks that a path id holding a
// NUL or invalid UTF-8, which PostgreSQL refuses in a query, is a 404 and
// still audited, not a 500.
func TestPathsPostgreSQLCannotStoreAreNotFound(t *testing.T) {
	t.Parallel()
	rs, iss := newReplicas(t, 1)
	tok, err := iss.Mint(t.Context(), mint("acme", "alice", "tools:read audit:read"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/tools/%ff", "/v1/tools/a%00b"} {
		if r := rs[0].do(t, "GET", path, tok, nil); r.Status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", path, r.Status, r.Body)
		}
	}
	var page struct {
		Records []struct{ Status int } `json:"records"`
	}
	rs[0].do(t, "GET", "/v1/audit/query", tok, nil).json(t, &page)
	if len(page.Records) < 2 || page.Records[0].Status != http.StatusNotFound || page.Records[1].Status != http.StatusNotFound {
		t.Errorf("audit records %+v, want the two 404s", page.Records)
	}
}
