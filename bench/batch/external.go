package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/bench/internal/scripted"
	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"golang.org/x/sync/errgroup"
)

// The external mode (-external) replays n recorded workflows of an
// external agent against a version of it with other instructions, through
// the real server binary, with every completion requested live. The agent
// is the Go recipe (examples/external/go-agent/goagent), served by this
// process as bench/gateway serves it: per run it opens an MCP session with
// the gateway, asks the model (the server-wide model: scripted, on
// loopback, answering after -model-delay) for a completion, makes the call
// the model asks for through the gateway (served from the record: the
// things service must see none), and asks for a second completion. It
// prints the batch's wall time against the ideal: rounds of concurrency
// replays, two completions each, times the delay.

const externalScopes = "tools:write agents:write agents:invoke workflows:read workflows:replay tool:*"

// The target's instructions: the model's answer does not depend on them.
const externalInstructions = "Read the thing, then say done in as few words as you can."

// externalResult is one store's external batch.
type externalResult struct {
	store              string
	workflows, changed int
	seedRate           float64
	wall, ideal        time.Duration
	rounds             int
	cpu                time.Duration
	peak               int64
	completions        int64
	// Where a replay's time goes beside its two completions, each the
	// median: setup from the agent's invocation to its first completion
	// (its MCP session with the gateway), between from the first answer
	// to the second request (its call served from the record), teardown
	// from the second answer to the agent's answer (closing the session);
	// outside is the mean time per replay the agent was not invoked
	// (loading the original, diffing and storing the replay, checks).
	setup, between, teardown, outside time.Duration
}

func runExternal(ctx context.Context, o options, stdout, stderr io.Writer) error {
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "batch-external", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	// The recipe sends its requests with the default transport, as an
	// agent of its kind would; let it keep a connection per replay in
	// flight (the default keeps 2 idle a host).
	orig := http.DefaultTransport
	base := orig.(*http.Transport).Clone()
	base.MaxIdleConns, base.MaxIdleConnsPerHost = 4*o.concurrency+64, 2*o.concurrency+32
	http.DefaultTransport = base
	defer func() { base.CloseIdleConnections(); http.DefaultTransport = orig }()

	var rs []externalResult
	for _, store := range o.stores {
		r, err := measureExternal(ctx, o, bin, tmp+"/"+store, store, stderr)
		if err != nil {
			printExternal(stdout, o, rs)
			return fmt.Errorf("%s: %w", store, err)
		}
		rs = append(rs, r)
	}
	printExternal(stdout, o, rs)
	return nil
}

func measureExternal(ctx context.Context, o options, bin, data, store string, stderr io.Writer) (r externalResult, err error) {
	v1 := httptest.NewServer(goagent.Handler("default", 4))
	defer v1.Close()
	target := &timedAgent{Handler: goagent.NewHandler(goagent.Options{Model: "default", MaxTurns: 4, Instructions: externalInstructions}),
		times: map[string][2]time.Time{}}
	v2 := httptest.NewServer(target)
	defer v2.Close()
	world, stop, err := scripted.Start(ctx, bin, data, store, o.databaseURL, max(o.seedConc, o.concurrency), 0, false, externalScopes)
	if err != nil {
		return r, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	srv := world.Server
	for v, url := range []string{v1.URL, v2.URL} {
		dep := map[string]any{"name": "triage", "version": strconv.Itoa(v + 1), "promote": v == 0,
			"external": map[string]any{"url": url, "tools": []string{"svc"}, "models": []string{"default"}}}
		if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
			return r, fmt.Errorf("deploy triage@%d: %d %s %v", v+1, st, body, err)
		}
	}
	r = externalResult{store: store, workflows: o.n}
	fmt.Fprintf(stderr, "%s: recording %d workflows of the external agent …\n", store, o.n)
	if r.seedRate, err = seedExternal(ctx, srv, o.n, o.seedConc, o.limit); err != nil {
		return r, err
	}

	world.Model.SetLatency(o.modelDelay)
	world.Model.Reset()
	world.Things.Reset()
	_ = srv.ResetPeakRSS()
	cpu0 := srv.CPU()
	start := time.Now()
	st, body, err := srv.Do(ctx, "POST", "/v1/replay-batches", map[string]any{"target_agent_version": "triage@2",
		"workflows": map[string]any{"agent": "triage", "limit": o.n}, "llm": "live", "concurrency": o.concurrency})
	if err != nil || st != http.StatusAccepted {
		return r, fmt.Errorf("create batch: %d %s %v", st, body, err)
	}
	var b batch
	if err := json.Unmarshal(body, &b); err != nil {
		return r, err
	}
	fmt.Fprintf(stderr, "%s: replaying %d workflows as batch %s at concurrency %d, the model answering after %s …\n",
		store, b.Total, b.ID, o.concurrency, o.modelDelay)
	if o.cpuProfile != "" {
		stopProfiles, err := profileBatch(ctx, world.DebugAddr, time.Duration((o.n+o.concurrency-1)/o.concurrency)*2*o.modelDelay, o.cpuProfile+"."+store)
		if err != nil {
			return r, err
		}
		defer stopProfiles()
	}
	for deadline := time.Now().Add(o.limit); b.Status == "running"; {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("batch still running after %s: %d of %d done", o.limit, b.Done, b.Total)
		}
		if err := srv.Exited(); err != nil {
			return r, err
		}
		// As often as the CLI asks: a batch's document sums its
		// replays' usage, a scan of them all, so a tighter poll would
		// measure the poll (the time is the server's own, below).
		time.Sleep(250 * time.Millisecond)
		st, body, err := srv.Do(ctx, "GET", "/v1/replay-batches/"+b.ID, nil)
		if err != nil || st != http.StatusOK {
			return r, fmt.Errorf("get batch: %d %s %v", st, body, err)
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return r, err
		}
	}
	r.cpu, r.wall = srv.CPU()-cpu0, time.Since(start)
	if b.FinishedAt != nil {
		r.wall = b.FinishedAt.Sub(b.CreatedAt)
	}
	r.peak, r.changed, r.completions = srv.PeakRSS(), b.Changed, world.Model.Requests()
	r.rounds = (o.n + o.concurrency - 1) / o.concurrency
	r.ideal = time.Duration(r.rounds) * 2 * o.modelDelay
	if b.Status != "completed" || b.Done != o.n || b.Total != o.n {
		return r, fmt.Errorf("batch %s ended %s with %d of %d (want %d) replayed: %s", b.ID, b.Status, b.Done, b.Total, o.n, b.Error)
	}
	var between, setup, teardown benchserver.Latencies
	var span time.Duration
	for i := 1; i <= o.n; i++ {
		id := "w" + strconv.Itoa(i)
		t, in := world.Model.Times(id), target.at(id)
		if len(t) != 4 || in[0].IsZero() || in[1].IsZero() {
			return r, fmt.Errorf("the model answered w%d's replay %d times, want 2", i, len(t)/2)
		}
		between = append(between, t[2].Sub(t[1]))
		setup, teardown = append(setup, t[0].Sub(in[0])), append(teardown, in[1].Sub(t[3]))
		span += in[1].Sub(in[0])
	}
	r.between, r.setup, r.teardown = between.P(50), setup.P(50), teardown.P(50)
	r.outside = (r.wall*time.Duration(o.concurrency) - span) / time.Duration(o.n)
	if calls := world.Things.Calls(); calls != 0 {
		return r, fmt.Errorf("the dry batch sent %d calls to the things service", calls)
	}
	if r.completions != int64(2*o.n) {
		return r, fmt.Errorf("the model got %d requests for %d replays of two completions", r.completions, o.n)
	}
	return r, srv.Exited()
}

// timedAgent notes when each run (its goal's w<n>) was invoked and
// answered.
type timedAgent struct {
	http.Handler
	mu    sync.Mutex
	times map[string][2]time.Time
}

var runID = regexp.MustCompile(`w[0-9]+`)

func (a *timedAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var inv goagent.Invocation
	_ = json.Unmarshal(body, &inv)
	id := runID.FindString(inv.Goal)
	r.Body = io.NopCloser(bytes.NewReader(body))
	a.Handler.ServeHTTP(w, r)
	a.mu.Lock()
	a.times[id] = [2]time.Time{in, time.Now()}
	a.mu.Unlock()
}

func (a *timedAgent) at(id string) [2]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.times[id]
}

// profileBatch profiles the server (its --debug-addr is addr) for d into
// file, and this process into file+".agent" until stop is called.
func profileBatch(ctx context.Context, addr string, d time.Duration, file string) (stop func(), err error) {
	f, err := os.Create(file + ".agent")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	server := make(chan error, 1)
	go func() { server <- benchserver.CPUProfile(ctx, addr, d, file) }()
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if err := <-server; err != nil {
			fmt.Fprintln(os.Stderr, "server profile:", err)
		}
	}, nil
}

// seedExternal records n workflows of triage@1, conc at a time, and
// returns their rate.
func seedExternal(ctx context.Context, srv *benchserver.Server, n, conc int, limit time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var next atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range conc {
		g.Go(func() error {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				id := "w" + strconv.FormatInt(i, 10)
				st, body, err := srv.Do(ctx, "POST", "/v1/agents/triage@1/invoke", map[string]any{"goal": "thing " + id, "context": map[string]any{"id": id}})
				if err != nil {
					return err
				}
				if st != http.StatusOK {
					return fmt.Errorf("invoke: %d %.300s", st, body)
				}
				var wf struct {
					Outcome string `json:"outcome"`
				}
				if json.Unmarshal(body, &wf) != nil || wf.Outcome != "answered" {
					return fmt.Errorf("workflow of %s: %.300s", id, body)
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

func printExternal(w io.Writer, o options, rs []externalResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "external batch: %d workflows of the Go agent, 2 live completions each, concurrency %d, model delay %s\n",
		o.n, o.concurrency, o.modelDelay)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tworkflows\twall s\tideal s\twall/ideal\tsetup ms\tbetween ms\tteardown ms\toutside ms\tworkflows/s\tserver CPU s\tpeak RSS MB\tcompletions\tchanged\tseeding wf/s\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%.0f\t%.2f\t%.0f\t%d\t%d\t%.0f\t\n", r.store, r.workflows, r.wall.Seconds(), r.ideal.Seconds(),
			r.wall.Seconds()/r.ideal.Seconds(), ms(r.setup), ms(r.between), ms(r.teardown), ms(r.outside), float64(r.workflows)/r.wall.Seconds(), r.cpu.Seconds(), float64(r.peak)/(1<<20),
			r.completions, r.changed, r.seedRate)
	}
	tw.Flush()
}
