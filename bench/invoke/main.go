// Command invoke benchmarks workflows end to end: invocations per second and
// latency of an agent of three sequential tool calls, each an HTTP GET to a
// loopback service answering small JSON, through the real server binary
// (built from ./cmd/agentplane and started as its own process) with
// authentication, audit and history on, on SQLite and on PostgreSQL. It also
// measures the engine's own time per step, in process with an instant tool
// environment, as a ratio to one tool round trip.
//
//	go run ./bench/invoke [-store sqlite|postgres|both] [-n 2000] [-c 1,16] [-duration 2m]
//
// PostgreSQL runs in a fresh database created on the server named by
// -database-url (default $AGENTPLANE_TEST_DATABASE_URL, else a local one) and
// dropped at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

// tokenScopes are the scopes of the benchmark's token.
const tokenScopes = "tools:write agents:write agents:invoke workflows:read tool:*"

func main() { benchserver.Main("bench/invoke", run) }

// options are the benchmark's settings.
type options struct {
	stores      []string
	n           int
	levels      []int
	warmup      int
	duration    time.Duration
	databaseURL string
	repo        string
	engineRuns  int
	roundTrips  int
	// binary, when set, is a server binary already built.
	binary string
	// walDetail breaks each level's WAL records down by kind.
	walDetail bool
	// serverArgs are extra flags for the server, e.g. its pool sizes.
	serverArgs []string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 2000, "invocations per concurrency level")
	levels := fs.String("c", "1,16", "comma-separated concurrency levels")
	warmup := fs.Int("warmup", 200, "invocations before measuring, per store")
	duration := fs.Duration("duration", 2*time.Minute, "time limit of one concurrency level; it stops early when reached")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	engineRuns := fs.Int("engine-runs", 20000, "in-process engine runs for the per-step figure")
	roundTrips := fs.Int("round-trips", 5000, "plain GETs to the tool service for the round-trip figure")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	serverArgs := fs.String("server-args", "", "extra flags for the server, space-separated (e.g. \"--database-writers 2\")")
	walDetail := fs.Bool("wal-detail", false, "break PostgreSQL's WAL records per workflow down by kind (needs pg_walinspect)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{n: *n, warmup: *warmup, duration: *duration, repo: *repo,
		engineRuns: *engineRuns, roundTrips: *roundTrips, binary: *binary, walDetail: *walDetail}
	if f := strings.Fields(*serverArgs); len(f) > 0 {
		o.serverArgs = f
	}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	for _, f := range strings.Split(*levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 1024 {
			return options{}, fmt.Errorf("-c: %q is not a concurrency from 1 to 1024", f)
		}
		o.levels = append(o.levels, c)
	}
	if o.n < 1 || o.warmup < 0 || o.duration <= 0 || o.engineRuns < 1 || o.roundTrips < 1 {
		return options{}, errors.New("-n, -engine-runs and -round-trips must be positive, -warmup not negative, -duration positive")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "invoke", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	svc := startToolService()
	defer svc.Close()

	results, err := measureStores(ctx, o, bin, tmp, svc, stderr)
	// Whatever was measured is printed, even when a later store failed.
	printTable(stdout, results)
	printWALDetail(stdout, results)
	if err != nil {
		return err
	}
	eng, err := measureEngine(ctx, svc, o.engineRuns, o.roundTrips)
	if err != nil {
		return err
	}
	printEngine(stdout, eng)
	for _, r := range results {
		if r.errors > 0 {
			return fmt.Errorf("%s at concurrency %d: %d of %d invocations failed (first: %s)", r.store, r.concurrency, r.errors, r.count, r.firstError)
		}
	}
	return nil
}

// measureStores runs every concurrency level against a fresh server per store.
func measureStores(ctx context.Context, o options, bin, tmp string, svc *toolService, stderr io.Writer) ([]levelResult, error) {
	var results []levelResult
	for _, store := range o.stores {
		rs, err := measureStore(ctx, o, bin, tmp, store, svc, stderr)
		results = append(results, rs...)
		if err != nil {
			return results, fmt.Errorf("%s: %w", store, err)
		}
	}
	return results, nil
}

func measureStore(ctx context.Context, o options, bin, tmp, store string, svc *toolService, stderr io.Writer) (_ []levelResult, err error) {
	sc := benchserver.Config{Binary: bin, Data: tmp + "/" + store, Args: o.serverArgs}
	srv, stop, err := benchserver.StartOn(ctx, sc, store, o.databaseURL)
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
	cl := newClient(srv, maxOf(o.levels))
	if err := cl.setup(ctx, svc); err != nil {
		return nil, err
	}
	var wal *walProbe
	if store == "postgres" {
		if wal, err = openWALProbe(ctx, o.databaseURL, o.walDetail); err != nil {
			return nil, err
		}
		defer wal.Close()
	}
	fmt.Fprintf(stderr, "%s: warming up (%d invocations) …\n", store, o.warmup)
	if w := cl.load(ctx, store, o.warmup, maxOf(o.levels), o.duration, nil, nil); w.errors > 0 {
		return nil, fmt.Errorf("warm-up: %d of %d invocations failed (first: %s)", w.errors, w.count, w.firstError)
	}
	var out []levelResult
	for _, c := range o.levels {
		fmt.Fprintf(stderr, "%s: %d invocations at concurrency %d …\n", store, o.n, c)
		r := cl.load(ctx, store, o.n, c, o.duration, srv.CPU, wal)
		out = append(out, r)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	if err := cl.checkStored(ctx); err != nil {
		return out, err
	}
	if err := srv.Exited(); err != nil {
		return out, err
	}
	return out, nil
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func printTable(w io.Writer, rs []levelResult) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tconcurrency\tinvocations\tworkflows/s\tp50 ms\tp90 ms\tp99 ms\tserver CPU ms/wf\tload CPU ms/wf\tWAL records/wf\tWAL KiB/wf\terrors\t")
	perWorkflow := func(d time.Duration, n int) string {
		if d <= 0 || n == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000/float64(n))
	}
	for _, r := range rs {
		records, kib := "–", "–"
		if r.wal != nil && r.count > 0 {
			records = fmt.Sprintf("%.1f", float64(r.wal.records)/float64(r.count))
			kib = fmt.Sprintf("%.1f", float64(r.wal.bytes)/1024/float64(r.count))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%d\t\n", r.store, r.concurrency, r.count,
			r.throughput(), ms(r.p(50)), ms(r.p(90)), ms(r.p(99)), perWorkflow(r.serverCPU, r.count),
			perWorkflow(r.loadCPU, r.count), records, kib, r.errors)
	}
	tw.Flush()
}

func printEngine(w io.Writer, e engineResult) {
	fmt.Fprintf(w, "\nengine alone: %.1f µs per step (wall, %d runs of %d steps; CPU %.1f µs per step)\n",
		us(e.perStep), e.runs, e.steps, us(e.cpuPerStep))
	fmt.Fprintf(w, "tool round trip (plain GET, keep-alive): p50 %.1f µs (p99 %.1f µs, %d requests)\n",
		us(e.roundTripP50), us(e.roundTripP99), e.roundTrips)
	fmt.Fprintf(w, "engine per step / tool round trip: %.3f\n", float64(e.perStep)/float64(e.roundTripP50))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
