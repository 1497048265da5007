// Command approvals benchmarks workflows waiting for a person's approval:
// through the real server binary (built from ./cmd/agentplane and started as
// its own process) it starts n workflows whose first step asks for approval
// and whose second writes to a loopback tool service, so all n wait at once;
// it reports the server's resident memory and goroutine count before, while
// and after they wait, then approves them all as another subject than the
// invoker and checks that each workflow resumed, completed and wrote exactly
// once.
//
//	go run ./bench/approvals [-store sqlite|postgres|both] [-n 10000] [-concurrency 16]
//
// Goroutines are counted from the server's /metrics (go_goroutines).
// PostgreSQL runs in a fresh database created
// on the server named by -database-url (default
// $AGENTPLANE_TEST_DATABASE_URL, else a local one) and dropped at the end.
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
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

const (
	invokerScopes  = "tools:write agents:write agents:invoke workflows:read tool:*"
	approverScopes = "workflows:read workflows:approve"
)

type options struct {
	stores      []string
	n, conc     int
	databaseURL string
	repo        string
	binary      string
	limit       time.Duration
}

func main() { benchserver.Main("bench/approvals", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/approvals", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 10000, "workflows waiting at once (at most 100,000)")
	conc := fs.Int("concurrency", 16, "requests at once while invoking and approving")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 10*time.Minute, "time limit of each phase (invoking, approving, resuming)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{n: *n, conc: *conc, repo: *repo, binary: *binary, limit: *limit}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.n < 1 || o.n > 100000 || o.conc < 1 || o.conc > 256 || o.limit <= 0 {
		return options{}, errors.New("-n must be from 1 to 100000, -concurrency from 1 to 256, -limit positive")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// sample is the server's state at one point of the run.
type sample struct {
	store, phase string
	waiting      int
	rss          int64
	goroutines   int
	rate         float64 // requests per second of the phase that led here
}

// things is the tool service: it counts the writes each id receives.
type things struct {
	mu     sync.Mutex
	writes map[string]int
	total  atomic.Int64
}

func (t *things) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/things/")
	if r.Method == http.MethodPut {
		t.mu.Lock()
		t.writes[id]++
		t.mu.Unlock()
		t.total.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q,"ok":true}`, id)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "approvals", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var samples []sample
	for _, store := range o.stores {
		ss, err := measure(ctx, o, bin, tmp, store, stderr)
		samples = append(samples, ss...)
		if err != nil {
			printTable(stdout, samples)
			return fmt.Errorf("%s: %w", store, err)
		}
	}
	printTable(stdout, samples)
	return nil
}

func measure(ctx context.Context, o options, bin, tmp, store string, stderr io.Writer) (samples []sample, err error) {
	tool := &things{writes: make(map[string]int, o.n)}
	svc := httptest.NewServer(tool)
	defer svc.Close()
	sc := benchserver.Config{Binary: bin, Data: tmp + "/" + store}
	srv, stop, err := benchserver.StartOn(ctx, sc, store, o.databaseURL)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := srv.MintToken(ctx, invokerScopes); err != nil {
		return nil, err
	}
	approver, err := srv.MintTokenFor(ctx, "bench-approver", approverScopes)
	if err != nil {
		return nil, err
	}
	if err := setup(ctx, srv, svc.URL); err != nil {
		return nil, err
	}
	take := func(phase string, waiting int, rate float64) error {
		g, err := srv.Goroutines(ctx)
		if err != nil {
			return err
		}
		samples = append(samples, sample{store: store, phase: phase, waiting: waiting, rss: srv.RSS(), goroutines: g, rate: rate})
		return nil
	}
	if err := take("started", 0, 0); err != nil {
		return samples, err
	}

	// Invoke: each synchronous invoke answers as soon as its workflow waits.
	ids := make([]string, o.n)
	fmt.Fprintf(stderr, "%s: starting %d workflows that wait for approval …\n", store, o.n)
	checkpoint := min(1000, o.n)
	first, err := parallel(ctx, o, 0, checkpoint, stderr, "waiting", func(ctx context.Context, i int) error {
		return invoke(ctx, srv, i, ids)
	})
	if err != nil {
		return samples, err
	}
	if err := take(fmt.Sprintf("%d waiting", checkpoint), checkpoint, first); err != nil {
		return samples, err
	}
	if checkpoint < o.n {
		rest, err := parallel(ctx, o, checkpoint, o.n, stderr, "waiting", func(ctx context.Context, i int) error {
			return invoke(ctx, srv, i, ids)
		})
		if err != nil {
			return samples, err
		}
		if err := take(fmt.Sprintf("%d waiting", o.n), o.n, rest); err != nil {
			return samples, err
		}
	}
	if got := tool.total.Load(); got != 0 {
		return samples, fmt.Errorf("%d writes reached the tool before any approval", got)
	}

	// Approve them all as another subject; each decision resumes its workflow.
	fmt.Fprintf(stderr, "%s: approving %d workflows …\n", store, o.n)
	approveRate, err := parallel(ctx, o, 0, o.n, stderr, "approved", func(ctx context.Context, i int) error {
		st, body, err := srv.DoWith(ctx, approver, "POST", "/v1/workflows/"+ids[i]+"/approvals/sign_off",
			map[string]any{"decision": "approve", "comment": "bench"})
		if err == nil && st != http.StatusOK {
			err = fmt.Errorf("approve %s: %d %.300s", ids[i], st, body)
		}
		return err
	})
	if err != nil {
		return samples, err
	}
	deadline := time.Now().Add(o.limit)
	for tool.total.Load() < int64(o.n) {
		if time.Now().After(deadline) {
			return samples, fmt.Errorf("%d of %d workflows wrote after %s", tool.total.Load(), o.n, o.limit)
		}
		if err := srv.Exited(); err != nil {
			return samples, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Each workflow completed, and wrote once.
	if _, err := parallel(ctx, o, 0, o.n, io.Discard, "", func(ctx context.Context, i int) error {
		for {
			st, body, err := srv.Do(ctx, "GET", "/v1/workflows/"+ids[i], nil)
			if err != nil || st != http.StatusOK {
				return fmt.Errorf("get workflow %s: %d %.300s %v", ids[i], st, body, err)
			}
			var wf struct{ Status, Outcome string }
			if err := json.Unmarshal(body, &wf); err != nil {
				return err
			}
			if wf.Status == "completed" && wf.Outcome == "written" {
				return nil
			}
			if wf.Status != "running" {
				return fmt.Errorf("workflow %s ended %s (%s)", ids[i], wf.Status, wf.Outcome)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}); err != nil {
		return samples, err
	}
	if err := take("all approved, resumed", 0, approveRate); err != nil {
		return samples, err
	}
	tool.mu.Lock()
	defer tool.mu.Unlock()
	if len(tool.writes) != o.n {
		return samples, fmt.Errorf("%d distinct things written, want %d", len(tool.writes), o.n)
	}
	for id, n := range tool.writes {
		if n != 1 {
			return samples, fmt.Errorf("thing %s written %d times", id, n)
		}
	}
	return samples, srv.Exited()
}

// invoke starts workflow i synchronously and checks that it waits.
func invoke(ctx context.Context, srv *benchserver.Server, i int, ids []string) error {
	st, body, err := srv.Do(ctx, "POST", "/v1/agents/bench/invoke",
		map[string]any{"goal": "bench", "context": map[string]any{"id": "t" + strconv.Itoa(i)}})
	if err != nil {
		return err
	}
	var wf struct {
		WorkflowID string `json:"workflow_id"`
		Status     string `json:"status"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &wf) != nil || wf.Status != "waiting" {
		return fmt.Errorf("invoke: %d %.300s; want 200 with the workflow waiting", st, body)
	}
	ids[i] = wf.WorkflowID
	return nil
}

// parallel runs f for each i in [from, to), o.conc at a time, within o.limit,
// and returns the rate per second.
func parallel(ctx context.Context, o options, from, to int, progress io.Writer, what string, f func(context.Context, int) error) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, o.limit)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	next.Store(int64(from))
	start := time.Now()
	for range o.conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				if d := i + 1; what != "" && d%2000 == 0 {
					fmt.Fprintf(progress, "  %d %s\n", d, what)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(to-from) / time.Since(start).Seconds(), nil
}

// setup registers the tool service and deploys the agent.
func setup(ctx context.Context, srv *benchserver.Server, svcURL string) error {
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": fmt.Sprintf(benchserver.ThingSpec, svcURL)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	dep := map[string]any{"name": "bench", "version": "1", "definition": json.RawMessage(benchserver.ApprovalAgent)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
		return fmt.Errorf("deploy bench@1: %d %s %v", st, body, err)
	}
	return nil
}

func printTable(w io.Writer, ss []sample) {
	if len(ss) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tpoint\tworkflows waiting\tserver RSS MB\tgoroutines\trequests/s to get here\t")
	for _, s := range ss {
		rate := "-"
		if s.rate > 0 {
			rate = fmt.Sprintf("%.0f", s.rate)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%d\t%s\t\n", s.store, s.phase, s.waiting, float64(s.rss)/(1<<20), s.goroutines, rate)
	}
	tw.Flush()
}
