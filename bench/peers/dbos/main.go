// Command dbos is bench/invoke's peer: the same workload, an HTTP request
// that runs a workflow of three sequential steps, each an HTTP GET to a
// loopback service answering small JSON, and answers once it has finished,
// built on DBOS Transact for Go with each step durable. It prints the same
// table as bench/invoke, so the two can be run one after the other in one
// session and compared.
//
//	cd bench/peers/dbos && go run . [-store postgres|sqlite] [-n 2000] [-c 1,16] [-warmup 200]
//
// The DBOS server runs in a process of its own, as agentplane does under
// bench/invoke: this process starts the tool service and the load, then
// itself again as the server (-serve-for), so every call crosses
// processes as agentplane's do. -in-process runs all three in one
// process, as this peer did before: its calls then wake goroutines of the
// same Go runtime rather than another process, which on a small machine
// is worth about 0.2 ms per call.
//
// On PostgreSQL (the default) it runs in a fresh database created on the
// server named by -database-url (default $AGENTPLANE_TEST_DATABASE_URL) and
// dropped at the end; on SQLite, in a file in a temporary directory removed
// at the end (WAL, synchronous=NORMAL: DBOS's settings, and agentplane's).
// It has a go.mod of its own so that agentplane does not depend on DBOS.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // -store sqlite
	"github.com/jackc/pgx/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench/peers/dbos:", err)
		os.Exit(1)
	}
}

type options struct {
	store       string
	n, warmup   int
	levels      []int
	databaseURL string
	duration    time.Duration
	inProcess   bool
	// serveFor is set in the server process: the tool service's URL. The
	// server then runs DBOS on serveDB until it is signalled.
	serveFor, serveDB string
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/peers/dbos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "postgres", "DBOS's system database: postgres or sqlite")
	n := fs.Int("n", 2000, "invocations per concurrency level")
	levels := fs.String("c", "1,16", "comma-separated concurrency levels")
	warmup := fs.Int("warmup", 200, "invocations before measuring")
	duration := fs.Duration("duration", 2*time.Minute, "time limit of one concurrency level")
	dbURL := fs.String("database-url", os.Getenv("AGENTPLANE_TEST_DATABASE_URL"), "PostgreSQL server to create the benchmark's database on")
	inProcess := fs.Bool("in-process", false, "run DBOS in this process, beside the load and the tool service, rather than in a process of its own")
	serveFor := fs.String("serve-for", "", "(started by the peer itself) be the DBOS server, calling the tool service at this URL")
	serveDB := fs.String("serve-db", "", "(started by the peer itself) the DBOS system database of -serve-for")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{store: *store, n: *n, warmup: *warmup, databaseURL: *dbURL, duration: *duration,
		inProcess: *inProcess, serveFor: *serveFor, serveDB: *serveDB}
	if o.store != "postgres" && o.store != "sqlite" {
		return options{}, fmt.Errorf("-store: %q is neither postgres nor sqlite", o.store)
	}
	for _, f := range strings.Split(*levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 1024 {
			return options{}, fmt.Errorf("-c: %q is not a concurrency from 1 to 1024", f)
		}
		o.levels = append(o.levels, c)
	}
	if o.n < 1 || o.warmup < 0 || o.duration <= 0 {
		return options{}, errors.New("-n must be positive, -warmup not negative, -duration positive")
	}
	if o.databaseURL == "" {
		o.databaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	if o.serveFor != "" {
		return serve(ctx, o.serveDB, o.serveFor, stdout)
	}
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %q, "ok": true}`, strings.TrimPrefix(r.URL.Path, "/things/"))
	}))
	defer tools.Close()

	var (
		dbURL string
		drop  func() error
	)
	if o.store == "sqlite" {
		dbURL, drop, err = sqliteFile()
	} else {
		dbURL, drop, err = createDatabase(ctx, o.databaseURL)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, drop()) }()

	var addr string
	if o.inProcess {
		app, err := startApp(ctx, dbURL, tools.URL, tools.Client())
		if err != nil {
			return err
		}
		defer app.stop()
		addr = app.addr
	} else {
		srv, err := startServer(ctx, stderr, dbURL, tools.URL)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, srv.stop()) }()
		addr = srv.addr
	}

	var wal *walProbe // PostgreSQL's WAL counters; none on SQLite
	if o.store == "postgres" {
		if wal, err = openWAL(ctx, o.databaseURL); err != nil {
			return err
		}
		defer wal.conn.Close(context.Background())
	}

	cl := newClient("http://"+addr+"/invoke", maxOf(o.levels))
	fmt.Fprintf(stderr, "dbos: warming up (%d invocations) …\n", o.warmup)
	if w := cl.load(ctx, o.warmup, maxOf(o.levels), o.duration, nil); w.errors > 0 {
		return fmt.Errorf("warm-up: %d of %d invocations failed (first: %s)", w.errors, w.count, w.firstError)
	}
	var results []levelResult
	for _, c := range o.levels {
		fmt.Fprintf(stderr, "dbos: %d invocations at concurrency %d …\n", o.n, c)
		results = append(results, cl.load(ctx, o.n, c, o.duration, wal))
		if ctx.Err() != nil {
			break
		}
	}
	printTable(stdout, results)
	for _, r := range results {
		if r.errors > 0 {
			return fmt.Errorf("concurrency %d: %d of %d invocations failed (first: %s)", r.concurrency, r.errors, r.count, r.firstError)
		}
	}
	return ctx.Err()
}

// app is DBOS with the workflow registered and its HTTP server listening.
type app struct {
	addr string
	stop func()
}

// startApp launches DBOS on the system database dbURL with the workflow
// calling the tool service at tools through hc, and the HTTP server that
// starts it, on a loopback port.
func startApp(ctx context.Context, dbURL, tools string, hc *http.Client) (*app, error) {
	dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "agentplane-peer", DatabaseURL: dbURL,
		Logger: discardLogger()})
	if err != nil {
		return nil, fmt.Errorf("dbos: %w", err)
	}
	wf := threeCalls(tools, hc)
	dbos.RegisterWorkflow(dctx, wf)
	if err := dbos.Launch(dctx); err != nil {
		dbos.Shutdown(dctx, 10*time.Second)
		return nil, fmt.Errorf("dbos launch: %w", err)
	}
	// The workflow is started by an HTTP handler, as agentplane's is.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		dbos.Shutdown(dctx, 10*time.Second)
		return nil, err
	}
	srv := &http.Server{Handler: invokeHandler(dctx, wf), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &app{addr: ln.Addr().String(), stop: func() {
		srv.Close()
		dbos.Shutdown(dctx, 10*time.Second)
	}}, nil
}

// serve is the server process: it prints its address and runs until it
// is signalled.
func serve(ctx context.Context, dbURL, tools string, stdout io.Writer) error {
	// The tool client of agentplane's server keeps up to 1,024 idle
	// connections per host; so does this one.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4096, 1024
	a, err := startApp(ctx, dbURL, tools, &http.Client{Transport: tr})
	if err != nil {
		return err
	}
	defer a.stop()
	fmt.Fprintln(stdout, a.addr)
	<-ctx.Done()
	return nil
}

// server is the DBOS server process.
type server struct {
	addr string
	cmd  *exec.Cmd
}

// startServer starts this program again as the DBOS server on dbURL,
// calling the tool service at tools, and waits for its address.
func startServer(ctx context.Context, stderr io.Writer, dbURL, tools string) (*server, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-serve-for", tools, "-serve-db", dbURL)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the DBOS server process: %w", err)
	}
	s := &server{cmd: cmd}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	var why error
	select {
	case s.addr = <-line:
		why = errors.New("the DBOS server process ended without printing its address (its error is above)")
	case <-time.After(time.Minute):
		why = errors.New("the DBOS server process printed no address within a minute")
	case <-ctx.Done():
		why = ctx.Err()
	}
	if s.addr == "" {
		return nil, errors.Join(why, s.stop())
	}
	return s, nil
}

// stop signals the server process and waits for it: DBOS shuts down and
// closes its database before the database is dropped.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.Exited() && exit.ExitCode() == 0 {
			return nil
		}
		return err
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.Join(errors.New("the DBOS server process did not stop within 30 s; killed"), <-done)
	}
}

// thing is what the tool service answers.
type thing struct {
	ID string `json:"id"`
	OK bool   `json:"ok"`
}

// threeCalls is the workflow: three durable steps, each one GET.
func threeCalls(base string, hc *http.Client) dbos.Workflow[string, []thing] {
	get := func(id string) dbos.Step[thing] {
		return func(ctx context.Context) (thing, error) {
			req, err := http.NewRequestWithContext(ctx, "GET", base+"/things/"+id, nil)
			if err != nil {
				return thing{}, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return thing{}, err
			}
			defer resp.Body.Close()
			var t thing
			if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
				return thing{}, err
			}
			return t, nil
		}
	}
	return func(ctx dbos.Context, goal string) ([]thing, error) {
		var out []thing
		for _, id := range []string{"a", "b", "c"} {
			t, err := dbos.RunAsStep(ctx, get(id), dbos.WithStepName("get_"+id))
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		return out, nil
	}
}

// invokeHandler runs the workflow for each request and answers its result.
func invokeHandler(dctx dbos.Context, wf dbos.Workflow[string, []thing]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Goal string `json:"goal"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h, err := dbos.RunWorkflow(dctx, wf, body.Goal)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		things, err := h.GetResult()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"workflow_id": h.GetWorkflowID(), "status": "completed", "steps": things})
	})
}

// client is the load generator.
type client struct {
	url  string
	http *http.Client
}

func newClient(u string, concurrency int) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = concurrency*2, concurrency*2
	return &client{url: u, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

var invokeBody = `{"goal": "bench", "context": {}}`

func (c *client) invoke(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, strings.NewReader(invokeBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, data)
	}
	var a struct {
		Status string  `json:"status"`
		Steps  []thing `json:"steps"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return err
	}
	if a.Status != "completed" || len(a.Steps) != 3 {
		return fmt.Errorf("answer: %.300s", data)
	}
	return nil
}

// levelResult is one concurrency level's measurement.
type levelResult struct {
	concurrency, count, errors int
	firstError                 string
	elapsed                    time.Duration
	lat                        []time.Duration
	walRecords, walBytes       int64
	walKnown                   bool
}

func (r levelResult) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := int(q/100*float64(len(r.lat))+0.5) - 1
	return r.lat[min(max(i, 0), len(r.lat)-1)]
}

// load runs n invocations from conc goroutines, stopping after limit.
func (c *client) load(ctx context.Context, n, conc int, limit time.Duration, wal *walProbe) levelResult {
	res := levelResult{concurrency: conc}
	var w0 walCount
	if wal != nil {
		var err error
		w0, err = wal.read(ctx)
		res.walKnown = err == nil
	}
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(limit)
	for range conc {
		wg.Go(func() {
			var lat []time.Duration
			var errs []error
			for next.Add(1) <= int64(n) && ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				err := c.invoke(ctx)
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
	res.elapsed = time.Since(start)
	res.count = len(res.lat)
	slices.Sort(res.lat)
	if res.walKnown {
		w1, err := wal.read(ctx)
		res.walKnown = err == nil
		res.walRecords, res.walBytes = w1.records-w0.records, w1.bytes-w0.bytes
	}
	return res
}

func printTable(w io.Writer, rs []levelResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "peer\tconcurrency\tinvocations\tworkflows/s\tp50 ms\tp90 ms\tp99 ms\tWAL records/wf\tWAL KiB/wf\terrors\t")
	for _, r := range rs {
		records, kib := "–", "–"
		if r.walKnown && r.count > 0 {
			records = fmt.Sprintf("%.1f", float64(r.walRecords)/float64(r.count))
			kib = fmt.Sprintf("%.1f", float64(r.walBytes)/1024/float64(r.count))
		}
		fmt.Fprintf(tw, "dbos\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%d\t\n", r.concurrency, r.count,
			float64(r.count)/r.elapsed.Seconds(), ms(r.p(50)), ms(r.p(90)), ms(r.p(99)), records, kib, r.errors)
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// walProbe reads pg_stat_wal (the whole cluster's counters).
type walProbe struct{ conn *pgx.Conn }

type walCount struct{ records, bytes int64 }

func openWAL(ctx context.Context, adminURL string) (*walProbe, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect for WAL counters: %w", err)
	}
	return &walProbe{conn}, nil
}

func (p *walProbe) read(ctx context.Context) (walCount, error) {
	var c walCount
	err := p.conn.QueryRow(ctx, `SELECT wal_records, wal_bytes::bigint FROM pg_stat_wal`).Scan(&c.records, &c.bytes)
	return c, err
}

// sqliteFile returns the URL of a SQLite file in a new temporary directory
// and a function that removes the directory.
func sqliteFile() (string, func() error, error) {
	dir, err := os.MkdirTemp("", "agentplane-peer-")
	if err != nil {
		return "", nil, err
	}
	return "sqlite:" + filepath.Join(dir, "dbos.db"), func() error { return os.RemoveAll(dir) }, nil
}

// createDatabase creates a fresh database on the server at adminURL and
// returns its URL and a function that drops it.
func createDatabase(ctx context.Context, adminURL string) (string, func() error, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "agentplane_peer_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() error {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(dctx, adminURL)
		if err != nil {
			return err
		}
		defer c.Close(dctx)
		_, err = c.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		return err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// discardLogger keeps DBOS's informational lines out of the table.
func discardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
