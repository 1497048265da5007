// Command webhooks benchmarks webhook deliveries: through the real server
// binary (built from ./cmd/agentplane and started as its own process) it
// subscribes a loopback receiver to workflow.completed, runs n workflows of
// a one-step agent, c at a time, and measures how long each event took
// from the moment the workflow ended (the payload's timestamp) to its
// arrival at the receiver, and how long all n took to be delivered.
//
//	go run ./bench/webhooks [-store sqlite|postgres|both] [-n 10000] [-c 16]
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
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

const tokenScopes = "agents:write agents:invoke workflows:read webhooks:write webhooks:read"

type options struct {
	stores      []string
	n, conc     int
	databaseURL string
	repo        string
	binary      string
	limit       time.Duration
}

func main() { benchserver.Main("bench/webhooks", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/webhooks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 10000, "workflows, so events delivered (at most 100,000)")
	conc := fs.Int("c", 16, "invocations at once")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 5*time.Minute, "time limit of one store")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{n: *n, conc: *conc, repo: *repo, binary: *binary, limit: *limit}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.n < 1 || o.n > 100000 || o.conc < 1 || o.conc > 256 || o.limit <= 0 {
		return options{}, errors.New("-n must be from 1 to 100000, -c from 1 to 256, -limit positive")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// result is one store's figures.
type result struct {
	store                string
	n                    int
	invoke, all          time.Duration
	delay50, delay99     time.Duration
	deliveries, repeated int64
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "webhooks", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var rs []result
	for _, store := range o.stores {
		r, err := measure(ctx, o, bin, tmp+"/"+store, store, stderr)
		if err != nil {
			printTable(stdout, rs)
			return fmt.Errorf("%s: %w", store, err)
		}
		rs = append(rs, r)
	}
	printTable(stdout, rs)
	return nil
}

// receiver records each delivery's delay after its event, once per webhook-id.
type receiver struct {
	mu       sync.Mutex
	delays   []time.Duration
	seen     map[string]bool
	last     time.Time
	repeated atomic.Int64
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var p struct {
		Timestamp time.Time `json:"timestamp"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	if rc.seen[id] {
		rc.repeated.Add(1)
	} else {
		rc.seen[id] = true
		rc.delays = append(rc.delays, arrived.Sub(p.Timestamp))
		rc.last = arrived
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.delays)
}

func measure(ctx context.Context, o options, bin, data, store string, stderr io.Writer) (res result, err error) {
	res = result{store: store, n: o.n}
	rc := &receiver{seen: make(map[string]bool, o.n)}
	recv := httptest.NewServer(rc)
	defer recv.Close()
	sc := benchserver.Config{Binary: bin, Data: data, Args: []string{"--allow-private-networks",
		"--rate-limit", "10000000", "--rate-limit-burst", "10000000"}}
	srv, stop, err := benchserver.StartOn(ctx, sc, store, o.databaseURL)
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := srv.MintToken(ctx, tokenScopes); err != nil {
		return res, err
	}
	hook := map[string]any{"url": recv.URL + "/hooks", "events": []string{"workflow.completed"}}
	if st, body, err := srv.Do(ctx, "POST", "/v1/webhooks", hook); err != nil || st != http.StatusCreated {
		return res, fmt.Errorf("create webhook: %d %s %v", st, body, err)
	}
	agent := map[string]any{"name": "bench", "version": "1", "definition": map[string]any{
		"tools": []string{}, "steps": []any{map[string]any{"action": "done", "finish": "ok"}}}}
	if st, body, err := srv.Do(ctx, "POST", "/v1/agents", agent); err != nil || st != http.StatusCreated {
		return res, fmt.Errorf("deploy bench@1: %d %s %v", st, body, err)
	}

	ctx, cancel := context.WithTimeout(ctx, o.limit)
	defer cancel()
	fmt.Fprintf(stderr, "%s: %d workflows, %d at a time, each event delivered to a loopback receiver …\n", store, o.n, o.conc)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for range o.conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= o.n || ctx.Err() != nil {
					return
				}
				st, body, err := srv.Do(ctx, "POST", "/v1/agents/bench/invoke", map[string]any{"goal": "bench"})
				if err == nil && st != http.StatusOK {
					err = fmt.Errorf("invoke: %d %.300s", st, body)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	res.invoke = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	for rc.count() < o.n {
		if ctx.Err() != nil {
			return res, fmt.Errorf("%d of %d events delivered within %s", rc.count(), o.n, o.limit)
		}
		if err := srv.Exited(); err != nil {
			return res, err
		}
		time.Sleep(5 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	res.all = rc.last.Sub(start)
	delays := slices.Clone(rc.delays)
	slices.Sort(delays)
	res.delay50, res.delay99 = delays[len(delays)/2], delays[min(len(delays)-1, len(delays)*99/100)]
	res.deliveries, res.repeated = int64(len(delays)), rc.repeated.Load()
	return res, srv.Exited()
}

func printTable(w io.Writer, rs []result) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tevents\tinvoking s\tall delivered s\tdeliveries/s\tdelay p50\tdelay p99\trepeated\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.0f\t%.1f ms\t%.1f ms\t%d\t\n", r.store, r.deliveries, r.invoke.Seconds(), r.all.Seconds(),
			float64(r.deliveries)/r.all.Seconds(), float64(r.delay50)/1e6, float64(r.delay99)/1e6, r.repeated)
	}
	tw.Flush()
}
