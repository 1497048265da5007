// Package benchserver runs the real server binary for benchmarks: it builds
// ./cmd/agentplane, starts `agentplane serve` as its own process on a free
// loopback port, mints a token with the same binary and store, and reads
// the process's CPU time and resident memory from /proc.
package benchserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Build builds ./cmd/agentplane of the module at repo into dir.
func Build(ctx context.Context, repo, dir string) (string, error) {
	bin := filepath.Join(dir, "agentplane")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/agentplane")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/agentplane: %w\n%s", err, out)
	}
	return bin, nil
}

// Binary returns given when it names a server binary already built, else
// builds ./cmd/agentplane of the module at repo into dir, saying so on log.
func Binary(ctx context.Context, given, repo, dir string, log io.Writer) (string, error) {
	if given != "" {
		return given, nil
	}
	fmt.Fprintln(log, "building ./cmd/agentplane …")
	return Build(ctx, repo, dir)
}

// Config says how to start one server.
type Config struct {
	Binary string
	// data is the data directory (the SQLite store lives there).
	Data string
	// databaseURL, when set, makes the server use PostgreSQL.
	DatabaseURL string
	// Args are more flags of serve.
	Args []string
}

// Server is a running `agentplane serve` process.
type Server struct {
	cfg   Config
	addr  string
	cmd   *exec.Cmd
	log   string
	done  chan struct{}
	err   error
	Token string
	// HTTP sends Do's requests (http.DefaultClient when nil).
	HTTP *http.Client
}

// storeArgs are the flags naming the store, for serve and token alike.
func (c Config) storeArgs() []string {
	args := []string{"--data", c.Data}
	if c.DatabaseURL != "" {
		args = append(args, "--database-url", c.DatabaseURL)
	}
	return args
}

// childEnv is the environment of the server and token processes: this
// process's without the AGENTPLANE_* settings (an AGENTPLANE_DATABASE_URL
// would move the SQLite row to PostgreSQL, an AGENTPLANE_REDIS_URL the rate
// limiter to Redis), except AGENTPLANE_DEBUG_ADDR, which profiles the server.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTPLANE_") || strings.HasPrefix(kv, "AGENTPLANE_DEBUG_ADDR=") {
			env = append(env, kv)
		}
	}
	return env
}

// Start starts the server on a free loopback port and waits until
// /readyz answers 200.
func Start(ctx context.Context, c Config) (*Server, error) {
	if err := os.MkdirAll(c.Data, 0o700); err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: c, addr: addr, log: filepath.Join(c.Data, "server.log"), done: make(chan struct{})}
	logFile, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--addr", addr,
		"--allow-private-networks",
		"--rate-limit", "100000000", "--rate-limit-burst", "100000000",
		"--log-level", "warn"}, c.storeArgs()...)
	args = append(args, c.Args...)
	s.cmd = exec.Command(c.Binary, args...)
	s.cmd.Env = childEnv()
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start server: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// FreeAddr returns a loopback address with a port free at the moment.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (s *Server) BaseURL() string { return "http://" + s.addr }

func (s *Server) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("server exited before it was ready (%v):\n%s", s.err, s.LogTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(s.BaseURL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("server not ready after %s:\n%s", limit, s.LogTail())
}

// MintToken mints a token of the scopes with the same binary and store and
// makes it the one Do sends.
func (s *Server) MintToken(ctx context.Context, scopes string) error {
	tok, err := s.MintTokenFor(ctx, "", scopes)
	if err == nil {
		s.Token = tok
	}
	return err
}

// MintTokenFor mints a token of the scopes for the subject sub (the token
// command's default when empty) and returns it.
func (s *Server) MintTokenFor(ctx context.Context, sub, scopes string) (string, error) {
	args := append([]string{"--addr", s.addr, "--tenant", "bench", "--scope", scopes}, s.cfg.storeArgs()...)
	if sub != "" {
		args = append(args, "--sub", sub)
	}
	return Token(ctx, s.cfg.Binary, args...)
}

// Token runs `agentplane token` of binary with args and returns the token.
func Token(ctx context.Context, binary string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, binary, append([]string{"token"}, args...)...)
	cmd.Env = childEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("agentplane token: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	tok := strings.TrimSpace(string(out))
	if tok == "" {
		return "", errors.New("agentplane token printed nothing")
	}
	return tok, nil
}

// CPU returns the server process's CPU time so far (user + system), or 0
// where /proc is not available.
func (s *Server) CPU() time.Duration { return ProcessCPU(strconv.Itoa(s.cmd.Process.Pid)) }

// ProcessCPU returns the CPU time so far (user + system) of the process
// pid ("self" for this one), or 0 where /proc is not available.
func ProcessCPU(pid string) time.Duration {
	f := procStat(pid)
	if f == nil {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// MinorFaults returns the server process's minor page faults so far: each
// is a first touch of a page of memory the kernel had not yet given it.
func (s *Server) MinorFaults() int64 { return ProcessMinorFaults(strconv.Itoa(s.cmd.Process.Pid)) }

// ProcessMinorFaults returns the minor page faults so far of the process
// pid, or 0 where /proc is not available.
func ProcessMinorFaults(pid string) int64 {
	f := procStat(pid)
	if f == nil {
		return 0
	}
	n, err := strconv.ParseInt(f[7], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// procStat returns the fields of /proc/pid/stat after the command name
// (which may hold spaces), from the state on, or nil.
func procStat(pid string) []string {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return nil
	}
	return f
}

// Exited reports an error when the server stopped on its own.
func (s *Server) Exited() error {
	select {
	case <-s.done:
		return fmt.Errorf("server exited during the run (%v):\n%s", s.err, s.LogTail())
	default:
		return nil
	}
}

// Stop asks the server to drain and stop, and kills it after 10 s.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Addr is the server's loopback address.
func (s *Server) Addr() string { return s.addr }

// LogTail is the end of the server's log, for error messages.
func (s *Server) LogTail() string {
	data, _ := os.ReadFile(s.log)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// StartOn starts a server on the named store: "postgres" in a fresh
// database on the server at adminURL, anything else SQLite under c.Data.
// stop stops the server and drops the database.
func StartOn(ctx context.Context, c Config, store, adminURL string) (srv *Server, stop func() error, err error) {
	drop := func() error { return nil }
	if store == "postgres" {
		if c.DatabaseURL, drop, err = CreateDatabase(ctx, adminURL); err != nil {
			return nil, nil, err
		}
	}
	if srv, err = Start(ctx, c); err != nil {
		return nil, nil, errors.Join(err, drop())
	}
	return srv, func() error { srv.Stop(); return drop() }, nil
}

// CreateDatabase creates a fresh database on the server at adminURL and
// returns its URL and a function that drops it.
func CreateDatabase(ctx context.Context, adminURL string) (string, func() error, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "agentplane_bench_" + hex.EncodeToString(b[:])
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
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		defer c.Close(dctx)
		if _, err := c.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// RSS returns the server process's resident set size in bytes, or 0 where
// /proc is not available.
func (s *Server) RSS() int64 { return s.status("VmRSS:") }

// status reads a size in kB from the process's /proc status, in bytes.
func (s *Server) status(field string) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// Do sends a request with the server's token and a JSON body (when body is
// not nil) and returns the status and the response body.
func (s *Server) Do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	return s.DoWith(ctx, s.Token, method, path, body)
}

// DoWith is Do with another token.
func (s *Server) DoWith(ctx context.Context, token, method, path string, body any) (int, []byte, error) {
	return s.DoHeader(ctx, token, method, path, nil, body)
}

// DoHeader is DoWith with more request headers.
func (s *Server) DoHeader(ctx context.Context, token, method, path string, header http.Header, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.BaseURL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := s.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// ResetPeakRSS starts the process's peak resident set size (PeakRSS) over
// from its current size.
func (s *Server) ResetPeakRSS() error {
	return os.WriteFile("/proc/"+strconv.Itoa(s.cmd.Process.Pid)+"/clear_refs", []byte("5"), 0)
}

// PeakRSS returns the process's peak resident set size in bytes since it
// started or since ResetPeakRSS, or 0 where /proc is not available.
func (s *Server) PeakRSS() int64 { return s.status("VmHWM:") }

// DefaultDatabaseURL is the PostgreSQL server a benchmark uses when neither
// its -database-url flag nor AGENTPLANE_TEST_DATABASE_URL names one.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// StoreFlags adds a benchmark's -store and -database-url flags to fs;
// call Stores and DatabaseURL once fs is parsed.
type StoreFlags struct {
	store, databaseURL *string
}

// AddStoreFlags defines -store and -database-url on fs.
func AddStoreFlags(fs *flag.FlagSet) StoreFlags {
	return StoreFlags{
		store:       fs.String("store", "both", "store to measure: sqlite, postgres or both"),
		databaseURL: fs.String("database-url", "", "PostgreSQL server to create the benchmark database on (default $AGENTPLANE_TEST_DATABASE_URL, else "+DefaultDatabaseURL+")"),
	}
}

// Stores returns the stores -store names.
func (f StoreFlags) Stores() ([]string, error) {
	switch *f.store {
	case "sqlite", "postgres":
		return []string{*f.store}, nil
	case "both":
		return []string{"sqlite", "postgres"}, nil
	}
	return nil, fmt.Errorf("-store must be sqlite, postgres or both, not %q", *f.store)
}

// DatabaseURL returns the PostgreSQL server to use: the flag's, else
// AGENTPLANE_TEST_DATABASE_URL, else DefaultDatabaseURL.
func (f StoreFlags) DatabaseURL(getenv func(string) string) string {
	for _, u := range []string{*f.databaseURL, getenv("AGENTPLANE_TEST_DATABASE_URL")} {
		if u != "" {
			return u
		}
	}
	return DefaultDatabaseURL
}

// Main runs a benchmark command: run gets the arguments and a context
// cancelled by SIGINT or SIGTERM; an error is printed after name and exits 1.
func Main(name string, run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Workdir makes a temporary directory for a benchmark named name and puts
// the server binary there (built from repo unless binary names one);
// cleanup removes the directory.
func Workdir(ctx context.Context, name, binary, repo string, log io.Writer) (bin, dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", "agentplane-bench-"+name+"-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if bin, err = Binary(ctx, binary, repo, dir, log); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return bin, dir, cleanup, nil
}

// Goroutines reads the server's goroutine count from its /metrics
// (go_goroutines, runtime.NumGoroutine): cheap enough to sample while the
// server is measured, where a goroutine profile walks every goroutine's
// stack with the world stopped (14 % of the server's CPU at 7,000
// goroutines sampled every 200 ms).
func (s *Server) Goroutines(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.BaseURL()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("the server's /metrics (status %d) has no go_goroutines", resp.StatusCode)
}
