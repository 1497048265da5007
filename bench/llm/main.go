// Command llm benchmarks LLM workflows held in flight at once: through the
// real server binary (built from ./cmd/agentplane and started as its own
// process, SQLite by default) it invokes n workflows of an agent with one
// plan step at the same moment; a scripted model on loopback, speaking Chat
// Completions, answers each completion after -latency: the first asks for
// one tool call (a GET to a loopback service), the second answers. So each
// workflow makes two completions and one tool call, and all n wait on the
// model together.
//
//	go run ./bench/llm [-n 5000] [-latency 1s] [-store sqlite|postgres|both] [-async] [-sync=false] [-invoke-conns N] [-h2c] [-warm] [-cpuprofile FILE] [-heapprofile FILE]
//
// It reports the orchestration overhead per completion — a workflow's time
// from invoke to answer less the time the model took, over its two
// completions — at p50 and p99, the gap between a completion's answer and
// the workflow's next completion request (recording the answer, the tool
// call, building the next request), the most workflows in flight at one
// instant (from the model's getting a workflow's first completion request
// to the workflow's end), the server's peak RSS and goroutines,
// the model server's connections (the most open at once, and all it
// accepted) and the wall time of all n against the ideal (latency ×
// completions). The server runs with --max-running n, so no workflow
// queues.
//
// With -h2c the scripted model speaks unencrypted HTTP/2 only and the
// server asks it with --llm-http2-prior-knowledge: the completions in
// flight share a few connections instead of one each.
//
// With -warm an unmeasured burst of n workflows comes first, so the
// measured one finds the memory a server past its first burst holds: on a
// host whose page faults are dear, a fresh server's first burst pays for
// every page it touches (the table's page faults per workflow say how many).
//
// With -async each size is measured a second time with invokes that ask
// for Prefer: respond-async: the client's connection ends at the 202, and a
// workflow's end is its finished_at, read once all have ended, so the
// server holds no client connection for a workflow in flight. -sync=false
// leaves the synchronous rounds out, and -invoke-conns N has the
// asynchronous invokes share at most N connections to the server (they are
// still all sent at once; each waits for a free connection in this
// process). Together with -h2c they need a few sockets per connection
// rather than three per workflow at each end, which is how a burst of
// 20,000 fits a machine that allows each process 20,000 open files.
package main

import (
	"cmp"
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
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/bench/internal/scripted"
	"golang.org/x/sync/errgroup"
)

const tokenScopes = "tools:write agents:write agents:invoke workflows:read tool:*"

type options struct {
	stores      []string
	sizes       []int
	latency     time.Duration
	databaseURL string
	repo        string
	binary      string
	limit       time.Duration
	// async adds a round of asynchronous invokes to each size; sync
	// false leaves out the synchronous one.
	async, sync bool
	// invokeConns, when not 0, is the most connections the asynchronous
	// invokes share.
	invokeConns int
	// warm runs an unmeasured burst of n workflows before the measured one.
	warm bool
	// h2c has the model speak unencrypted HTTP/2 (prior knowledge).
	h2c bool
	// cpuProfile, when set, receives the server's CPU profile of the
	// in-flight phase, for profileFor (2 × latency when 0).
	cpuProfile string
	profileFor time.Duration
	// heapProfile, when set, receives the server's heap profile as the
	// model gets the last workflow's first completion request.
	heapProfile string
}

func main() { benchserver.Main("bench/llm", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/llm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	sizes := fs.String("n", "5000", "comma-separated numbers of workflows in flight at once (each at most 20,000)")
	latency := fs.Duration("latency", time.Second, "how long the scripted model takes to answer")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 5*time.Minute, "time limit of one size")
	cpuProfile := fs.String("cpuprofile", "", "write the server's CPU profile while the workflows are in flight to this file (go tool pprof reads it)")
	profileFor := fs.Duration("profile-for", 0, "how long the CPU profile lasts from the burst's start, in whole seconds (default 2 × -latency; a burst of 5,000 lasts longer)")
	heapProfile := fs.String("heapprofile", "", "write the server's heap profile, taken as the model gets the last workflow's first completion request, to this file (go tool pprof reads it)")
	async := fs.Bool("async", false, "measure each size also with asynchronous invokes (Prefer: respond-async)")
	warm := fs.Bool("warm", false, "run an unmeasured burst of as many workflows first, so that the measured one finds the server's memory and connections as a server past its first burst has them (the default measures a fresh server's first burst)")
	h2c := fs.Bool("h2c", false, "serve the scripted model with unencrypted HTTP/2 only and start the server with --llm-http2-prior-knowledge")
	syncInvokes := fs.Bool("sync", true, "measure each size with synchronous invokes (-sync=false with -async: the asynchronous ones alone)")
	invokeConns := fs.Int("invoke-conns", 0, "with -async: the asynchronous invokes, all sent at once, share at most this many connections to the server (0: a connection each)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{latency: *latency, repo: *repo, binary: *binary, limit: *limit, cpuProfile: *cpuProfile, profileFor: *profileFor, heapProfile: *heapProfile, async: *async, sync: *syncInvokes,
		invokeConns: *invokeConns, warm: *warm, h2c: *h2c}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 20000 {
			return options{}, fmt.Errorf("-n: %q is not a number of workflows from 1 to 20000", f)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.latency <= 0 || o.limit <= 0 {
		return options{}, errors.New("-latency and -limit must be positive")
	}
	switch {
	case !o.sync && !o.async:
		return options{}, errors.New("-sync=false leaves nothing to measure: add -async")
	case o.invokeConns < 0:
		return options{}, errors.New("-invoke-conns must be 0 (a connection per invoke) or more")
	case o.invokeConns > 0 && !o.async:
		return options{}, errors.New("-invoke-conns applies to asynchronous invokes: add -async")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// result is one size's figures.
type result struct {
	store          string
	n              int
	async          bool
	overhead50     time.Duration // per completion
	overhead99     time.Duration
	gap50, gap99   time.Duration
	wall, ideal    time.Duration
	peakRSS        int64
	cpuPerWorkflow time.Duration
	// faultsPerWorkflow is the server's minor page faults per workflow.
	faultsPerWorkflow float64
	peakGoroutines    int
	// peakInFlight is the most workflows at once between the model
	// getting their first completion request and their end.
	peakInFlight      int
	completions, tool int64
	// modelConns is the most connections to the model open at once,
	// modelAccepted all the model accepted.
	modelConns, modelAccepted int
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "llm", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var rs []result
	for _, store := range o.stores {
		for _, n := range o.sizes {
			for _, async := range []bool{false, true} {
				if async && !o.async || !async && !o.sync {
					continue
				}
				r, err := measure(ctx, o, bin, fmt.Sprintf("%s/%s-%d-%t", tmp, store, n, async), store, n, async, stderr)
				if err != nil {
					printTable(stdout, o, rs)
					return fmt.Errorf("%s, %d workflows (async %t): %w", store, n, async, err)
				}
				rs = append(rs, r)
			}
		}
	}
	printTable(stdout, o, rs)
	return nil
}

func measure(ctx context.Context, o options, bin, data, store string, n int, async bool, stderr io.Writer) (res result, err error) {
	res = result{store: store, n: n, async: async, ideal: 2 * o.latency}
	if _, err := benchserver.RaiseFileLimit(fileNeed(o, n, async)); err != nil {
		return res, fmt.Errorf("%d workflows at once: %w", n, err)
	}
	world, stop, err := scripted.Start(ctx, bin, data, store, o.databaseURL, n, o.latency, o.h2c, tokenScopes)
	if err != nil {
		return res, err
	}
	if async && o.invokeConns > 0 {
		// Every request of the round shares them, the warm-up's
		// synchronous invokes too, so that burst fits fileNeed as well.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost, t.MaxIdleConns = o.invokeConns, o.invokeConns, o.invokeConns
		world.Server.HTTP = &http.Client{Transport: t}
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	srv, m, things, debugAddr := world.Server, world.Model, world.Things, world.DebugAddr
	dep := map[string]any{"name": "bench", "version": "1", "definition": json.RawMessage(scripted.PlanAgent)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
		return res, fmt.Errorf("deploy bench@1: %d %s %v", st, body, err)
	}
	// One workflow first, so the figures hold no first-use costs.
	if err := invoke(ctx, srv, "w99999999"); err != nil {
		return res, err
	}
	if o.warm {
		fmt.Fprintf(stderr, "%s: an unmeasured burst of %d workflows, to warm the server …\n", store, n)
		var g errgroup.Group
		for i := range n {
			g.Go(func() error { return invoke(ctx, srv, "w"+strconv.Itoa(1_000_000+i)) })
		}
		if err := g.Wait(); err != nil {
			return res, fmt.Errorf("warm-up burst: %w", err)
		}
	}
	m.Reset()
	things.Reset()
	world.ModelConns.ResetPeak()
	if err := srv.ResetPeakRSS(); err != nil {
		return res, err
	}

	ctx, cancel := context.WithTimeout(ctx, o.limit)
	defer cancel()
	stopSampling := benchserver.PeakGoroutines(ctx, srv, o.latency/5)
	profiled := make(chan error, 1)
	if o.cpuProfile != "" {
		go func() {
			profiled <- benchserver.CPUProfile(ctx, debugAddr, cmp.Or(o.profileFor, 2*o.latency), o.cpuProfile)
		}()
	} else {
		profiled <- nil
	}
	heaped := make(chan error, 1)
	if o.heapProfile != "" {
		go func() {
			for m.Requests() < int64(n) && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			heaped <- benchserver.HeapProfile(ctx, debugAddr, o.heapProfile)
		}()
	} else {
		heaped <- nil
	}
	fmt.Fprintf(stderr, "%s: %d LLM workflows at once (async %t), the model answering after %s …\n", store, n, async, o.latency)
	sent := make([]time.Time, n)
	done := make([]time.Time, n)
	ids := make([]string, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	cpuBefore := srv.CPU()
	faultsBefore := srv.MinorFaults()
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			sent[i] = time.Now()
			var err error
			if async {
				ids[i], err = invokeAsync(ctx, srv, "w"+strconv.Itoa(i))
			} else {
				err = invoke(ctx, srv, "w"+strconv.Itoa(i))
			}
			done[i] = time.Now()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if async && firstErr == nil {
		firstErr = allEnded(ctx, srv, m, n, o.latency)
	}
	res.wall = time.Since(start)
	res.cpuPerWorkflow = (srv.CPU() - cpuBefore) / time.Duration(n)
	res.faultsPerWorkflow = float64(srv.MinorFaults()-faultsBefore) / float64(n)
	res.peakGoroutines = stopSampling()
	res.peakRSS = srv.PeakRSS()
	res.modelConns, res.modelAccepted = world.ModelConns.Peak()
	if firstErr != nil {
		return res, firstErr
	}
	if err := errors.Join(<-profiled, <-heaped); err != nil {
		return res, err
	}
	if async {
		if err := finishedAt(ctx, srv, ids, done); err != nil {
			return res, err
		}
	}
	res.completions, res.tool = m.Requests(), things.Calls()
	if res.completions != int64(2*n) || res.tool != int64(n) {
		return res, fmt.Errorf("the model answered %d completions and the tool %d calls; want %d and %d", res.completions, res.tool, 2*n, n)
	}
	var overheads, gaps, heads, tails []time.Duration
	firsts := make([]time.Time, n)
	for i := range n {
		t := m.Times("w" + strconv.Itoa(i))
		if len(t) != 4 {
			return res, fmt.Errorf("workflow w%d made %d completions, want 2", i, len(t)/2)
		}
		modelTime := t[1].Sub(t[0]) + t[3].Sub(t[2])
		firsts[i] = t[0]
		overheads = append(overheads, (done[i].Sub(sent[i])-modelTime)/2)
		gaps = append(gaps, t[2].Sub(t[1]))
		heads = append(heads, t[0].Sub(sent[i]))
		tails = append(tails, done[i].Sub(t[3]))
	}
	res.overhead50, res.overhead99 = percentile(overheads, 0.50), percentile(overheads, 0.99)
	res.gap50, res.gap99 = percentile(gaps, 0.50), percentile(gaps, 0.99)
	res.peakInFlight = peakInFlight(firsts, done)
	fmt.Fprintf(stderr, "%s: invoke→first request p50 %s p99 %s; last answer→response p50 %s p99 %s\n", store,
		ms(percentile(heads, 0.5)), ms(percentile(heads, 0.99)), ms(percentile(tails, 0.5)), ms(percentile(tails, 0.99)))
	return res, srv.Exited()
}

// fileNeed is about how many open files a size needs in this process and
// in the server, which inherits the limit. A synchronous workflow in
// flight holds its invoke's socket, the model's end of its completion's and
// the tool's end of its call's in this process, and as many in the server:
// the burst's calls come together, as its first answers do. Asynchronous
// invokes hold theirs only until the 202, or share invokeConns, and are let
// in over the burst, their calls with them: counted as many as the
// invokes' connections. Over h2c the completions share a connection per
// 250 streams (Go's default limit). The rest (the store's files, the
// listeners, idle connections) fits in the 1,024 over.
func fileNeed(o options, n int, async bool) uint64 {
	invokes := n
	if async && o.invokeConns > 0 {
		invokes = min(n, o.invokeConns)
	}
	completions := n
	if o.h2c {
		completions = n/250 + 1
	}
	return uint64(2*invokes + completions + 1024)
}

// invoke runs the agent on thing id synchronously and checks its answer.
func invoke(ctx context.Context, srv *benchserver.Server, id string) error {
	st, body, err := srv.Do(ctx, "POST", "/v1/agents/bench/invoke", map[string]any{"goal": "bench", "context": map[string]any{"id": id}})
	if err != nil {
		return err
	}
	var wf struct {
		Outcome string `json:"outcome"`
		Output  string `json:"output"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &wf) != nil || wf.Outcome != "answered" || wf.Output != "done: "+id {
		return fmt.Errorf("invoke %s: %d %.400s; want 200, answered, with output %q", id, st, body, "done: "+id)
	}
	return nil
}

// invokeAsync starts the agent on thing id asynchronously and returns its
// workflow's id.
func invokeAsync(ctx context.Context, srv *benchserver.Server, id string) (string, error) {
	st, body, err := srv.DoHeader(ctx, srv.Token, "POST", "/v1/agents/bench/invoke", http.Header{"Prefer": {"respond-async"}},
		map[string]any{"goal": "bench", "context": map[string]any{"id": id}})
	if err != nil {
		return "", err
	}
	var wf struct {
		ID string `json:"workflow_id"`
	}
	if st != http.StatusAccepted || json.Unmarshal(body, &wf) != nil || wf.ID == "" {
		return "", fmt.Errorf("invoke %s asynchronously: %d %.400s; want 202 with the workflow's id", id, st, body)
	}
	return wf.ID, nil
}

// allEnded waits until the model has answered every completion and no
// workflow of the agent is running, asking the server once every
// latency/20 (at least 20 ms) only after the last completion.
func allEnded(ctx context.Context, srv *benchserver.Server, m *scripted.Model, n int, latency time.Duration) error {
	tick := time.NewTicker(max(latency/20, 20*time.Millisecond))
	defer tick.Stop()
	for {
		if m.Requests() >= int64(2*n) {
			st, body, err := srv.Do(ctx, "GET", "/v1/workflows?agent=bench&status=running&limit=1", nil)
			if err != nil {
				return err
			}
			var list struct {
				Workflows []json.RawMessage `json:"workflows"`
			}
			if st != http.StatusOK || json.Unmarshal(body, &list) != nil {
				return fmt.Errorf("list running workflows: %d %.300s", st, body)
			}
			if len(list.Workflows) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the workflows to end: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// finishedAt reads each workflow's end into done and checks its answer.
func finishedAt(ctx context.Context, srv *benchserver.Server, ids []string, done []time.Time) error {
	var g errgroup.Group
	g.SetLimit(32)
	for i, id := range ids {
		g.Go(func() error {
			st, body, err := srv.Do(ctx, "GET", "/v1/workflows/"+id, nil)
			if err != nil {
				return err
			}
			var wf struct {
				Outcome    string    `json:"outcome"`
				Output     string    `json:"output"`
				FinishedAt time.Time `json:"finished_at"`
			}
			want := "done: w" + strconv.Itoa(i)
			if st != http.StatusOK || json.Unmarshal(body, &wf) != nil || wf.Outcome != "answered" || wf.Output != want || wf.FinishedAt.IsZero() {
				return fmt.Errorf("workflow %s: %d %.400s; want answered, with output %q", id, st, body, want)
			}
			done[i] = wf.FinishedAt
			return nil
		})
	}
	return g.Wait()
}

// peakInFlight is the most of the intervals [starts[i], ends[i]) that
// overlap at one instant.
func peakInFlight(starts, ends []time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(starts))
	for i := range starts {
		edges = append(edges, edge{starts[i], 1}, edge{ends[i], -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		// An end before a start at the same instant: they do not overlap.
		return cmp.Or(a.at.Compare(b.at), a.delta-b.delta)
	})
	peak, now := 0, 0
	for _, e := range edges {
		now += e.delta
		peak = max(peak, now)
	}
	return peak
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func printTable(w io.Writer, o options, rs []result) {
	if len(rs) == 0 {
		return
	}
	proto := "HTTP/1.1"
	if o.h2c {
		proto = "unencrypted HTTP/2 (--llm-http2-prior-knowledge)"
	}
	fmt.Fprintf(w, "LLM workflows in flight at once; the scripted model answers after %s over %s; 2 completions + 1 tool call each\n", o.latency, proto)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tinvoke\tworkflows\toverhead/completion p50\tp99\tanswer→next request p50\tp99\twall\tideal\twall/ideal\tpeak in flight\tpeak RSS MB\tpeak goroutines\tserver CPU/workflow\tmodel conns peak\taccepted\tpage faults/workflow\t")
	for _, r := range rs {
		invoke := "sync"
		if r.async {
			invoke = "async"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t%.0f\t%d\t%s\t%d\t%d\t%.0f\t\n", r.store, invoke, r.n,
			ms(r.overhead50), ms(r.overhead99), ms(r.gap50), ms(r.gap99),
			r.wall.Round(10*time.Millisecond), r.ideal, float64(r.wall)/float64(r.ideal), r.peakInFlight, float64(r.peakRSS)/(1<<20), r.peakGoroutines,
			fmt.Sprintf("%.2f ms", float64(r.cpuPerWorkflow)/float64(time.Millisecond)), r.modelConns, r.modelAccepted, r.faultsPerWorkflow)
	}
	tw.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
