// Command retention benchmarks the retention sweep: it seeds a store with
// finished workflows past the retention (each with three steps), measures
// the invoke latency of bench/invoke's agent on the real server binary
// without a sweep, then restarts the server with --retention so that it
// sweeps them, and measures the same load while it does, and the sweep's
// rate, on SQLite and on PostgreSQL.
//
//	go run ./bench/retention [-store sqlite|postgres|both] [-n 100000] [-c 8] [-baseline 30s] [-share 0.1]
//
// PostgreSQL runs in a fresh database created on the server named by
// -database-url (default $AGENTPLANE_TEST_DATABASE_URL, else a local one) and
// dropped at the end.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/bench/internal/invokeload"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

const tokenScopes = "tools:write agents:write agents:invoke workflows:read tool:*"

func main() { benchserver.Main("bench/retention", run) }

type options struct {
	stores      []string
	n           int
	conc        int
	baseline    time.Duration
	limit       time.Duration
	share       float64
	databaseURL string
	repo        string
	binary      string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/retention", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 100_000, "expired workflows to seed and sweep")
	conc := fs.Int("c", 8, "concurrent invocations of the load")
	baseline := fs.Duration("baseline", 30*time.Second, "how long the load runs without a sweep")
	limit := fs.Duration("limit", 15*time.Minute, "longest the sweep may take")
	share := fs.Float64("share", 0, "the server's --retention-share (0: its default)")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{n: *n, conc: *conc, baseline: *baseline, limit: *limit, share: *share, repo: *repo, binary: *binary}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.n < 1 || o.conc < 1 || o.conc > 256 || o.baseline <= 0 || o.limit <= 0 || o.share < 0 || o.share > 1 {
		return options{}, errors.New("-n must be positive, -c from 1 to 256, -baseline and -limit positive, -share from 0 to 1")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "retention", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	svc := invokeload.StartToolService()
	defer svc.Close()
	if o.share > 0 {
		fmt.Fprintf(stdout, "--retention-share %g\n", o.share)
	} else {
		fmt.Fprintln(stdout, "--retention-share: the server's default")
	}
	var results []result
	for _, store := range o.stores {
		r, err := measure(ctx, o, bin, tmp+"/"+store, store, svc, stderr)
		if r.deletedWorkflows > 0 || len(r.base) > 0 {
			results = append(results, r) // what was measured, even when it failed
		}
		if err != nil {
			printTable(stdout, results)
			return fmt.Errorf("%s: %w", store, err)
		}
	}
	printTable(stdout, results)
	return nil
}

// result is one store's measurement.
type result struct {
	store            string
	seeded           int
	seed, sweep      time.Duration
	base, during     []time.Duration
	errors           int
	firstError       string
	deletedWorkflows int64
}

func measure(ctx context.Context, o options, bin, data, store string, svc *invokeload.ToolService, stderr io.Writer) (_ result, err error) {
	res := result{store: store}
	sc := benchserver.Config{Binary: bin, Data: data}
	drop := func() error { return nil }
	if store == "postgres" {
		if sc.DatabaseURL, drop, err = benchserver.CreateDatabase(ctx, o.databaseURL); err != nil {
			return res, err
		}
	}
	defer func() { err = errors.Join(err, drop()) }()

	fmt.Fprintf(stderr, "%s: seeding %d expired workflows …\n", store, o.n)
	t0 := time.Now()
	if err := seed(ctx, sc, o.n); err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}
	res.seed, res.seeded = time.Since(t0), o.n

	// Without a sweep.
	srv, err := benchserver.Start(ctx, sc)
	if err != nil {
		return res, err
	}
	hc := client(o.conc)
	srv.HTTP = hc
	if err := srv.MintToken(ctx, tokenScopes); err != nil {
		srv.Stop()
		return res, err
	}
	if err := invokeload.Setup(ctx, srv, svc); err != nil {
		srv.Stop()
		return res, err
	}
	fmt.Fprintf(stderr, "%s: load without a sweep for %s …\n", store, o.baseline)
	stopAt := time.Now().Add(o.baseline)
	base := load(ctx, hc, srv, o.conc, func() bool { return time.Now().After(stopAt) })
	srv.Stop()
	res.base = base.lat
	res.errors, res.firstError = base.errors, base.firstError

	// With the sweep: a retention of a day and the first pass a second
	// after start.
	sc.Args = []string{"--retention", "24h", "--retention-interval", "1s"}
	if o.share > 0 {
		sc.Args = append(sc.Args, "--retention-share", strconv.FormatFloat(o.share, 'g', -1, 64))
	}
	srv, err = benchserver.Start(ctx, sc)
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	srv.HTTP = hc
	if err := srv.MintToken(ctx, tokenScopes); err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "%s: load while the sweep deletes %d workflows …\n", store, o.n)
	start := time.Now()
	var done atomic.Bool
	var wg sync.WaitGroup
	var during loadResult
	wg.Go(func() { during = load(ctx, hc, srv, o.conc, done.Load) })
	deadline := start.Add(o.limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, err := deletedWorkflows(ctx, hc, srv)
		if err != nil {
			done.Store(true)
			wg.Wait()
			return res, err
		}
		res.deletedWorkflows = n
		if n >= int64(o.n) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.sweep = time.Since(start)
	done.Store(true)
	wg.Wait()
	res.during = during.lat
	res.errors += during.errors
	if res.firstError == "" {
		res.firstError = during.firstError
	}
	if res.deletedWorkflows != int64(o.n) {
		return res, fmt.Errorf("the sweep deleted %d workflows, want %d (in %s)", res.deletedWorkflows, o.n, res.sweep)
	}
	if res.errors > 0 {
		return res, fmt.Errorf("%d invocations failed (first: %s)", res.errors, res.firstError)
	}
	return res, srv.Exited()
}

func client(conc int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conc*2, conc*2
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// seed writes n workflows that finished thirty days ago, three steps each,
// through the store itself, before the server starts.
func seed(ctx context.Context, sc benchserver.Config, n int) error {
	type store interface {
		workflow.Store
		Close() error
	}
	var (
		st  store
		err error
	)
	if sc.DatabaseURL != "" {
		st, err = postgres.Open(ctx, sc.DatabaseURL)
	} else {
		st, err = sqlite.Open(ctx, sc.Data+"/agentplane.db")
	}
	if err != nil {
		return err
	}
	defer st.Close()
	finished := time.Now().Add(-30 * 24 * time.Hour)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n) && ctx.Err() == nil; i = next.Add(1) {
				if err := seedOne(ctx, st, finished.Add(time.Duration(i)*time.Millisecond)); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(first, ctx.Err()); err != nil || sc.DatabaseURL == "" {
		return err
	}
	return analyze(ctx, sc.DatabaseURL)
}

// analyze gathers PostgreSQL's statistics of the seeded tables, as
// autovacuum would after a bulk load (the benchmark's server may run without
// it): the sweep's plans depend on them.
func analyze(ctx context.Context, databaseURL string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `ANALYZE`)
	return err
}

func seedOne(ctx context.Context, st workflow.Store, at time.Time) error {
	const owner = "bench-seed"
	w := &workflow.Workflow{
		ID: ids.New(ids.Workflow), Tenant: "bench", Agent: invokeload.AgentName, AgentVersion: "1",
		Status: workflow.Running, Goal: "seeded", Context: json.RawMessage(`{}`),
		Caller:       workflow.Caller{Sub: "bench", Tenant: "bench", Scopes: []string{"agents:invoke", "tool:*"}},
		MaxToolCalls: 10, StartedAt: at.Add(-time.Second), Deadline: at.Add(time.Minute),
		Owner: owner, LeaseUntil: time.Now().Add(time.Hour),
	}
	if err := st.CreateWorkflow(ctx, w, nil); err != nil {
		return err
	}
	steps := make([]workflow.StepWrite, invokeload.AgentSteps)
	for i := range steps {
		id := string(rune('a' + i))
		steps[i] = workflow.StepWrite{Step: &workflow.Step{
			WorkflowID: w.ID, Seq: i + 1, Step: i + 1, Action: "get_" + id, Kind: "call", Status: "ok",
			Tool: "svc", Operation: "getThing", Args: json.RawMessage(`{"id": "` + id + `"}`),
			Result:     json.RawMessage(`{"id": "` + id + `", "ok": true}`),
			Request:    json.RawMessage(`{"method": "GET", "url": "http://127.0.0.1/things/` + id + `"}`),
			HTTPStatus: 200, Attempts: 1, StartedAt: at.Add(-time.Second), DurationMS: 1, Sent: true,
		}}
	}
	if err := st.AppendSteps(ctx, owner, steps...); err != nil {
		return err
	}
	w.Status, w.Outcome, w.Output, w.FinishedAt = workflow.Completed, invokeload.AgentOutcome, json.RawMessage(`"done"`), at
	return st.FinishWorkflow(ctx, owner, w, nil)
}

// loadResult is the latencies of a load's invocations.
type loadResult struct {
	lat        []time.Duration
	errors     int
	firstError string
}

// load invokes the agent from conc goroutines until stop says so.
func load(ctx context.Context, hc *http.Client, srv *benchserver.Server, conc int, stop func() bool) loadResult {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		res loadResult
	)
	for range conc {
		wg.Go(func() {
			var lat []time.Duration
			var errs []error
			for !stop() && ctx.Err() == nil {
				t0 := time.Now()
				_, err := invokeload.Invoke(ctx, hc, srv)
				lat = append(lat, time.Since(t0))
				if err != nil {
					errs = append(errs, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.lat = append(res.lat, lat...)
			res.errors += len(errs)
			if len(errs) > 0 && res.firstError == "" {
				res.firstError = errs[0].Error()
			}
		})
	}
	wg.Wait()
	slices.Sort(res.lat)
	return res
}

// deletedWorkflows reads agentplane_retention_deleted_total{kind="workflows"}
// from the server's /metrics.
func deletedWorkflows(ctx context.Context, hc *http.Client, srv *benchserver.Server) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", srv.BaseURL()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `agentplane_retention_deleted_total{kind="workflows"} `); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, nil
}

// p is the q-th percentile of sorted latencies (nearest rank).
func p(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	i := int(float64(len(lat))*q/100+0.999999) - 1
	return lat[min(max(i, 0), len(lat)-1)]
}

func printTable(w io.Writer, rs []result) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tseeded\tseed s\tsweep s\tswept workflows/s\tinvokes alone\tp50 ms\tp99 ms\tinvokes during sweep\tp50 ms\tp99 ms\tp99 change\t")
	for _, r := range rs {
		change := "–"
		if b := p(r.base, 99); b > 0 && len(r.during) > 0 {
			change = fmt.Sprintf("%+.0f %%", (float64(p(r.during, 99))/float64(b)-1)*100)
		}
		rate := 0.0
		if r.sweep > 0 {
			rate = float64(r.deletedWorkflows) / r.sweep.Seconds()
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f\t%d\t%.2f\t%.2f\t%d\t%.2f\t%.2f\t%s\t\n", r.store, r.seeded,
			r.seed.Seconds(), r.sweep.Seconds(), rate, len(r.base), ms(p(r.base, 50)), ms(p(r.base, 99)),
			len(r.during), ms(p(r.during, 50)), ms(p(r.during, 99)), change)
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
