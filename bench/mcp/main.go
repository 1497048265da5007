// Command mcp benchmarks MCP's call_operation beside a direct invoke: through
// the real server binary (built from ./cmd/agentplane and started as its own
// process) it calls one operation of a loopback tool service, c at a time,
// either as `tools/call call_operation` over POST /mcp (the official SDK's
// client, one session per worker) or as a synchronous invoke of an agent
// that makes the same one call. Runs of the two alternate in one session.
// It prints calls per second, p50 and p99 of each run, and the ratio of the
// medians, and checks that every call reached the tool service.
//
//	go run ./bench/mcp [-store sqlite|postgres|both] [-concurrency 16] [-n 2000] [-rounds 3]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

const tokenScopes = "tools:write agents:write agents:invoke mcp:use tool:*"

// thingSpec is the tool service's OpenAPI document; %s is its base URL.
const thingSpec = `{"openapi": "3.0.3", "info": {"title": "things", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/things/{id}": {"get": {"operationId": "getThing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}}}}`

// agent makes the one call call_operation makes.
const agent = `{"tools": ["svc"], "steps": [{"action": "get", "call": "svc.getThing", "args": {"id": "'a'"}}]}`

type options struct {
	stores         []string
	conc, n, round int
	databaseURL    string
	repo, binary   string
	limit          time.Duration
}

func main() { benchserver.Main("bench/mcp", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	conc := fs.Int("concurrency", 16, "calls at once")
	n := fs.Int("n", 2000, "calls per run")
	rounds := fs.Int("rounds", 3, "runs of each kind, alternated")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 2*time.Minute, "time limit of each run")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{conc: *conc, n: *n, round: *rounds, repo: *repo, binary: *binary, limit: *limit}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.conc < 1 || o.conc > 256 || o.n < 1 || o.n > 100000 || o.round < 1 || o.round > 20 || o.limit <= 0 {
		return options{}, errors.New("-concurrency must be from 1 to 256, -n from 1 to 100000, -rounds from 1 to 20, -limit positive")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// result is one run.
type result struct {
	store, kind string
	round       int
	rate        float64
	p50, p99    time.Duration
	// serverCPU is the server's CPU time per call.
	serverCPU time.Duration
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "mcp", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var hits atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"ok":true}`, strings.TrimPrefix(r.URL.Path, "/things/"))
	}))
	defer svc.Close()
	var results []result
	for _, store := range o.stores {
		rs, err := measure(ctx, o, bin, tmp, store, svc.URL, &hits, stderr)
		results = append(results, rs...)
		if err != nil {
			printTable(stdout, results)
			return fmt.Errorf("%s: %w", store, err)
		}
	}
	printTable(stdout, results)
	return nil
}

func measure(ctx context.Context, o options, bin, tmp, store, svcURL string, hits *atomic.Int64, stderr io.Writer) (results []result, err error) {
	srv, stop, err := benchserver.StartOn(ctx, benchserver.Config{Binary: bin, Data: tmp + "/" + store}, store, o.databaseURL)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := srv.MintToken(ctx, tokenScopes); err != nil {
		return nil, err
	}
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": fmt.Sprintf(thingSpec, svcURL)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return nil, fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	dep := map[string]any{"name": "one-call", "definition": json.RawMessage(agent)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
		return nil, fmt.Errorf("deploy: %d %s %v", st, body, err)
	}
	hc := &http.Client{Transport: &bearer{token: srv.Token, base: &http.Transport{MaxIdleConnsPerHost: o.conc * 2}}}
	invoke := func(ctx context.Context, _ *mcp.ClientSession) error {
		st, body, err := srv.Do(ctx, "POST", "/v1/agents/one-call/invoke", map[string]any{"goal": "bench"})
		if err == nil && (st != http.StatusOK || !strings.Contains(string(body), `"status":"completed"`)) {
			err = fmt.Errorf("invoke: %d %.300s", st, body)
		}
		return err
	}
	callOp := func(ctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_operation",
			Arguments: map[string]any{"tool": "svc", "operation": "getThing", "args": map[string]any{"id": "a"}}})
		if err == nil && res.IsError {
			b, _ := json.Marshal(res.Content)
			err = fmt.Errorf("call_operation: %s", b)
		}
		return err
	}
	srv.HTTP = hc
	kinds := []struct {
		name string
		f    func(context.Context, *mcp.ClientSession) error
	}{{"invoke", invoke}, {"mcp call_operation", callOp}}
	// A warm-up of each, then alternated rounds.
	for round := 0; round <= o.round; round++ {
		for _, k := range kinds {
			n := o.n
			if round == 0 {
				n = min(o.n, 200)
			}
			before, cpu0 := hits.Load(), srv.CPU()
			r, err := load(ctx, o, srv.BaseURL()+"/mcp", hc, n, k.f)
			if err != nil {
				return results, fmt.Errorf("%s: %w", k.name, err)
			}
			if got := hits.Load() - before; got != int64(n) {
				return results, fmt.Errorf("%s: the tool service received %d calls, want %d", k.name, got, n)
			}
			if round == 0 {
				continue
			}
			r.store, r.kind, r.round = store, k.name, round
			r.serverCPU = (srv.CPU() - cpu0) / time.Duration(n)
			fmt.Fprintf(stderr, "%s round %d %s: %.0f calls/s\n", store, round, k.name, r.rate)
			results = append(results, r)
		}
	}
	return results, srv.Exited()
}

// load makes n calls with f, o.conc at a time, each worker with its own MCP
// session.
func load(ctx context.Context, o options, endpoint string, hc *http.Client, n int, f func(context.Context, *mcp.ClientSession) error) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.limit)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	start := time.Now()
	for range o.conc {
		wg.Go(func() {
			client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc,
				DisableStandaloneSSE: true, MaxRetries: -1}, nil)
			if err != nil {
				fail(fmt.Errorf("connect: %w", err))
				return
			}
			defer cs.Close()
			var mine []time.Duration
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := f(ctx, cs); err != nil {
					fail(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	slices.Sort(lat)
	return result{rate: float64(n) / time.Since(start).Seconds(), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}, nil
}

// bearer adds the token to each request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func printTable(w io.Writer, rs []result) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tkind\tround\tcalls/s\tp50 ms\tp99 ms\tserver CPU µs/call\t")
	medians := map[string]map[string][]float64{}
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%d\t\n", r.store, r.kind, r.round, r.rate,
			float64(r.p50.Microseconds())/1000, float64(r.p99.Microseconds())/1000, r.serverCPU.Microseconds())
		if medians[r.store] == nil {
			medians[r.store] = map[string][]float64{}
		}
		medians[r.store][r.kind] = append(medians[r.store][r.kind], r.rate)
	}
	tw.Flush()
	for store, m := range medians {
		inv, mc := median(m["invoke"]), median(m["mcp call_operation"])
		if inv > 0 && mc > 0 {
			fmt.Fprintf(w, "%s: median invoke %.0f calls/s, call_operation %.0f calls/s: invoke is %.2f× call_operation\n", store, inv, mc, inv/mc)
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
