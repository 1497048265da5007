// Command batch benchmarks batch replay: it stores n workflows of an agent
// of three tool calls (each an HTTP GET to a loopback service), then replays
// them all as one batch against a second version, through the real server
// binary (built from ./cmd/agentplane and started as its own process), on
// SQLite and on PostgreSQL. It prints the batch's wall time, workflows per
// second, the server's CPU time and its peak resident memory during the
// batch, and checks that every workflow was replayed with no request to the
// tool service.
//
//	go run ./bench/batch [-store sqlite|postgres|both] [-n 10000] [-workers 0]
//	go run ./bench/batch -llm live [-n 1000] [-concurrency 32] [-model-delay 200ms]
//	go run ./bench/batch -external [-n 1000] [-concurrency 32] [-model-delay 200ms] [-store sqlite|postgres|both]
//
// -llm live replays an LLM agent's workflows with every completion asked
// again of a scripted model on loopback (see live.go); -external replays an
// external agent's workflows, with the model live, through the server
// binary and its run gateway (see external.go).
//
// PostgreSQL runs in a fresh database created on the server named by
// -database-url (default $AGENTPLANE_TEST_DATABASE_URL, else a local one) and
// dropped at the end.
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
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"golang.org/x/sync/errgroup"
)

const tokenScopes = "tools:write agents:write agents:invoke workflows:read workflows:replay tool:*"

// thingSpec is the tool service's OpenAPI document; %s is its base URL.
const thingSpec = `{"openapi": "3.0.3", "info": {"title": "things", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/things/{id}": {"get": {"operationId": "getThing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}}}}`

// agent is the stored workflows' agent: three calls, then an outcome. The
// target version makes the same calls and decides another outcome, so every
// replay's outcome changes: the batch's heaviest case.
const agent = `{"tools": ["svc"], "steps": [
  {"action": "get_a", "call": "svc.getThing", "args": {"id": "'a'"}, "save_as": "a"},
  {"action": "get_b", "call": "svc.getThing", "args": {"id": "'b'"}, "save_as": "b"},
  {"action": "get_c", "call": "svc.getThing", "args": {"id": "'c'"}, "save_as": "c"}],
 "outcome": "%s"}`

type options struct {
	stores      []string
	n, seedConc int
	workers     int
	databaseURL string
	repo        string
	binary      string
	limit       time.Duration
	// llm is recorded (the default) or live; concurrency and modelDelay
	// are the live mode's.
	llm         string
	external    bool
	concurrency int
	modelDelay  time.Duration
	// cpuProfile, with -external, receives the server's CPU profile of the
	// batch, and cpuProfile+".agent" this process's (the agents').
	cpuProfile string
}

func main() { benchserver.Main("bench/batch", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/batch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 10000, "workflows to store and replay as one batch (at most 10,000)")
	seedConc := fs.Int("seed-concurrency", 16, "invocations at once while storing the workflows")
	workers := fs.Int("workers", 0, "the server's --replay-batch-workers (0: its default, the number of CPUs)")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 5*time.Minute, "time limit of seeding and of the batch, each")
	llm := fs.String("llm", "recorded", "recorded (through the server binary) or live (completions asked again of a scripted model, in this process)")
	external := fs.Bool("external", false, "replay an external agent's workflows (the Go recipe, served by this process) with the model live, through the server binary")
	conc := fs.Int("concurrency", 32, "-llm live and -external: the batch's concurrency, 1 to 64")
	delay := fs.Duration("model-delay", 200*time.Millisecond, "-llm live and -external: how long the scripted model takes to answer")
	cpuProfile := fs.String("cpuprofile", "", "-external: write the server's CPU profile of the batch to this file, and this process's (the agents') to this file + .agent")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{cpuProfile: *cpuProfile, n: *n, seedConc: *seedConc, workers: *workers, repo: *repo, binary: *binary, limit: *limit,
		llm: *llm, external: *external, concurrency: *conc, modelDelay: *delay}
	if o.llm != "recorded" && o.llm != "live" || o.concurrency < 1 || o.concurrency > 64 || o.modelDelay <= 0 {
		return options{}, errors.New("-llm must be recorded or live, -concurrency from 1 to 64, -model-delay positive")
	}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.n < 1 || o.n > 10000 || o.seedConc < 1 || o.seedConc > 256 || o.workers < 0 || o.limit <= 0 {
		return options{}, errors.New("-n must be from 1 to 10000, -seed-concurrency from 1 to 256, -workers not negative, -limit positive")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// result is one store's batch.
type result struct {
	store                  string
	workflows, changed     int
	seedRate               float64
	wall                   time.Duration
	cpu                    time.Duration
	rssBefore, peak, after int64
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	switch {
	case o.external:
		return runExternal(ctx, o, stdout, stderr)
	case o.llm == "live":
		return runLive(ctx, o, stdout, stderr)
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "batch", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var hits atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		id := strings.TrimPrefix(r.URL.Path, "/things/")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"ok":true}`, id)
	}))
	defer svc.Close()

	var results []result
	for _, store := range o.stores {
		r, err := measure(ctx, o, bin, tmp, store, svc.URL, &hits, stderr)
		if err != nil {
			printTable(stdout, results)
			return fmt.Errorf("%s: %w", store, err)
		}
		results = append(results, r)
	}
	printTable(stdout, results)
	return nil
}

func measure(ctx context.Context, o options, bin, tmp, store, svcURL string, hits *atomic.Int64, stderr io.Writer) (_ result, err error) {
	sc := benchserver.Config{Binary: bin, Data: tmp + "/" + store}
	if o.workers > 0 {
		sc.Args = []string{"--replay-batch-workers", strconv.Itoa(o.workers)}
	}
	srv, stop, err := benchserver.StartOn(ctx, sc, store, o.databaseURL)
	if err != nil {
		return result{}, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := srv.MintToken(ctx, tokenScopes); err != nil {
		return result{}, err
	}
	if err := setup(ctx, srv, svcURL); err != nil {
		return result{}, err
	}
	r := result{store: store, workflows: o.n}
	fmt.Fprintf(stderr, "%s: storing %d workflows …\n", store, o.n)
	if r.seedRate, err = seed(ctx, srv, o.n, o.seedConc, o.limit, stderr); err != nil {
		return r, err
	}

	before := hits.Load()
	r.rssBefore = srv.RSS()
	peakOK := srv.ResetPeakRSS() == nil
	cpu0 := srv.CPU()
	start := time.Now()
	st, body, err := srv.Do(ctx, "POST", "/v1/replay-batches", map[string]any{"target_agent_version": "bench@2",
		"workflows": map[string]any{"agent": "bench", "limit": o.n}})
	if err != nil || st != http.StatusAccepted {
		return r, fmt.Errorf("create batch: %d %s %v", st, body, err)
	}
	var b batch
	if err := json.Unmarshal(body, &b); err != nil {
		return r, err
	}
	fmt.Fprintf(stderr, "%s: replaying %d workflows as batch %s …\n", store, b.Total, b.ID)
	var sampled int64
	deadline := time.Now().Add(o.limit)
	for b.Status == "running" {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("batch still running after %s: %d of %d done", o.limit, b.Done, b.Total)
		}
		if err := srv.Exited(); err != nil {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
		sampled = max(sampled, srv.RSS())
		st, body, err := srv.Do(ctx, "GET", "/v1/replay-batches/"+b.ID, nil)
		if err != nil || st != http.StatusOK {
			return r, fmt.Errorf("get batch: %d %s %v", st, body, err)
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return r, err
		}
	}
	r.cpu = srv.CPU() - cpu0
	r.wall = time.Since(start)
	if b.FinishedAt != nil {
		// The server's own times: the poll's granularity left out.
		r.wall = b.FinishedAt.Sub(b.CreatedAt)
	}
	r.peak = sampled
	if peakOK {
		r.peak = max(sampled, srv.PeakRSS())
	}
	r.after, r.changed = srv.RSS(), b.Changed
	if b.Status != "completed" || b.Done != o.n || b.Total != o.n {
		return r, fmt.Errorf("batch %s ended %s with %d of %d (want %d) replayed: %s", b.ID, b.Status, b.Done, b.Total, o.n, b.Error)
	}
	if got := hits.Load() - before; got != 0 {
		return r, fmt.Errorf("the batch sent %d requests to the tool service", got)
	}
	return r, srv.Exited()
}

type batch struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	Error      string     `json:"error"`
	Total      int        `json:"total"`
	Done       int        `json:"done"`
	Changed    int        `json:"changed"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// setup registers the tool service and deploys bench@1 and bench@2.
func setup(ctx context.Context, srv *benchserver.Server, svcURL string) error {
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": fmt.Sprintf(thingSpec, svcURL)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	for v, outcome := range map[string]string{"1": "'done'", "2": "'reviewed'"} {
		dep := map[string]any{"name": "bench", "version": v, "definition": json.RawMessage(fmt.Sprintf(agent, outcome))}
		if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
			return fmt.Errorf("deploy bench@%s: %d %s %v", v, st, body, err)
		}
	}
	return nil
}

// seed stores n workflows of bench@1, conc at a time, and returns their rate.
func seed(ctx context.Context, srv *benchserver.Server, n, conc int, limit time.Duration, stderr io.Writer) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var next, done atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range conc {
		g.Go(func() error {
			for next.Add(1) <= int64(n) {
				st, body, err := srv.Do(ctx, "POST", "/v1/agents/bench@1/invoke", map[string]any{"goal": "bench"})
				if err != nil {
					return err
				}
				if st != http.StatusOK {
					return fmt.Errorf("invoke: %d %.300s", st, body)
				}
				if d := done.Add(1); d%2000 == 0 {
					fmt.Fprintf(stderr, "  %d stored\n", d)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func printTable(w io.Writer, rs []result) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tworkflows\tbatch s\tworkflows/s\tserver CPU s\tRSS before MB\tpeak RSS MB\tRSS after MB\tchanged\tseeding wf/s\t")
	mb := func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.2f\t%s\t%s\t%s\t%d\t%.0f\t\n", r.store, r.workflows, r.wall.Seconds(),
			float64(r.workflows)/r.wall.Seconds(), r.cpu.Seconds(), mb(r.rssBefore), mb(r.peak), mb(r.after), r.changed, r.seedRate)
	}
	tw.Flush()
}
