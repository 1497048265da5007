package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/console/consoletest"
)

// cliAPI is a loopback tool API for the client's tests: a transaction
// read, and a customer read that waits until the test releases it, so a
// streamed invoke's first line can be seen while the workflow still runs.
type cliAPI struct {
	srv     *httptest.Server
	release chan struct{}
}

const cliSpec = `{"openapi": "3.0.3", "info": {"title": "payments", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {
  "/transactions/{id}": {"get": {"operationId": "getTransaction", "summary": "Get a transaction",
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}},
  "/customers/{id}": {"get": {"operationId": "getCustomer", "summary": "Get a customer",
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}}}}`

func newCLIAPI(t *testing.T) *cliAPI {
	a := &cliAPI{release: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/openapi.json":
			fmt.Fprintf(w, cliSpec, "http://"+r.Host)
		case strings.HasPrefix(r.URL.Path, "/transactions/"):
			json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/transactions/"), "amount": 1200.0, "customer": "cus_7"})
		case strings.HasPrefix(r.URL.Path, "/customers/"):
			select {
			case <-a.release:
			case <-time.After(20 * time.Second):
			}
			json.NewEncoder(w).Encode(map[string]any{"id": "cus_7", "risk": "medium"})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
		a.srv.Close()
	})
	return a
}

func cliAgent(version string, threshold int) string {
	return fmt.Sprintf(`name: fraud-triage
version: "%s"
description: threshold %d
definition:
  tools: [payments]
  inputs: {type: object, required: [transaction_id], properties: {transaction_id: {type: string}}}
  steps:
    - {action: fetch_transaction, call: payments.getTransaction, args: {id: context.transaction_id}, save_as: txn}
    - {action: fetch_customer, call: payments.getCustomer, args: {id: txn.customer}}
    - {action: fraud_score, score: "txn.amount > %d.0 ? 0.91 : 0.12"}
    - action: route_queue
      route: [{when: "score >= 0.8", queue: fraud-review}, {queue: standard}]
  outcome: "queue == 'fraud-review' ? 'escalated' : 'cleared'"
`, version, threshold, threshold)
}

// cliEnv runs the client as its own process against one server.
type cliEnv struct {
	t      *testing.T
	url    string
	config string
	dir    string
	token  string // AGENTPLANE_TOKEN, empty for none
}

// command is the client process for args, not started.
func (e *cliEnv) command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"),
		"AGENTPLANE_URL="+e.url, "XDG_CONFIG_HOME="+e.config, "AGENTPLANE_TOKEN="+e.token)
	cmd.Dir = e.dir
	return cmd
}

// run runs the client to its end and returns stdout, stderr and the exit code.
func (e *cliEnv) run(args ...string) (string, string, int) {
	e.t.Helper()
	cmd := e.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		e.t.Fatalf("agentplane %v: %v", args, err)
	}
	return out.String(), errb.String(), 0
}

// ok runs the client and fails the test unless it exits 0.
func (e *cliEnv) ok(args ...string) string {
	e.t.Helper()
	out, errs, code := e.run(args...)
	if code != 0 {
		e.t.Fatalf("agentplane %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (e *cliEnv) write(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestCLIQuickstart drives the client binary through the quickstart against
// a real server process: login, register, deploy, a streamed invoke whose
// first step prints while the workflow still runs, replay, audit verify.
func TestCLIQuickstart(t *testing.T) {
	t.Parallel()
	api := newCLIAPI(t)
	data := t.TempDir()
	addr := freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks")
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir()}

	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:read tools:write agents:read agents:write agents:invoke workflows:read workflows:replay audit:read tool:*"},
		func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("login", "--token", strings.TrimSpace(tok.String())); !strings.Contains(out, "logged in to "+srv.base) {
		t.Errorf("login printed %q", out)
	}
	// Without a URL anywhere, login uses the server that issued the token.
	bare := &cliEnv{t: t, config: t.TempDir(), dir: t.TempDir()}
	if out := bare.ok("login", "--token", strings.TrimSpace(tok.String())); !strings.Contains(out, "logged in to "+srv.base) {
		t.Errorf("login without --url printed %q, want the token's issuer %s", out, srv.base)
	}
	bare.ok("agents", "list")
	if st, err := os.Stat(filepath.Join(e.config, "agentplane", "config.yaml")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v, mode %v; want 0600", err, st)
	}

	e.ok("tools", "register", "--name", "payments", "--type", "openapi", "--spec-url", api.srv.URL+"/openapi.json")
	if out := e.ok("tools", "list"); !strings.Contains(out, "payments") || !strings.Contains(out, "openapi") {
		t.Errorf("tools list:\n%s", out)
	}
	if out := e.ok("tools", "ops", "payments"); !strings.Contains(out, "getCustomer") || !strings.Contains(out, "Get a transaction") {
		t.Errorf("tools ops:\n%s", out)
	}
	if out := e.ok("tools", "ops", "payments", "--search", "zebra"); out != "no operations of payments match \"zebra\"\n" {
		t.Errorf("tools ops --search with no match printed %q", out)
	}
	e.ok("agents", "deploy", e.write("v1.yaml", cliAgent("1", 1000)))
	e.ok("agents", "deploy", e.write("v2.yaml", cliAgent("2", 5000)))
	// The agent shows the description of the version that runs, the default.
	if out := e.ok("agents", "get", "fraud-triage"); !strings.Contains(out, "threshold 1000") || strings.Contains(out, "threshold 5000") {
		t.Errorf("agents get shows another description than the default version's:\n%s", out)
	}
	// The A2A card is the default version's.
	if out := e.ok("agents", "card", "fraud-triage"); !strings.Contains(out, `"protocolBinding": "JSONRPC"`) || !strings.Contains(out, `"version": "1"`) {
		t.Errorf("agents card:\n%s", out)
	}

	// The streamed invoke prints its first step before the workflow ends.
	cmd := e.command("invoke", "fraud-triage", "--goal", "triage tx_42", "--context", "transaction_id=tx_42", "--stream")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("no line from the streamed invoke: %s", stderr.String())
	}
	first := lines.Text()
	if !strings.Contains(first, "fetch_transaction") || !strings.Contains(first, "ok") || !strings.Contains(first, "payments.getTransaction") {
		t.Errorf("first line %q, want the fetch_transaction step", first)
	}
	close(api.release) // only now may the second step finish
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("streamed invoke: %v: %s", err, stderr.String())
	}
	if len(rest) != 4 || !strings.Contains(rest[3], "completed, outcome escalated") {
		t.Fatalf("streamed invoke printed %q then %q", first, rest)
	}
	wf := strings.Fields(rest[3])[1]

	// --async answers at once with the id and the command that follows it.
	async := e.ok("invoke", "fraud-triage", "--goal", "triage tx_43", "--context", "transaction_id=tx_43", "--async")
	if f := strings.Fields(async); len(f) < 4 || !strings.HasPrefix(f[1], "wf_") ||
		!strings.Contains(async, "is running\nfollow it with: agentplane workflows events "+f[1]+" --follow\n") {
		t.Errorf("invoke --async printed %q", async)
	}
	if _, errs, code := e.run("invoke", "fraud-triage", "--goal", "g", "--async", "--stream"); code != exitUsage || !strings.Contains(errs, "--async and --stream") {
		t.Errorf("invoke --async --stream: exit %d %q", code, errs)
	}

	out := e.ok("replay", wf, "--target", "fraud-triage@2")
	for _, want := range []string{"outcome: escalated -> cleared", "delta: 0 added, 2 changed, 0 removed, 0 tool calls changed",
		"changed  fraud_score", "viewer: " + srv.base + "/replays/rpl_"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	if out := e.ok("replay", wf, "--target", "fraud-triage@2", "--unrecorded-calls", "read"); !strings.Contains(out, "(dry run, llm recorded, unrecorded calls read)") {
		t.Errorf("replay --unrecorded-calls read output:\n%s", out)
	}
	viewer := out[strings.Index(out, "viewer: ")+len("viewer: "):]
	resp, err := http.Get(strings.TrimSpace(viewer))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("viewer URL answered %d", resp.StatusCode)
	}
	if out := e.ok("audit", "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("audit verify: %q", out)
	}

	t.Run("every read prints JSON with -o json", func(t *testing.T) {
		e := *e
		e.t = t
		for _, args := range [][]string{
			{"tools", "list"}, {"tools", "get", "payments"}, {"tools", "ops", "payments", "--search", "customer"},
			{"agents", "list"}, {"agents", "get", "fraud-triage"}, {"agents", "get", "fraud-triage@2"}, {"agents", "versions", "fraud-triage"},
			{"workflows", "list", "--agent", "fraud-triage"}, {"workflows", "get", wf}, {"workflows", "events", wf},
			{"replay", wf, "--target", "fraud-triage@1"}, {"audit", "query", "--action", "workflow.replay"}, {"audit", "verify"},
			{"invoke", "fraud-triage@2", "--goal", "g", "--context", "transaction_id=tx_1"},
		} {
			out := e.ok(append(args, "-o", "json")...)
			var v map[string]any
			if err := json.Unmarshal([]byte(out), &v); err != nil || len(v) == 0 {
				t.Errorf("%v -o json: %v\n%s", args, err, out)
			}
			if y := e.ok(append(args[:len(args):len(args)], "-o", "yaml")...); strings.HasPrefix(y, "{") || !strings.Contains(y, ": ") {
				t.Errorf("%v -o yaml:\n%s", args, y)
			}
		}
		// A followed stream prints one JSON object per event.
		out := e.ok("workflows", "events", wf, "--follow", "-o", "json")
		evLines := strings.Split(strings.TrimSpace(out), "\n")
		for _, l := range evLines {
			if !json.Valid([]byte(l)) {
				t.Errorf("events --follow -o json line %q is not JSON", l)
			}
		}
		if len(evLines) != 5 || !strings.Contains(evLines[4], `"complete"`) {
			t.Errorf("events --follow -o json: %d lines:\n%s", len(evLines), out)
		}
	})

	t.Run("--since takes a time or a duration before now", func(t *testing.T) {
		e := *e
		e.t = t
		since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		for _, args := range [][]string{
			{"workflows", "list", "--since", "1h"}, {"workflows", "list", "--since", since},
			{"audit", "query", "--workflow-id", wf, "--since", "1d"}, {"audit", "query", "--workflow-id", wf, "--since", since},
		} {
			if out := e.ok(args...); !strings.Contains(out, wf) {
				t.Errorf("%v does not list %s:\n%s", args, wf, out)
			}
		}
		audit := e.ok("audit", "query", "--workflow-id", wf)
		for _, l := range strings.Split(strings.TrimSpace(audit), "\n") {
			if strings.HasSuffix(l, " 0") {
				t.Errorf("audit query prints status 0 for a record of no HTTP request: %q", l)
			}
		}
		if out := e.ok("workflows", "list", "--until", "1h"); strings.Contains(out, wf) {
			t.Errorf("workflows list --until 1h lists %s, started just now:\n%s", wf, out)
		}
	})

	t.Run("an invoke the engine ends exits 6", func(t *testing.T) {
		e := *e
		e.t = t
		for _, stream := range []bool{false, true} {
			args := []string{"invoke", "fraud-triage@2", "--goal", "g", "--context", "transaction_id=tx_1", "--max-tool-calls", "1"}
			if stream {
				args = append(args, "--stream")
			}
			out, errs, code := e.run(args...)
			if code != exitWorkflow || !strings.Contains(errs, "ended limit_exceeded") || !strings.Contains(out, "tool_call_limit_reached") {
				t.Errorf("stream %v: exit %d, stderr %q, stdout:\n%s\nwant exit %d, the steps and why", stream, code, errs, out, exitWorkflow)
			}
		}
	})

	t.Run("errors print the problem and exit by class", func(t *testing.T) {
		e := *e
		e.t = t
		var narrow bytes.Buffer
		if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope", "tools:read"},
			func(string) string { return "" }, &narrow, io.Discard); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			args   []string
			code   int
			stderr string
		}{
			{"unknown tool", []string{"tools", "get", "nope"}, exitNotFound, `no tool named "nope"`},
			{"unknown workflow", []string{"workflows", "get", "wf_01J00000000000000000000000"}, exitNotFound, "Not found: "},
			{"unknown version", []string{"replay", wf, "--target", "fraud-triage@9"}, exitNotFound, "Agent version not found: "},
			{"missing scope", []string{"agents", "deploy", e.write("v3.yaml", cliAgent("3", 10)), "--token", strings.TrimSpace(narrow.String())},
				exitAuth, "Insufficient scope: this endpoint needs the scope agents:write"},
			{"bad token", []string{"tools", "list", "--token", "nonsense"}, exitAuth, "Unauthenticated: "},
			{"invalid definition", []string{"agents", "deploy", e.write("bad.yaml", "name: fraud-triage\ndefinition: {tools: [nope], steps: []}\n")},
				exitOther, `Validation failed: 2 fields are invalid (definition.tools[0]: no tool named "nope" is registered; `},
			{"context the inputs refuse", []string{"invoke", "fraud-triage", "--goal", "g"}, exitOther, "Validation failed: "},
			{"an argument the operation does not take", []string{"agents", "deploy", e.write("args.yaml", strings.Replace(cliAgent("9", 10), "{id: context.transaction_id}", "{ID: context.transaction_id}", 1))},
				exitOther, `definition.steps[0].args.ID: step 1 (fetch_transaction): "ID" is not an argument of payments.getTransaction (did you mean "id"?); it takes id`},
			{"no target", []string{"replay", wf}, exitUsage, "--target is required"},
			{"bad llm", []string{"replay", wf, "--target", "fraud-triage@1", "--llm", "sometimes"}, exitOther, `Validation failed: llm: "sometimes" is not recorded`},
			{"concurrency of one replay", []string{"replay", wf, "--target", "fraud-triage@1", "--concurrency", "4"}, exitUsage, "--concurrency applies to --batch only"},
			{"no goal", []string{"invoke", "fraud-triage"}, exitUsage, "--goal is required"},
			{"no tool", []string{"tools", "ops"}, exitUsage, "agentplane: tools ops takes a tool name or id (see agentplane tools ops --help)"},
			{"bad context", []string{"invoke", "fraud-triage", "--goal", "g", "--context", "novalue"}, exitUsage, `--context "novalue" is not key=value`},
			{"unknown flag", []string{"tools", "list", "--bogus"}, exitUsage, "unknown flag: --bogus"},
			{"unknown subcommand", []string{"tools", "lst"}, exitUsage, `unknown command "lst" for "agentplane tools"; did you mean get or list?`},
			{"unknown subcommand, nothing close", []string{"clients", "frobnicate"}, exitUsage, `unknown command "frobnicate" for "agentplane clients" (see agentplane clients --help)`},
			{"a subcommand of another group", []string{"tools", "search", "refund"}, exitUsage, `unknown command "search" for "agentplane tools"; did you mean agentplane operations search?`},
			{"missing file", []string{"agents", "deploy", filepath.Join(e.dir, "none.yaml")}, exitUsage, "no such file"},
			{"YAML that does not parse", []string{"agents", "deploy", e.write("broken.yaml", "name: x\ndefinition:\n  tools: [a\n  steps: []\n")}, exitUsage,
				`line 2: "definition:"; line 3: "  tools: [a"`},
			{"bad output", []string{"tools", "list", "-o", "xml"}, exitUsage, `-o "xml": use table, json or yaml`},
			{"no server", []string{"tools", "list", "--url", "http://" + freeAddr(t)}, exitOther, "cannot reach the server"},
			{"a token with a line break", []string{"tools", "list", "--token", "eyJa\neyJb"}, exitUsage,
				`the token in --token has a space or control character at byte 5 ('\n'): set it to the token alone`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, errs, code := e.run(tc.args...)
				if code != tc.code || !strings.Contains(errs, tc.stderr) {
					t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errs, tc.code, tc.stderr)
				}
				if out != "" {
					t.Errorf("stdout %q, want nothing: results only", out)
				}
				if strings.Count(strings.TrimSpace(errs), "\n") != 0 {
					t.Errorf("stderr has more than one line: %q", errs)
				}
			})
		}
	})

	t.Run("deploy takes a bare definition and what agents get printed", func(t *testing.T) {
		e := *e
		e.t = t
		bare := e.write("bare.yaml", `tools: [payments]
steps:
  - {action: fetch_transaction, call: payments.getTransaction, args: {id: "'tx_1'"}}
outcome: "'done'"
`)
		if _, errs, code := e.run("agents", "deploy", bare); code != exitUsage || !strings.Contains(errs, "bare definition: name its agent with --name") {
			t.Errorf("a bare definition without --name: exit %d, %s", code, errs)
		}
		if out := e.ok("agents", "deploy", bare, "--name", "copy"); !strings.Contains(out, "copy@1") {
			t.Errorf("a bare definition with --name deployed:\n%s", out)
		}
		for _, ref := range []string{"copy@1", "copy"} {
			y := e.ok("agents", "get", ref, "-o", "yaml")
			if strings.Contains(y, "Default:") {
				t.Errorf("agents get %s -o yaml does not use the API's names:\n%s", ref, y)
			}
			edited := e.write("edited.yaml", strings.Replace(y, "'done'", "'edited'", 1))
			cmd := e.command("agents", "deploy", edited)
			var out, errs bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errs
			if err := cmd.Run(); err != nil {
				t.Fatalf("deploying agents get %s -o yaml, edited: %v\n%s", ref, err, errs.String())
			}
			if !strings.Contains(errs.String(), "note: left out the read-only fields") || !strings.Contains(errs.String(), "deployed_at") {
				t.Errorf("deploying agents get %s -o yaml printed no note of the fields left out:\n%s", ref, errs.String())
			}
		}
		// A typo is the server's to refuse, not left out.
		typo := e.write("typo.yaml", "name: copy\ndescripton: x\ndefinition: {tools: [payments], steps: [{action: a, call: payments.getTransaction, args: {id: \"'tx_1'\"}}]}\n")
		if _, errs, code := e.run("agents", "deploy", typo); code != exitOther || !strings.Contains(errs, "descripton") {
			t.Errorf("a deployment with a misspelt field: exit %d, %s; want the server's refusal naming it", code, errs)
		}
		if v := e.ok("agents", "versions", "copy"); !strings.Contains(v, "3") {
			t.Errorf("after two redeploys copy has versions:\n%s", v)
		}
	})
}

// TestTokenAgreesWithServe: a token minted on the server's data directory
// without --addr carries the issuer the server started with, whatever its
// address.
func TestTokenAgreesWithServe(t *testing.T) {
	data := t.TempDir()
	srv := startChild(t, freeAddr(t), "--data", data)
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--tenant", "acme", "--scope", "tools:read"},
		func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	if code, body := srv.do("GET", "/v1/tools", strings.TrimSpace(tok.String()), nil); code != 200 {
		t.Fatalf("GET /v1/tools with the token: %d %v", code, body)
	}
	// An explicit --addr still wins, and the refusal names both issuers.
	tok.Reset()
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", "127.0.0.1:1", "--tenant", "acme", "--scope", "tools:read"},
		func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	code, body := srv.do("GET", "/v1/tools", strings.TrimSpace(tok.String()), nil)
	if detail, _ := body["detail"].(string); code != 401 || !strings.Contains(detail, `"http://127.0.0.1:1"`) || !strings.Contains(detail, srv.base) {
		t.Fatalf("token for another issuer: %d %v", code, body)
	}
}

// TestDemo runs serve --demo as its own process and follows the ready block
// it prints with the client: the three example APIs are registered and
// listen on loopback only, both versions are deployed, there is history,
// and a replay of the example workflow against version 2 changes.
func TestDemo(t *testing.T) {
	t.Parallel()
	addr := demoAddr(t)
	srv := startChild(t, addr, "--demo", "--data", t.TempDir())
	var ready string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out := srv.output(); strings.Contains(out, "# 3. open the viewer_url") {
			ready = out
			break
		}
	}
	if ready == "" {
		t.Fatal("serve --demo printed no ready block within 60 s")
	}
	grab := func(prefix string) string {
		i := strings.Index(ready, prefix)
		if i < 0 {
			t.Fatalf("the ready block has no %q:\n%s", prefix, ready)
		}
		rest := ready[i+len(prefix):]
		return strings.Fields(rest)[0]
	}
	if got := grab("export AGENTPLANE_URL="); got != srv.base {
		t.Errorf("AGENTPLANE_URL=%s, want %s", got, srv.base)
	}
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: grab("export AGENTPLANE_TOKEN=")}
	wf := grab("agentplane replay ")
	if !strings.Contains(ready, "and 7 workflows make its history, one a refund waiting for approval.") {
		t.Errorf("the ready block does not count the 6 seeded workflows and the waiting refund:\n%s", ready)
	}

	// The example APIs listen on loopback only.
	line := ready[strings.Index(ready, "example APIs on "):]
	line = line[:strings.Index(line, "\n")]
	for _, f := range strings.Fields(line) {
		if strings.HasPrefix(f, "http://") && !strings.HasPrefix(f, "http://127.0.0.1:") {
			t.Errorf("a demo API listens on %s, not loopback", f)
		}
	}

	var tools struct {
		Tools []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Operations int    `json:"operations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(e.ok("tools", "list", "-o", "json")), &tools); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tl := range tools.Tools {
		got[tl.Name] = fmt.Sprintf("%s/%d", tl.Type, tl.Operations)
	}
	want := map[string]string{"payments": "openapi/3", "customers": "graphql/1", "cases": "soap/2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	if out := e.ok("agents", "versions", "fraud-triage"); !strings.Contains(out, "\n2 ") || !strings.Contains(out, "\n1 ") {
		t.Errorf("agents versions:\n%s", out)
	}
	// The demo's tx_1006 workflow is found by its goal or its context.
	for _, args := range [][]string{{"--goal", "TX_1006"}, {"--context", "transaction_id=tx_1006"}} {
		out := e.ok(append([]string{"workflows", "list"}, args...)...)
		if strings.Count(out, "wf_") != 1 || !strings.Contains(out, "tx_1006") {
			t.Errorf("workflows list %v:\n%s", args, out)
		}
	}
	// The 6 seeded workflows and the refund left waiting for the console.
	if out := e.ok("workflows", "list", "--agent", "fraud-triage"); strings.Count(out, "wf_") != 7 || strings.Count(out, "waiting") != 1 {
		t.Errorf("want the 6 seeded workflows and a waiting refund:\n%s", out)
	}
	// On a terminal, where both streams meet, the hint for the next page
	// (stderr) comes after the whole table (stdout).
	page := e.command("workflows", "list", "--agent", "fraud-triage", "--limit", "2")
	var both bytes.Buffer
	page.Stdout, page.Stderr = &both, &both
	if err := page.Run(); err != nil {
		t.Fatalf("workflows list --limit 2: %v\n%s", err, both.String())
	}
	if lines := strings.Split(strings.TrimSpace(both.String()), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[3], "more: add --cursor wf_") {
		t.Errorf("workflows list --limit 2, stdout and stderr together:\n%s", both.String())
	}
	out := e.ok("invoke", "fraud-triage", "--goal", "triage tx_1003", "--context", "transaction_id=tx_1003", "--stream")
	for _, want := range []string{"fetch_customer", "customers.customer", "open_case", "cases.OpenCase", "outcome escalated"} {
		if !strings.Contains(out, want) {
			t.Errorf("streamed invoke lacks %q:\n%s", want, out)
		}
	}
	out = e.ok("replay", wf, "--target", "fraud-triage@2")
	for _, want := range []string{"outcome: escalated -> review", "delta: 0 added, 2 changed, 1 removed, 1 tool calls changed", "removed  open_case"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay lacks %q:\n%s", want, out)
		}
	}
	// Every fraud-triage workflow against v2, as a CI gate: some outcomes
	// change, so --fail-on-change exits 5; progress lines go to stderr.
	out, errs, code := e.run("replay", "--batch", "--target", "fraud-triage@2", "--agent", "fraud-triage", "--since", "168h", "--fail-on-change")
	if code != exitChanged || !strings.Contains(out, "completed") || !strings.Contains(out, "changed") ||
		!strings.Contains(errs, "replayed") || !strings.Contains(errs, "outcomes changed against fraud-triage@2") {
		t.Errorf("replay --batch --fail-on-change: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if out := e.ok("replay", "--batch", "--target", "fraud-triage@1", "--agent", "fraud-triage", "--agent-version", "1"); !strings.Contains(out, "outcome changed in 0") {
		t.Errorf("v1 against itself changes nothing:\n%s", out)
	}
	// The batches and replays made are listed, shown and waited for.
	batches := e.ok("batches", "list", "--target", "fraud-triage@2")
	batch := ""
	for _, f := range strings.Fields(batches) {
		if strings.HasPrefix(f, "rpb_") {
			batch = f
		}
	}
	if batch == "" || !strings.Contains(batches, "completed") {
		t.Fatalf("batches list --target fraud-triage@2:\n%s", batches)
	}
	if out, errs, code := e.run("batches", "wait", batch, "--fail-on-change"); code != exitChanged || !strings.Contains(out, "completed") ||
		!strings.Contains(errs, "outcomes changed against fraud-triage@2") {
		t.Errorf("batches wait --fail-on-change: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	changed := e.ok("batches", "get", batch, "--changed")
	rpl := ""
	for _, f := range strings.Fields(changed) {
		if strings.HasPrefix(f, "rpl_") {
			rpl = f
		}
	}
	if rpl == "" {
		t.Fatalf("batches get --changed lists no replay:\n%s", changed)
	}
	if out := e.ok("replays", "get", rpl); !strings.Contains(out, "viewer: http") {
		t.Errorf("replays get %s:\n%s", rpl, out)
	}
	if out := e.ok("replays", "list", "--workflow", wf); !strings.Contains(out, "fraud-triage@2") {
		t.Errorf("replays list --workflow %s:\n%s", wf, out)
	}
	if out := e.ok("operations", "search", "open", "a", "case"); !strings.Contains(out, "cases") || !strings.Contains(out, "OpenCase") {
		t.Errorf("operations search open a case:\n%s", out)
	}
	// Version 2 waits for a person's approval of the tx_1007 refund; the
	// invoker may not give it, the demo's approver does.
	out = e.ok("invoke", "fraud-triage@2", "--goal", "refund tx_1007", "--context", "transaction_id=tx_1007", "--context", "refund_requested=true")
	if !strings.Contains(out, "refund_approval") || !strings.Contains(out, "waiting_approval") || !strings.Contains(out, "reason: Refund of 680 EUR on tx_1007") {
		t.Fatalf("invoke of version 2 does not wait for an approval:\n%s", out)
	}
	waiting := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "wf_") {
			waiting = f
		}
	}
	if out := e.ok("approvals", "list", "--status", "pending"); !strings.Contains(out, waiting) {
		t.Errorf("approvals list:\n%s", out)
	}
	if _, _, code := e.run("approvals", "approve", waiting); code != exitAuth {
		t.Errorf("the invoker approving their own refund: exit %d, want %d", code, exitAuth)
	}
	approver := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: grab("  AGENTPLANE_TOKEN=")}
	if out := approver.ok("approvals", "approve", waiting); !strings.Contains(out, "approved step") {
		t.Errorf("the approver approving: %q", out)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out := e.ok("workflows", "get", waiting)
		if strings.Contains(out, "completed, outcome cleared") {
			if !strings.Contains(out, "payments.createRefund") || !strings.Contains(out, "by demo-approver") {
				t.Errorf("the approved refund:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approved workflow did not finish:\n%s", out)
		}
	}
	// A budget that asks: one tool call allowed, the run waits before its
	// second for an approval of more; a grant out of range names the field.
	out = e.ok("invoke", "fraud-triage", "--goal", "triage tx_1007", "--context", "transaction_id=tx_1007", "--max-tool-calls", "1", "--on-exhausted", "ask")
	if !strings.Contains(out, "budget_exhausted") || !strings.Contains(out, "used 1 of 1 tool calls") {
		t.Errorf("invoke --on-exhausted ask does not wait for more budget:\n%s", out)
	}
	spent := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "wf_") {
			spent = f
		}
	}
	if _, errs, code := approver.run("approvals", "approve", spent, "--budget", "0"); code != 1 || !strings.Contains(errs, "budget") {
		t.Errorf("approvals approve --budget 0: exit %d, stderr %s", code, errs)
	}
	// The console link signs in as the demo's approver, on the approvals
	// page with the refund the demo left waiting; agentplane console
	// prints a fresh link of the client's own.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(ready, "/console/signin?link=") && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ready = srv.output()
	}
	c := consoletest.SignInHTTP(t, grab("agentplane console makes new ones):"))
	if status, page := consoletest.Get(t, c, srv.base+"/console/approvals"); status != 200 ||
		!strings.Contains(page, "Refund of 680 EUR on tx_1007") || !strings.Contains(page, "demo-approver") {
		t.Errorf("the demo's console link: %d\n%s", status, page)
	}
	out = e.ok("console", "--no-open", "--page", "workflows")
	link := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, srv.base+"/console/signin?link=") {
			link = f
		}
	}
	if status, page := consoletest.Get(t, consoletest.SignInHTTP(t, link), srv.base+"/console/workflows"); status != 200 || !strings.Contains(page, "demo · demo") {
		t.Errorf("agentplane console printed %q; its session's page: %d", out, status)
	}
	// The demo model speaks Anthropic's Messages API as demo-anthropic: an
	// LLM agent on it runs through the server's Anthropic client.
	e.ok("agents", "deploy", e.write("claude-assistant.yaml", `name: claude-assistant
definition:
  model: demo-anthropic
  tools: [payments, customers]
  steps:
    - action: solve
      plan: {prompt: goal, save_as: answer, operations: [payments.getTransaction, customers.customer]}
  output: answer
`))
	out = e.ok("invoke", "claude-assistant", "--goal", "Is tx_1003 risky?", "--stream")
	for _, want := range []string{"completion demo-anthropic", "payments.getTransaction", "customers.customer", "It looks risky"} {
		if !strings.Contains(out, want) {
			t.Errorf("an agent on demo-anthropic: the invoke lacks %q:\n%s", want, out)
		}
	}
	if out := e.ok("audit", "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("audit verify: %q", out)
	}
}

// TestCLIApprovals drives approvals from the client: a workflow waits, the
// approver lists and approves it, the invoker may not.
func TestCLIApprovals(t *testing.T) {
	api := newCLIAPI(t)
	close(api.release)
	data := t.TempDir()
	addr := freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks")
	mintFor := func(sub, scope string) string {
		var tok bytes.Buffer
		if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--sub", sub, "--scope", scope},
			func(string) string { return "" }, &tok, io.Discard); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(tok.String())
	}
	alice := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(),
		token: mintFor("alice", "tools:write agents:write agents:invoke workflows:read workflows:approve tool:*")}
	bob := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: mintFor("bob", "workflows:approve workflows:read")}

	alice.ok("tools", "register", "--name", "payments", "--type", "openapi", "--spec-url", api.srv.URL+"/openapi.json")
	alice.ok("agents", "deploy", alice.write("refunds.yaml", `name: refunds
definition:
  tools: [payments]
  steps:
    - {action: fetch, call: payments.getTransaction, args: {id: "'tx_9'"}, save_as: txn}
    - action: refund_approval
      approve: {when: "txn.amount > 500.0", reason: "'Refund of ' + string(txn.amount)"}
    - {action: fetch_customer, call: payments.getCustomer, args: {id: txn.customer}}
  outcome: "'refunded'"
  output: "{'refunded': txn.amount}"
`))
	out, hint, code := alice.run("invoke", "refunds", "--goal", "refund tx_9")
	if code != 0 || !strings.Contains(out, "waiting_approval") || !strings.Contains(out, "reason: Refund of 1200") || !strings.Contains(out, " waiting") {
		t.Fatalf("invoke: exit %d, printed:\n%s", code, out)
	}
	wf := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "wf_") {
			wf = f
		}
	}
	if !strings.Contains(hint, "agentplane approvals approve "+wf+" (or deny "+wf+")") {
		t.Errorf("an invoke that waits does not say how to decide it: %q", hint)
	}
	if list, hint, _ := bob.run("approvals", "list", "--status", "pending"); !strings.Contains(list, wf) || !strings.Contains(list, "alice") ||
		!strings.Contains(hint, "decide with: agentplane approvals approve|deny WORKFLOW") {
		t.Errorf("approvals list:\n%s\nstderr: %s", list, hint)
	}
	if _, errs, code := alice.run("approvals", "approve", wf); code != exitAuth || !strings.Contains(errs, "invoked") {
		t.Errorf("the invoker approving: exit %d, %s", code, errs)
	}
	if out := bob.ok("approvals", "approve", wf, "--comment", "verified"); !strings.Contains(out, "approved step 2 (refund_approval) of workflow "+wf+" as bob") {
		t.Errorf("approve printed %q", out)
	}
	// A second decision, with or without the step, is the server's
	// conflict: its detail, and exit 1 (not the usage code).
	for _, args := range [][]string{{"approvals", "deny", wf, "2"}, {"approvals", "deny", wf}} {
		if _, errs, code := bob.run(args...); code != exitOther || !strings.Contains(errs, "already decided: approved by bob at ") {
			t.Errorf("%v, a second decision: exit %d, %s", args, code, errs)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := bob.ok("workflows", "get", wf)
		if strings.Contains(got, "completed, outcome refunded") {
			if !strings.Contains(got, "by bob at ") || !strings.Contains(got, "comment: verified") {
				t.Errorf("workflows get does not show the decision:\n%s", got)
			}
			if !strings.Contains(got, `output: {"refunded":1200}`) {
				t.Errorf("workflows get does not show the output:\n%s", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workflow did not finish after the approval:\n%s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDemoStartedAgain: serve --demo started again on the same data and
// address finds its APIs, model and external agent where the first start
// left them, so the refund the first start left waiting completes when
// approved, and the external agent still answers at its versions' URL.
func TestDemoStartedAgain(t *testing.T) {
	t.Parallel()
	addr, data := demoAddr(t), t.TempDir()
	readyOf := func(srv *child) string {
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if out := srv.output(); strings.Contains(out, "# 3. open the viewer_url") {
				return out
			}
		}
		t.Fatal("serve --demo printed no ready block within 60 s")
		return ""
	}
	first := startChild(t, addr, "--demo", "--data", data)
	readyOf(first)
	first.stop()
	second := startChild(t, addr, "--demo", "--data", data)
	ready := readyOf(second)
	after := func(prefix string) string {
		i := strings.Index(ready, prefix)
		if i < 0 {
			t.Fatalf("the ready block has no %q:\n%s", prefix, ready)
		}
		return strings.Fields(ready[i+len(prefix):])[0]
	}
	e := &cliEnv{t: t, url: second.base, config: t.TempDir(), dir: t.TempDir(), token: after("export AGENTPLANE_TOKEN=")}
	approver := &cliEnv{t: t, url: second.base, config: t.TempDir(), dir: t.TempDir(), token: after("  AGENTPLANE_TOKEN=")}
	var pending struct {
		Approvals []struct {
			WorkflowID string `json:"workflow_id"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(approver.ok("approvals", "list", "--status", "pending", "-o", "json")), &pending); err != nil {
		t.Fatal(err)
	}
	if len(pending.Approvals) != 2 {
		t.Fatalf("pending approvals after two starts: %+v, want the refund of each", pending.Approvals)
	}
	older := pending.Approvals[len(pending.Approvals)-1].WorkflowID
	approver.ok("approvals", "approve", older)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out := e.ok("workflows", "get", older, "-o", "json")
		if strings.Contains(out, `"status": "completed"`) || strings.Contains(out, `"status":"completed"`) {
			break
		}
		if strings.Contains(out, `"failed"`) || time.Now().After(deadline) {
			t.Fatalf("the first start's refund, approved after the second start:\n%s", out)
		}
	}
	if out := e.ok("invoke", "triage-code", "--goal", "What is tx_1001?"); !strings.Contains(out, "outcome answered") {
		t.Errorf("the external agent after the second start:\n%s", out)
	}
}
