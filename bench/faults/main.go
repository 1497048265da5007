// Command faults runs agentplane as several replicas (real processes) on
// one PostgreSQL and one Redis, puts a mixed load on them, injects faults
// during the load, and then checks that nothing acknowledged was lost:
//
//   - load: sync and streamed invocations of an agent that reads, writes
//     (an order, sent with an Idempotency-Key) and reads again; audit
//     queries; tool registrations; dry-run replays. Each request goes to
//     the next replica; one that fails to connect or answers 5xx is sent
//     again to another with the same Idempotency-Key;
//   - faults: one replica killed with SIGKILL and restarted; one replica's
//     database connections cut by a TCP proxy on loopback and restored
//     (PostgreSQL itself is shared and left alone); Redis made unreachable
//     the same way; the tool service stalling and answering 500 for a while;
//   - checks: every acknowledged workflow exists and is finished; no write
//     reached the tool service twice except re-sends with the same
//     Idempotency-Key; the tenant's audit chain verifies; every
//     acknowledged workflow's end is in the audit log.
//
// It prints requests by kind and status with p50/p99, the faults, and the
// checks, and exits 1 when a check fails.
//
//	go run ./bench/faults [-replicas 3] [-duration 60s] [-workers 6] [-short]
//
// It needs $AGENTPLANE_TEST_DATABASE_URL (a fresh database is created and
// dropped) and $AGENTPLANE_TEST_REDIS_URL, or -database-url and -redis-url.
// -short is the run CI makes: two replicas, 15 s of load.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/internal/netfault"
)

func main() { benchserver.Main("bench/faults", run) }

// options are the harness's settings.
type options struct {
	replicas    int
	workers     int
	duration    time.Duration
	settle      time.Duration
	databaseURL string
	redisURL    string
	repo        string
	binary      string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	replicas := fs.Int("replicas", 3, "agentplane processes sharing the database and Redis (2 to 8)")
	workers := fs.Int("workers", 6, "concurrent clients (1 to 64)")
	duration := fs.Duration("duration", 60*time.Second, "how long the load runs (10s to 10m); the faults are spread over it")
	settle := fs.Duration("settle", 45*time.Second, "how long acknowledged workflows may take to finish after the load")
	short := fs.Bool("short", false, "the CI run: 2 replicas, 4 workers, 15 s of load")
	dbURL := fs.String("database-url", getenv("AGENTPLANE_TEST_DATABASE_URL"), "PostgreSQL server to create the harness's database on")
	redisURL := fs.String("redis-url", getenv("AGENTPLANE_TEST_REDIS_URL"), "Redis the replicas share")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{replicas: *replicas, workers: *workers, duration: *duration, settle: *settle,
		databaseURL: *dbURL, redisURL: *redisURL, repo: *repo, binary: *binary}
	if *short {
		o.replicas, o.workers, o.duration = 2, 4, 15*time.Second
	}
	switch {
	case o.databaseURL == "" || o.redisURL == "":
		return options{}, errors.New("needs PostgreSQL and Redis: set AGENTPLANE_TEST_DATABASE_URL and AGENTPLANE_TEST_REDIS_URL (or -database-url, -redis-url)")
	case o.replicas < 2 || o.replicas > 8:
		return options{}, errors.New("-replicas must be from 2 to 8")
	case o.workers < 1 || o.workers > 64:
		return options{}, errors.New("-workers must be from 1 to 64")
	case o.duration < 10*time.Second || o.duration > 10*time.Minute:
		return options{}, errors.New("-duration must be from 10s to 10m")
	case o.settle <= 0 || o.settle > 10*time.Minute:
		return options{}, errors.New("-settle must be positive and at most 10m")
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "faults", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	dbURL, drop, err := benchserver.CreateDatabase(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, drop()) }()

	tools := newToolService()
	defer tools.Close()
	c, err := startCluster(ctx, o, bin, tmp, dbURL, stderr)
	if err != nil {
		return err
	}
	defer c.stop()
	if err := c.setup(ctx, tools); err != nil {
		return err
	}

	fmt.Fprintf(stderr, "load: %d workers on %d replicas for %v, faults injected meanwhile …\n", o.workers, o.replicas, o.duration)
	l := newLoad(c, tools)
	faults := c.inject(ctx, o.duration, tools)
	l.run(ctx, o.workers, o.duration)
	fired := <-faults
	fmt.Fprintf(stderr, "load done: %d workflows acknowledged; checking …\n", len(l.acked()))
	res := check(ctx, c, l, tools, o.settle)
	report(stdout, o, l, fired, res)
	if !res.ok() {
		return errors.New("a check failed (see the table)")
	}
	return nil
}

// proxied returns rawURL with its host replaced by a proxy's address.
func proxied(rawURL string, p *netfault.Proxy) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	u.Host = p.Addr()
	return u.String(), nil
}

// hostOf is the host:port a URL names.
func hostOf(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return "", fmt.Errorf("%s names no port", u.Redacted())
	}
	return u.Host, nil
}

func replicaDir(tmp string, i int) string { return filepath.Join(tmp, fmt.Sprintf("replica-%d", i)) }
