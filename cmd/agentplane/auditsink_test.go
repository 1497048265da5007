package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/siem"
)

// rsyslog is Debian's rsyslogd run by a test: imtcp on a loopback port,
// every message's MSG (the OCSF event) written as one line of a file.
type rsyslog struct {
	t                   *testing.T
	bin, dir, port, out string
	cmd                 *exec.Cmd
}

func rsyslogd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/rsyslogd")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("rsyslogd is not installed (Debian package rsyslog; .ci/run installs it)")
		}
		t.Skip("rsyslogd is not installed (apt-get install rsyslog); CI=1 makes this a failure")
	}
	return bin
}

func startRsyslog(t *testing.T) *rsyslog {
	t.Helper()
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	r := &rsyslog{t: t, bin: rsyslogd(t), dir: dir, port: port, out: filepath.Join(dir, "audit.log")}
	conf := fmt.Sprintf(`global(workDirectory=%q maxMessageSize="256k")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port=%q)
template(name="ocsf" type="string" string="%%msg%%\n")
*.* action(type="omfile" file=%q template="ocsf")
`, dir, port, r.out)
	if err := os.WriteFile(filepath.Join(dir, "rsyslog.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *rsyslog) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "-n", "-f", filepath.Join(r.dir, "rsyslog.conf"), "-i", filepath.Join(r.dir, "rsyslog.pid"))
	var logs lockedBuffer
	r.cmd.Stdout, r.cmd.Stderr = &logs, &logs
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+r.port); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("rsyslogd did not listen on %s within 10 s:\n%s", r.port, logs.String())
}

// stop ends rsyslogd as its service would, with SIGTERM.
func (r *rsyslog) stop() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

// events are the events rsyslog wrote, in the order it received them.
func (r *rsyslog) events() []json.RawMessage {
	r.t.Helper()
	f, err := os.Open(r.out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var out []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			out = append(out, json.RawMessage(bytes.Clone(line)))
		}
	}
	return out
}

// exported is the tenant's chain as GET /v1/audit/export serves it now.
func exported(t *testing.T, base, tok string) []siem.Event {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/audit/export?format=ocsf&limit=5000", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, body)
	}
	lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
	var out []siem.Event
	for _, l := range lines[:len(lines)-1] {
		var e siem.Event
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// received checks what rsyslog has of the tenant's chain against want (the
// chain as exported): every record, in seq order, the same record (id and
// hash), each event with its OCSF class's required attributes. A batch
// sent again after a failure may repeat records already received (at least
// once), never skip one or go back past the first repeat. It returns how
// many of want arrived and how many arrived twice.
func received(t *testing.T, facts *siem.SchemaFacts, events []json.RawMessage, tenant string, want []siem.Event) (got, repeats int) {
	t.Helper()
	next := int64(1)
	for _, raw := range events {
		var e siem.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("rsyslog wrote a line that is not an event: %s", raw)
		}
		if errs := facts.Check(raw); len(errs) > 0 {
			t.Fatalf("event against OCSF %s: %v\n%s", facts.Version, errs, raw)
		}
		if e.Metadata.TenantUID != tenant {
			continue
		}
		s := e.Metadata.Sequence
		switch {
		case s < next:
			repeats++
		case s == next:
			if int(s) <= len(want) {
				w := want[s-1]
				if w.Metadata.UID != e.Metadata.UID || len(e.AttestationList) != 1 || len(w.AttestationList) != 1 ||
					w.AttestationList[0].Fingerprint != e.AttestationList[0].Fingerprint {
					t.Fatalf("seq %d: rsyslog has record %s (%+v), the chain %s (%+v)", s, e.Metadata.UID, e.AttestationList, w.Metadata.UID, w.AttestationList)
				}
			}
			next++
		default:
			t.Fatalf("%s: seq %d reached rsyslog before seq %d", tenant, s, next)
		}
	}
	return int(min(next-1, int64(len(want)))), repeats
}

// waitReceived waits until rsyslog has every record of want.
func waitReceived(t *testing.T, r *rsyslog, facts *siem.SchemaFacts, want []siem.Event, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, repeats := received(t, facts, r.events(), "acme", want)
		if got == len(want) {
			return repeats
		}
		if time.Now().After(deadline) {
			t.Fatalf("rsyslog has %d of the %d records after %s", got, len(want), within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sinkFailed is what a server logs when a batch did not reach its sink.
const sinkFailed = "audit sink delivery failed"

// waitOutput waits until c has printed what n times.
func waitOutput(t *testing.T, c *child, what string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(c.output(), what) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the server printed %q %d times in 60 s, want %d", what, strings.Count(c.output(), what), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRsyslogReceivesEveryAuditRecordInOrderAcrossRestarts(t *testing.T) {
	facts, err := siem.LoadSchemaFacts("../../internal/siem/testdata/ocsf-" + siem.OCSFVersion + ".json")
	if err != nil {
		t.Fatal(err)
	}
	syslog := startRsyslog(t)
	dir, addr := t.TempDir(), freeAddr(t)
	// Loopback is refused unless named: the sink and the tool API are.
	flags := []string{"--data", dir, "--allow-private-host", "127.0.0.1", "--audit-sink", "syslog+tcp://127.0.0.1:" + syslog.port}
	a := startChild(t, addr, flags...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke workflows:read audit:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	api := newWriteAPI(t)
	close(api.release) // no write waits
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "side_effects": []string{"create"}}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "settle", "definition": json.RawMessage(crashAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	invoke := func(c *child) {
		t.Helper()
		if code, body := c.do("POST", "/v1/agents/settle/invoke", tok, map[string]any{"goal": "settle tx-1"}); code != 200 {
			t.Fatalf("invoke: %d %v", code, body)
		}
	}
	invoke(a)
	chain := exported(t, a.base, tok)
	actions := map[string]bool{}
	for _, e := range chain {
		actions[e.API.Operation] = true
	}
	for _, want := range []string{"tool.create", "agent.deploy", "agent.invoke", "workflow.step", "tool.call", "workflow.finish"} {
		if !actions[want] {
			t.Fatalf("the run's chain has no %s record: %v", want, actions)
		}
	}
	waitReceived(t, syslog, facts, chain, 30*time.Second)

	// agentplane restarts (SIGTERM, as a deployment would): the next one
	// goes on from the sink's cursor in the store.
	a.cmd.Process.Signal(syscall.SIGTERM)
	a.cmd.Wait()
	b := startChild(t, addr, flags...)
	invoke(b)
	chain = exported(t, b.base, tok)
	waitReceived(t, syslog, facts, chain, 30*time.Second)

	// rsyslog restarts: what is recorded while it is down arrives after it
	// is back, in order, and requests are not held up meanwhile.
	failures := strings.Count(b.output(), sinkFailed)
	syslog.stop()
	start := time.Now()
	invoke(b)
	invoke(b)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("two invocations took %s while the sink was down", d)
	}
	chain = exported(t, b.base, tok)
	waitOutput(t, b, sinkFailed, failures+1) // the pusher fails at least once
	syslog.start()
	repeats := waitReceived(t, syslog, facts, chain, 60*time.Second)
	t.Logf("rsyslog received the %d records of acme's chain in order (%d sent twice after a failure)", len(chain), repeats)

	// The CLI exports the same chain, page after page, and resumes from
	// the cursor it printed.
	e := &cliEnv{t: t, url: b.base, config: t.TempDir(), dir: t.TempDir(), token: tok}
	stdout, stderr, code := e.run("audit", "export", "--limit", "7")
	if code != 0 {
		t.Fatalf("audit export: exit %d: %s", code, stderr)
	}
	var lines []json.RawMessage
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		lines = append(lines, json.RawMessage(l))
	}
	if got, repeats := received(t, facts, lines, "acme", chain); got != len(chain) || repeats != 0 {
		t.Fatalf("audit export printed %d of the %d records (%d twice)", got, len(chain), repeats)
	}
	cursor := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(stderr), "next cursor:"))
	more := e.ok("audit", "export", "--cursor", cursor)
	var first siem.Event
	if err := json.Unmarshal([]byte(strings.SplitN(more, "\n", 2)[0]), &first); err != nil || first.API.Operation != "audit.export" ||
		first.Metadata.Sequence != int64(len(lines))+1 {
		t.Errorf("export from the printed cursor %q starts with %+v (%v), want the first export's own record, seq %d", cursor, first, err, len(lines)+1)
	}

	resp, err := http.Get(b.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `agentplane_audit_sink_lag_records{sink="syslog+tcp://127.0.0.1:`+syslog.port+`"}`) {
		t.Errorf("/metrics has no lag of the sink")
	}
}

func TestServeRefusesABadAuditSink(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--audit-sink", "udp://siem.example:514"}, `--audit-sink "udp://siem.example:514": unknown scheme "udp": use one of syslog+tcp, syslog+tls, https`},
		{[]string{"--audit-sink", "syslog+tcp://127.0.0.1:514"}, "loopback"},
		{[]string{"--audit-sink", "https://siem.example/ingest"}, "--audit-sink-secret-ref"},
		{[]string{"--audit-sink-ca-file", "ca.pem"}, "give it too"},
		{[]string{"--audit-sink", "syslog+tls://siem.example:6514", "--audit-sink-ca-file", "/nonexistent/ca.pem"}, "--audit-sink-ca-file"},
	} {
		args := append([]string{"serve", "--data", t.TempDir(), "--addr", freeAddr(t)}, tc.args...)
		err := run(t.Context(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want it to say %q", tc.args, err, tc.want)
		}
	}
}
