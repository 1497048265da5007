// Command batchfollowers benchmarks the followers of a running replay
// batch: it stores n workflows (three tool calls each), then replays them
// as one batch again and again, rounds with no follower alternating with
// rounds where f clients follow the batch's event stream
// (GET /v1/replay-batches/{id}/events), while one client invokes an
// unrelated agent in a closed loop. It prints, for each round, the batch's
// wall time (the server's created_at to finished_at), the unrelated
// invokes' p50 and p99, and how many followers saw the batch running and
// its end.
//
//	go run ./bench/batchfollowers [-store sqlite|postgres|both] [-n 2000] [-followers 100] [-rounds 3]
//
// The server is the real binary (built from ./cmd/agentplane and started
// as its own process) with its default --max-streams-per-tenant of 100; the
// followers open at once when the batch is created. The batch is watched
// through GET /v1/replay-batches (a list of one), which holds no stream.
// PostgreSQL runs in a fresh database created on the server named by
// -database-url (default $AGENTPLANE_TEST_DATABASE_URL, else a local one)
// and dropped at the end.
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

const tokenScopes = "tools:write agents:write agents:invoke workflows:read workflows:replay tool:*"

// agent writes three things, then decides its outcome; the replayed
// version decides another, so every replay's outcome changes.
const agent = `{"tools": ["svc"], "steps": [
  {"action": "put_a", "call": "svc.putThing", "args": {"id": "'a'"}},
  {"action": "put_b", "call": "svc.putThing", "args": {"id": "'b'"}},
  {"action": "put_c", "call": "svc.putThing", "args": {"id": "'c'"}}],
 "outcome": "%s"}`

type options struct {
	stores      []string
	n           int
	followers   int
	rounds      int
	databaseURL string
	repo        string
	binary      string
	limit       time.Duration
}

func main() { benchserver.Main("bench/batchfollowers", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/batchfollowers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 2000, "workflows to store and replay as one batch (at most 10,000)")
	followers := fs.Int("followers", 100, "followers of the batch in a followed round (at most 100, the server's per-tenant stream cap)")
	rounds := fs.Int("rounds", 3, "rounds of each kind, alternated: none, followed, none, followed, …")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 5*time.Minute, "time limit of seeding and of each batch")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{n: *n, followers: *followers, rounds: *rounds, repo: *repo, binary: *binary, limit: *limit}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.n < 1 || o.n > 10000 || o.followers < 1 || o.followers > 100 || o.rounds < 1 || o.rounds > 20 || o.limit <= 0 {
		return options{}, errors.New("-n must be from 1 to 10000, -followers from 1 to 100, -rounds from 1 to 20, -limit positive")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// round is one batch's measurements.
type round struct {
	store     string
	followers int
	// batches is how many rounds this is (more than one when pooled);
	// wall is their batches' wall time, summed.
	batches int
	wall    time.Duration
	invokes benchserver.Latencies
	// sawRunning and sawEnd count the followers that received a progress
	// event while the batch ran, and its complete event.
	sawRunning, sawEnd int
	// events counts the events the followers received.
	events int
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "batchfollowers", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer svc.Close()
	var rounds []round
	for _, store := range o.stores {
		rs, err := measure(ctx, o, bin, tmp, store, svc.URL, stderr)
		rounds = append(rounds, rs...)
		if err != nil {
			printTable(stdout, rounds)
			return fmt.Errorf("%s: %w", store, err)
		}
	}
	printTable(stdout, rounds)
	return nil
}

func measure(ctx context.Context, o options, bin, tmp, store, svcURL string, stderr io.Writer) (rounds []round, err error) {
	srv, stop, err := benchserver.StartOn(ctx, benchserver.Config{Binary: bin, Data: tmp + "/" + store}, store, o.databaseURL)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	srv.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	if err := srv.MintToken(ctx, tokenScopes); err != nil {
		return nil, err
	}
	if err := setup(ctx, srv, svcURL); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "%s: storing %d workflows …\n", store, o.n)
	if err := seed(ctx, srv, o.n, o.limit); err != nil {
		return nil, err
	}
	for i := range 2 * o.rounds {
		f := 0
		if i%2 == 1 {
			f = o.followers
		}
		fmt.Fprintf(stderr, "%s: round %d of %d, a batch of %d with %d followers …\n", store, i+1, 2*o.rounds, o.n, f)
		r, err := batchRound(ctx, o, srv, f)
		r.store = store
		if err != nil {
			return rounds, err
		}
		rounds = append(rounds, r)
	}
	return rounds, srv.Exited()
}

// setup registers the tool service and deploys bench@1, bench@2 and the
// unrelated agent other.
func setup(ctx context.Context, srv *benchserver.Server, svcURL string) error {
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": fmt.Sprintf(benchserver.ThingSpec, svcURL)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	for _, d := range []struct{ name, version, outcome string }{{"bench", "1", "'done'"}, {"bench", "2", "'reviewed'"}, {"other", "1", "'done'"}} {
		dep := map[string]any{"name": d.name, "version": d.version, "definition": json.RawMessage(fmt.Sprintf(agent, d.outcome))}
		if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
			return fmt.Errorf("deploy %s@%s: %d %s %v", d.name, d.version, st, body, err)
		}
	}
	return nil
}

// seed stores n workflows of bench@1, 16 at a time.
func seed(ctx context.Context, srv *benchserver.Server, n int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if err := invoke(ctx, srv, "bench@1"); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	return cmpErr(first, ctx.Err())
}

// invoke runs one workflow of the agent synchronously and checks it ended done.
func invoke(ctx context.Context, srv *benchserver.Server, agent string) error {
	st, body, err := srv.Do(ctx, "POST", "/v1/agents/"+agent+"/invoke", map[string]any{"goal": "bench"})
	if err != nil {
		return err
	}
	var wf struct {
		Outcome string `json:"outcome"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &wf) != nil || wf.Outcome != "done" {
		return fmt.Errorf("invoke %s: %d %.300s; want 200 with outcome done", agent, st, body)
	}
	return nil
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// listedBatch is a batch as GET /v1/replay-batches lists it.
type listedBatch struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	Error      string     `json:"error"`
	Total      int        `json:"total"`
	Done       int        `json:"done"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// batchRound replays the n workflows of bench@1 as one batch against
// bench@2 with f followers of its events, and an unrelated invoke after
// another until the batch ends.
func batchRound(ctx context.Context, o options, srv *benchserver.Server, f int) (round, error) {
	r := round{followers: f, batches: 1}
	ctx, cancel := context.WithTimeout(ctx, o.limit)
	defer cancel()
	st, body, err := srv.Do(ctx, "POST", "/v1/replay-batches", map[string]any{"target_agent_version": "bench@2",
		"workflows": map[string]any{"agent": "bench", "agent_version": "1", "limit": o.n}})
	if err != nil || st != http.StatusAccepted {
		return r, fmt.Errorf("create batch: %d %s %v", st, body, err)
	}
	var b listedBatch
	if err := json.Unmarshal(body, &b); err != nil {
		return r, err
	}
	if b.Total != o.n {
		return r, fmt.Errorf("batch %s holds %d workflows, want %d", b.ID, b.Total, o.n)
	}

	var (
		followers sync.WaitGroup
		results   = make([]follower, f)
	)
	for i := range f {
		followers.Go(func() { results[i] = follow(ctx, srv, b.ID) })
	}
	ended := make(chan struct{})
	var invokeErr error
	var unrelated sync.WaitGroup
	unrelated.Go(func() {
		for {
			select {
			case <-ended:
				return
			default:
			}
			start := time.Now()
			if err := invoke(ctx, srv, "other"); err != nil {
				invokeErr = err
				return
			}
			r.invokes = append(r.invokes, time.Since(start))
		}
	})

	b, err = waitBatch(ctx, srv)
	close(ended)
	unrelated.Wait()
	followers.Wait()
	if err != nil {
		return r, err
	}
	if invokeErr != nil {
		return r, invokeErr
	}
	if b.Status != "completed" || b.Done != o.n || b.FinishedAt == nil {
		return r, fmt.Errorf("batch %s ended %s with %d of %d replayed: %s", b.ID, b.Status, b.Done, o.n, b.Error)
	}
	r.wall = b.FinishedAt.Sub(b.CreatedAt)
	for _, fr := range results {
		if fr.err != nil {
			return r, fr.err
		}
		if fr.sawRunning {
			r.sawRunning++
		}
		if fr.sawEnd {
			r.sawEnd++
		}
		r.events += fr.events
	}
	return r, nil
}

// waitBatch watches the newest batch through the list until it ends.
func waitBatch(ctx context.Context, srv *benchserver.Server) (listedBatch, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		st, body, err := srv.Do(ctx, "GET", "/v1/replay-batches?limit=1", nil)
		if err != nil || st != http.StatusOK {
			return listedBatch{}, fmt.Errorf("list batches: %d %.300s %v", st, body, err)
		}
		var list struct {
			Batches []listedBatch `json:"batches"`
		}
		if err := json.Unmarshal(body, &list); err != nil || len(list.Batches) != 1 {
			return listedBatch{}, fmt.Errorf("list batches: %.300s %v", body, err)
		}
		if b := list.Batches[0]; b.Status != "running" {
			return b, nil
		}
		if err := srv.Exited(); err != nil {
			return listedBatch{}, err
		}
		select {
		case <-ctx.Done():
			return listedBatch{}, fmt.Errorf("batch still running: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// follower is what one follower of a batch received.
type follower struct {
	sawRunning, sawEnd bool
	events             int
	err                error
}

// follow reads the batch's event stream to its end.
func follow(ctx context.Context, srv *benchserver.Server, id string) (f follower) {
	req, err := http.NewRequestWithContext(ctx, "GET", srv.BaseURL()+"/v1/replay-batches/"+id+"/events", nil)
	if err != nil {
		f.err = err
		return f
	}
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.HTTP.Do(req)
	if err != nil {
		f.err = err
		return f
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		f.err = fmt.Errorf("follow batch %s: %d %s", id, resp.StatusCode, b)
		return f
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Event       string `json:"event"`
			Done, Total int
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			f.err = fmt.Errorf("follow batch %s: event %.100s: %w", id, data, err)
			return f
		}
		f.events++
		switch {
		case ev.Event == "complete":
			f.sawEnd = true
			return f
		case ev.Done < ev.Total:
			f.sawRunning = true
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		f.err = fmt.Errorf("follow batch %s: %w", id, err)
	}
	return f
}

func printTable(w io.Writer, rs []round) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tfollowers\tbatch s\tunrelated invoke p50\tp99\tinvokes\tfollowers that saw it run / end\tevents per follower\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	for _, r := range append(rs, pooled(rs)...) {
		seen, per := "-", "-"
		if r.followers > 0 {
			seen = strconv.Itoa(r.sawRunning) + " / " + strconv.Itoa(r.sawEnd)
			per = fmt.Sprintf("%.1f", float64(r.events)/float64(r.followers*r.batches))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%s\t%d\t%s\t%s\t\n", r.store, r.followers, r.wall.Seconds()/float64(r.batches),
			ms(r.invokes.P(50)), ms(r.invokes.P(99)), len(r.invokes), seen, per)
	}
	tw.Flush()
}

// pooled sums the rounds of each store and follower count into one, named
// "<store> (all)": the batches' mean wall time, every invoke's latency,
// the followers of every round.
func pooled(rs []round) []round {
	var out []round
	for _, r := range rs {
		i := slices.IndexFunc(out, func(p round) bool { return p.store == r.store+" (all)" && p.followers == r.followers })
		if i < 0 {
			out = append(out, round{store: r.store + " (all)", followers: r.followers})
			i = len(out) - 1
		}
		p := &out[i]
		p.batches, p.wall = p.batches+r.batches, p.wall+r.wall
		p.invokes = append(p.invokes, r.invokes...)
		p.sawRunning, p.sawEnd, p.events = p.sawRunning+r.sawRunning, p.sawEnd+r.sawEnd, p.events+r.events
	}
	return out
}
