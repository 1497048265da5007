package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/store/sqlite"
)

// childEnv, when set, makes the test binary run agentplane with the
// arguments in it (separated by \x1f): the crash tests kill it for real.
const childEnv = "AGENTPLANE_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		startWithSmallStacks(strings.Split(args, "\x1f"))
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := run(ctx, strings.Split(args, "\x1f"), os.Getenv, os.Stdout, os.Stderr); err != nil {
			os.Exit(report(err, os.Stderr))
		}
		os.Exit(0)
	}
	// The tests marked parallel spend most of their time waiting on the
	// server and client processes they start, not on this process's CPU:
	// four run at once unless -test.parallel says otherwise.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", "4")
	}
	code := m.Run()
	if agentBuild.dir != "" {
		os.RemoveAll(agentBuild.dir)
	}
	os.Exit(code)
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freePorts(t)
}

// demoAddr is a free loopback address for a demo server whose APIs and
// agent listen 101 to 105 ports up (as the demo puts them beside :8080).
func demoAddr(t *testing.T) string {
	t.Helper()
	return freePorts(t, 101, 102, 103, 104, 105)
}

// givenPorts are the ports freePorts has handed out in this test process.
var givenPorts sync.Map

// freePorts returns a loopback address whose port, and the ports the
// given offsets above it, nothing listens on now. The ports are below the
// kernel's ephemeral range (32768 and up), where neither an outgoing
// connection of a busy machine nor another test's listener on port 0 takes
// one between the check and the server's start, and none is handed out
// twice in one test process: a second server would fail to listen, and
// its test, polling the address, would talk to the first.
func freePorts(t *testing.T, offsets ...int) string {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		ports := []int{port}
		for _, o := range offsets {
			ports = append(ports, port+o)
		}
		var held []net.Listener
		for _, p := range ports {
			if _, given := givenPorts.LoadOrStore(p, true); given {
				break // a port tried and refused stays given: there are thousands
			}
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				break
			}
			held = append(held, ln)
		}
		for _, ln := range held {
			ln.Close()
		}
		if len(held) == len(ports) {
			return "127.0.0.1:" + strconv.Itoa(port)
		}
	}
	t.Fatal("no free loopback port below 32000")
	return ""
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s/readyz did not answer 200 within 30 s", base)
}

func TestServeStartsOnEmbeddedDefaultsAndShutsDownGracefully(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data", dir, "--addr", addr}, func(string) string { return "" }, io.Discard, io.Discard)
	}()
	base := "http://" + addr
	waitReady(t, base)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope", "tools:read"},
		func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	if strings.Count(tok, ".") != 2 || strings.Contains(tok, "\n") {
		t.Fatalf("token command printed %q", out.String())
	}
	req, _ := http.NewRequest("GET", base+"/v1/tools", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/tools with a CLI token: %d", resp.StatusCode)
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"\nagentplane_workflow_executions_running 0\n", "\nagentplane_workflow_executions_queued 0\n"} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30 s of its context ending")
	}
}

func TestEnvironmentVariablesSetFlags(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGENTPLANE_DATA": dir, "AGENTPLANE_TENANT": "acme", "AGENTPLANE_SCOPE": "tools:read"}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token"}, func(k string) string { return env[k] }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/agentplane.db"); err != nil {
		t.Fatalf("AGENTPLANE_DATA was not used: %v", err)
	}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"serve", "--log-level", "loud"}, func(string) string { return "" }, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Fatalf("bad flag: %v", err)
	}
	err = run(context.Background(), []string{"serve"}, func(k string) string {
		return map[string]string{"AGENTPLANE_GC_PERCENT": "0"}[k]
	}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--gc-percent") {
		t.Fatalf("bad --gc-percent from its variable: %v", err)
	}
	err = run(context.Background(), []string{"serve", "--max-streams-per-tenant", "0"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--max-streams-per-tenant") {
		t.Fatalf("--max-streams-per-tenant 0: %v", err)
	}
	err = run(context.Background(), []string{"serve"}, func(k string) string {
		return map[string]string{"AGENTPLANE_MAX_RUNNING": "0"}[k]
	}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--max-running") {
		t.Fatalf("--max-running 0 from its variable: %v", err)
	}
	err = run(context.Background(), []string{"serve", "--max-procs", "-2"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--max-procs") {
		t.Fatalf("negative --max-procs: %v", err)
	}
	err = run(context.Background(), []string{"serve", "--database-url", "postgres://127.0.0.1:1/x", "--database-writers", "-1"},
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--database-writers") {
		t.Fatalf("negative --database-writers: %v", err)
	}
}

func TestClientsCreatePrintsACredentialThatWorks(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"clients", "create", "--data", dir, "--tenant", "acme", "--scope", "tools:read"},
		func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var id, secret string
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "client_id: "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "client_secret: "); ok {
			secret = v
		}
	}
	if id == "" || len(secret) < 40 {
		t.Fatalf("output %q", out.String())
	}
	var rot bytes.Buffer
	if err := run(context.Background(), []string{"keys", "rotate", "--data", dir}, func(string) string { return "" }, &rot, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rot.String(), "current key: ") {
		t.Fatalf("keys rotate printed %q", rot.String())
	}
}

// child is an agentplane server running in its own process.
type child struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string
	logs *lockedBuffer
}

// lockedBuffer collects a process's output while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startChild(t *testing.T, addr string, args ...string) *child {
	t.Helper()
	seedData(t, args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(append([]string{"serve", "--addr", addr}, args...), "\x1f"))
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, base: "http://" + addr, logs: &logs}
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	waitReady(t, c.base)
	return c
}

// seedData gives a server started on a new --data directory (and no
// --database-url) a database with its migrations applied, copied from one
// made once per test process: under the race detector, applying them costs
// each start a second of CPU.
func seedData(t *testing.T, args []string) {
	t.Helper()
	var data string
	for i, a := range args {
		switch {
		case a == "--database-url":
			return
		case a == "--data" && i+1 < len(args):
			data = args[i+1]
		}
	}
	if data == "" {
		return
	}
	path := filepath.Join(data, "agentplane.db")
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err := sqlite.WriteTestFile(path); err != nil {
		t.Fatal(err)
	}
}

// output is what the server printed so far, stdout and stderr.
func (c *child) output() string { return c.logs.String() }

// kill ends the server with SIGKILL: no shutdown, no cleanup.
func (c *child) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

func (c *child) do(method, path, token string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestDebugListenerServesProfilesApartFromTheAPI(t *testing.T) {
	addr, debug := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data", t.TempDir(), "--addr", addr, "--debug-addr", debug},
			func(string) string { return "" }, io.Discard, io.Discard)
	}()
	waitReady(t, "http://"+addr)
	for base, want := range map[string]int{"http://" + debug: 200, "http://" + addr: 404} {
		var resp *http.Response
		var err error
		for range 100 { // the debug listener starts beside the API
			if resp, err = http.Get(base + "/debug/pprof/"); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s/debug/pprof/: %d, want %d", base, resp.StatusCode, want)
		}
	}
	cancel()
	<-done
}
