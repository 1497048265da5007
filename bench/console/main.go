// Command console benchmarks the workflow list the console shows, with
// 100,000 workflows in the store: the first page, a page deep in the list,
// the version filter and the goal-words filter (a common word and a rare
// pair), at p50/p95/p99, on SQLite and on PostgreSQL. Each case is timed
// twice: the store's query in process (ListWorkflows), and GET /v1/workflows
// of the real server binary over loopback (the query, authentication, the
// audit record and the JSON response). It prints each case's query plan, so
// a filter that reads the whole table shows.
//
//	go run ./bench/console [-store sqlite|postgres|both] [-n 100000] [-requests 300]
//
// The workflows are written straight into the server's database in batches
// (SQLite) or with COPY (PostgreSQL), as the store would have stored them.
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
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

// pageSize is the console's page of workflows.
const pageSize = 50

func main() { benchserver.Main("bench/console", run) }

// options are the benchmark's settings.
type options struct {
	stores      []string
	n           int
	requests    int
	databaseURL string
	repo        string
	binary      string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	n := fs.Int("n", 100000, "workflows in the store")
	requests := fs.Int("requests", 300, "timed lists per case (after 10 untimed)")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{n: *n, requests: *requests, repo: *repo, binary: *binary, databaseURL: stores.DatabaseURL(getenv)}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	if o.n < 2*pageSize {
		return options{}, fmt.Errorf("-n must be at least %d", 2*pageSize)
	}
	if o.requests < 1 {
		return options{}, errors.New("-requests must be at least 1")
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, dir, cleanup, err := benchserver.Workdir(ctx, "console", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var results []storeResult
	for _, store := range o.stores {
		r, err := measureStore(ctx, o, bin, filepath.Join(dir, store), store, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", store, err)
		}
		results = append(results, r)
	}
	report(stdout, o, results)
	return nil
}

// measureStore starts a server on store, seeds it and times every case.
func measureStore(ctx context.Context, o options, bin, data, store string, log io.Writer) (storeResult, error) {
	c := benchserver.Config{Binary: bin, Data: data}
	drop := func() error { return nil }
	if store == "postgres" {
		var err error
		if c.DatabaseURL, drop, err = benchserver.CreateDatabase(ctx, o.databaseURL); err != nil {
			return storeResult{}, err
		}
	}
	srv, err := benchserver.Start(ctx, c)
	if err != nil {
		return storeResult{}, errors.Join(err, drop())
	}
	r, err := func() (storeResult, error) {
		defer srv.Stop()
		if err := srv.MintToken(ctx, "workflows:read"); err != nil {
			return storeResult{}, err
		}
		db, err := openStore(ctx, store, data, c.DatabaseURL)
		if err != nil {
			return storeResult{}, err
		}
		defer db.Close()
		fmt.Fprintf(log, "%s: seeding %d workflows\n", store, o.n)
		start := time.Now()
		if err := db.seed(ctx, tenant, o.n); err != nil {
			return storeResult{}, fmt.Errorf("seed: %w", err)
		}
		r := storeResult{store: store, seeded: time.Since(start)}
		cases, err := casesOf(ctx, db)
		if err != nil {
			return storeResult{}, err
		}
		for _, cs := range cases {
			fmt.Fprintf(log, "%s: %s\n", store, cs.name)
			m, err := measureCase(ctx, o.requests, db, srv, cs)
			if err != nil {
				return storeResult{}, fmt.Errorf("%s: %w", cs.name, err)
			}
			r.cases = append(r.cases, m)
		}
		return r, nil
	}()
	return r, errors.Join(err, drop())
}

// report prints a table per store and the query plans.
func report(w io.Writer, o options, results []storeResult) {
	fmt.Fprintf(w, "Workflow list, %d workflows, pages of %d, %d timed lists per case (ms).\n", o.n, pageSize, o.requests)
	fmt.Fprintln(w, "store: ListWorkflows in process; http: GET /v1/workflows of the server binary over loopback.")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tcase\trows\tstore p50\tp95\tp99\thttp p50\tp95\tp99\t")
	for _, r := range results {
		for _, m := range r.cases {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.store, m.name, m.rows,
				ms(m.store.P(50)), ms(m.store.P(95)), ms(m.store.P(99)), ms(m.http.P(50)), ms(m.http.P(95)), ms(m.http.P(99)))
		}
	}
	tw.Flush()
	for _, r := range results {
		fmt.Fprintf(w, "\n%s: seeded in %s. Query plans:\n", r.store, r.seeded.Round(100*time.Millisecond))
		for _, m := range r.cases {
			fmt.Fprintf(w, "  %s:\n    %s\n", m.name, strings.Join(m.plan, "\n    "))
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
