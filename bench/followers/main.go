// Command followers benchmarks idle event-stream followers: it starts n
// workflows that wait at an approval, opens one SSE follower
// (GET /v1/workflows/{id}/events) of each, and measures, while they idle,
// the store reads the followers cause per second and the latency of
// unrelated requests (GET /v1/tools), beside the same latency with no
// follower open.
//
//	go run ./bench/followers [-store sqlite|postgres|both] [-n 1000] [-tenants 20] [-window 10s] [-settle 12s]
//
// The server runs in this process, wired as `agentplane serve` wires it,
// so that a counting wrapper around the workflow store can count the reads
// the followers make (Workflow and Steps; SQLite has no other way to count
// them). On PostgreSQL the database's committed transactions per second
// (pg_stat_database.xact_commit, every cause included) are shown too; it
// runs in a fresh database created on the server named by -database-url
// (default $AGENTPLANE_TEST_DATABASE_URL, else a local one) and dropped at
// the end; the followers idle for -settle before their window, as
// PostgreSQL reports a backend's transactions up to 10 s late. The
// followers are spread over -tenants tenants (50 each by default), each
// under the default cap of 100 open streams per tenant.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

const scopes = "tools:read tools:write agents:write agents:invoke workflows:read tool:*"

type options struct {
	stores      []string
	n, tenants  int
	clients     int
	window      time.Duration
	settle      time.Duration
	databaseURL string
	limit       time.Duration
}

func main() { benchserver.Main("bench/followers", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/followers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 1000, "workflows waiting at an approval, one follower each (at most 10,000)")
	tenants := fs.Int("tenants", 20, "tenants the workflows and followers are spread over")
	clients := fs.Int("clients", 4, "clients sending unrelated requests at once")
	window := fs.Duration("window", 10*time.Second, "length of each measured window")
	settle := fs.Duration("settle", 12*time.Second, "time the followers idle before their window is measured: PostgreSQL reports a backend's transactions up to 10 s late")
	limit := fs.Duration("limit", 5*time.Minute, "time limit of the setup (invoking, opening followers)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{n: *n, tenants: *tenants, clients: *clients, window: *window, settle: *settle, limit: *limit}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.n < 1 || o.n > 10000 || o.tenants < 1 || o.tenants > o.n || o.clients < 1 || o.clients > 64 || o.window <= 0 || o.settle < 0 || o.limit <= 0 {
		return options{}, errors.New("-n must be from 1 to 10000, -tenants from 1 to -n, -clients from 1 to 64, -window and -limit positive, -settle not negative")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// result is one store's measurements.
type result struct {
	store     string
	followers int
	// reads is the store reads per second the idle followers made.
	reads float64
	// xacts is the database's committed transactions per second meanwhile
	// (PostgreSQL only; -1 otherwise).
	xacts float64
	// alone and followed are the unrelated requests' latencies without and
	// with the followers open.
	alone, followed latencies
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "agentplane-bench-followers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var results []result
	for _, store := range o.stores {
		r, err := measure(ctx, o, filepath.Join(tmp, store), store, stderr)
		if err != nil {
			printTable(stdout, results)
			return fmt.Errorf("%s: %w", store, err)
		}
		results = append(results, r)
	}
	printTable(stdout, results)
	return nil
}

func measure(ctx context.Context, o options, dir, store string, stderr io.Writer) (res result, err error) {
	res = result{store: store, followers: o.n, xacts: -1}
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer svc.Close()
	db, dbURL, drop, err := open(ctx, o, dir, store)
	if err != nil {
		return res, err
	}
	defer func() {
		db.Close()
		if derr := drop(); derr != nil && err == nil {
			err = derr
		}
	}()
	srv, err := startServer(ctx, db, o.tenants)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	setupCtx, cancelSetup := context.WithTimeout(ctx, o.limit)
	defer cancelSetup()
	for t := range o.tenants {
		if err := setup(setupCtx, srv, t, svc.URL); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(stderr, "%s: starting %d workflows that wait for approval …\n", store, o.n)
	ids := make([]string, o.n)
	if err := parallel(setupCtx, o.n, 16, func(ctx context.Context, i int) error {
		return invoke(ctx, srv, i%o.tenants, i, ids)
	}); err != nil {
		return res, err
	}

	fmt.Fprintf(stderr, "%s: unrelated requests with no follower, %s …\n", store, o.window)
	if res.alone, err = unrelated(ctx, srv, o); err != nil {
		return res, err
	}

	fmt.Fprintf(stderr, "%s: opening %d followers …\n", store, o.n)
	followCtx, closeFollowers := context.WithCancel(ctx)
	var followers sync.WaitGroup
	defer func() {
		closeFollowers()
		followers.Wait()
	}()
	opened := make(chan error, o.n)
	for i := range o.n {
		followers.Go(func() { follow(followCtx, srv, i%o.tenants, ids[i], opened) })
	}
	for range o.n {
		select {
		case err := <-opened:
			if err != nil {
				return res, err
			}
		case <-setupCtx.Done():
			return res, fmt.Errorf("opening followers: %w", setupCtx.Err())
		}
	}

	fmt.Fprintf(stderr, "%s: %d followers idle, %s to settle and %s measured …\n", store, o.n, o.settle, o.window)
	select {
	case <-time.After(o.settle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	pg, err := pgCounter(ctx, dbURL)
	if err != nil {
		return res, err
	}
	if pg != nil {
		defer pg.Close(context.Background())
	}
	x0, err := xacts(ctx, pg)
	if err != nil {
		return res, err
	}
	r0, start := srv.count.reads.Load(), time.Now()
	select {
	case <-time.After(o.window):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	elapsed := time.Since(start).Seconds()
	res.reads = float64(srv.count.reads.Load()-r0) / elapsed
	x1, err := xacts(ctx, pg)
	if err != nil {
		return res, err
	}
	if pg != nil {
		res.xacts = float64(x1-x0) / elapsed
	}

	fmt.Fprintf(stderr, "%s: unrelated requests with %d followers, %s …\n", store, o.n, o.window)
	res.followed, err = unrelated(ctx, srv, o)
	return res, err
}

// setup registers the tool service and deploys the agent for tenant t.
func setup(ctx context.Context, srv *server, t int, svcURL string) error {
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": fmt.Sprintf(benchserver.ThingSpec, svcURL)}
	if st, body, err := srv.do(ctx, t, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	dep := map[string]any{"name": "bench", "version": "1", "definition": json.RawMessage(benchserver.ApprovalAgent)}
	if st, body, err := srv.do(ctx, t, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
		return fmt.Errorf("deploy bench@1: %d %s %v", st, body, err)
	}
	return nil
}

// invoke starts workflow i of tenant t synchronously and checks that it waits.
func invoke(ctx context.Context, srv *server, t, i int, ids []string) error {
	st, body, err := srv.do(ctx, t, "POST", "/v1/agents/bench/invoke",
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

// follow opens the event stream of workflow id as tenant t, reports on
// opened once its first event (the step waiting for approval) arrived, then
// reads until ctx ends.
func follow(ctx context.Context, srv *server, t int, id string, opened chan<- error) {
	req, err := http.NewRequestWithContext(ctx, "GET", srv.url+"/v1/workflows/"+id+"/events", nil)
	if err != nil {
		opened <- err
		return
	}
	req.Header.Set("Authorization", "Bearer "+srv.tokens[t])
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.client.Do(req)
	if err != nil {
		opened <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		opened <- fmt.Errorf("follow %s: %d %s", id, resp.StatusCode, b)
		return
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			opened <- fmt.Errorf("follow %s: stream ended before its first event: %w", id, err)
			return
		}
		if strings.HasPrefix(line, "data:") {
			if !strings.Contains(line, "waiting_approval") {
				opened <- fmt.Errorf("follow %s: first event %s, want the step waiting for approval", id, line)
				return
			}
			break
		}
	}
	opened <- nil
	io.Copy(io.Discard, rd) // until the stream or ctx ends
}

// latencies are the durations of the requests of one window.
type latencies = benchserver.Latencies

// unrelated sends GET /v1/tools from o.clients clients in a closed loop
// for o.window and returns every request's latency.
func unrelated(ctx context.Context, srv *server, o options) (latencies, error) {
	ctx, cancel := context.WithTimeout(ctx, o.window)
	defer cancel()
	var (
		mu    sync.Mutex
		all   latencies
		first error
		wg    sync.WaitGroup
	)
	for c := range o.clients {
		wg.Go(func() {
			var mine latencies
			for ctx.Err() == nil {
				start := time.Now()
				st, body, err := srv.do(ctx, c%o.tenants, "GET", "/v1/tools", nil)
				if ctx.Err() != nil {
					break
				}
				if err == nil && st != http.StatusOK {
					err = fmt.Errorf("GET /v1/tools: %d %.300s", st, body)
				}
				if err != nil {
					mu.Lock()
					first = firstOf(first, err)
					mu.Unlock()
					cancel()
					break
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, first
}

// firstOf keeps the first error.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// parallel runs f for each i in [0, n), conc at a time.
func parallel(ctx context.Context, n, conc int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range conc {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := f(ctx, i); err != nil {
					mu.Lock()
					first = firstOf(first, err)
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// pgCounter connects to the PostgreSQL database at url, or returns nil
// for SQLite ("").
func pgCounter(ctx context.Context, url string) (*pgx.Conn, error) {
	if url == "" {
		return nil, nil
	}
	return pgx.Connect(ctx, url)
}

// xacts is the database's committed transactions so far (0 without one).
func xacts(ctx context.Context, conn *pgx.Conn) (int64, error) {
	if conn == nil {
		return 0, nil
	}
	// A fresh snapshot: the statistics a session read are otherwise kept
	// until its transaction ends.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, err
	}
	var n int64
	err := conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n)
	return n, err
}

func printTable(w io.Writer, rs []result) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tidle followers\tfollower store reads/s\tdatabase commits/s\tGET /v1/tools p50 / p99, no follower\tp50 / p99, followers open\trequests (no follower / followers)\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
	for _, r := range rs {
		x := "-"
		if r.xacts >= 0 {
			x = fmt.Sprintf("%.1f", r.xacts)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s / %s\t%s / %s\t%d / %d\t\n", r.store, r.followers, r.reads, x,
			ms(r.alone.P(50)), ms(r.alone.P(99)), ms(r.followed.P(50)), ms(r.followed.P(99)), len(r.alone), len(r.followed))
	}
	tw.Flush()
}
