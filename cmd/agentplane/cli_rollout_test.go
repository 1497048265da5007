package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestCLIAgentsRollout starts a canary through the client against a real
// server process, invokes the agent until the target's failing check rolls
// the rollout back, shows the arms, and finds the next invocation on the
// default; a bad flag is refused before any request.
func TestCLIAgentsRollout(t *testing.T) {
	data := t.TempDir()
	addr := freeAddr(t)
	srv := startChild(t, addr, "--data", data)
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope",
		"agents:read agents:write agents:invoke workflows:read"}, func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	version := func(v, outcome string) string {
		return e.write("v"+v+".yaml", `name: triage
version: "`+v+`"
definition:
  tools: []
  steps:
    - {action: done, finish: `+outcome+`}
`)
	}
	e.ok("agents", "deploy", version("1", "cleared"))
	e.ok("agents", "deploy", version("2", "escalated"))

	if _, errs, code := e.run("agents", "rollout", "triage", "--percent", "10"); code != exitUsage || !strings.Contains(errs, "--target") {
		t.Errorf("--percent without --target: exit %d %q", code, errs)
	}
	if _, errs, code := e.run("agents", "rollout", "triage", "--target", "1", "--percent", "10"); code == 0 || !strings.Contains(errs, "target") {
		t.Errorf("a rollout of the default: exit %d %q", code, errs)
	}
	out := e.ok("agents", "rollout", "triage", "--target", "2", "--percent", "100", "--sticky", "context.customer",
		"--check", "cleared=run.outcome == 'cleared'", "--gate", "cleared=0.5", "--min-runs", "2")
	for _, want := range []string{"state: active", "target: 2", "ARM VERSION RUNS", "default 1 0", "canary 2 0"} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("rollout start does not show %q:\n%s", want, out)
		}
	}
	for _, c := range []string{"a", "b"} {
		if out := e.ok("invoke", "triage", "--goal", "triage", "--context", "customer="+c); !strings.Contains(out, "escalated") {
			t.Errorf("invoke at 100 %%:\n%s", out)
		}
	}
	eventually(t, "a rollback", func() bool {
		return strings.Contains(e.ok("agents", "rollout", "triage"), "rolled_back")
	})
	out = e.ok("agents", "rollout", "triage")
	for _, want := range []string{"failed_check: cleared", "canary 2 2", "canary cleared 0 2 0 0 0.5"} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("the rolled-back rollout does not show %q:\n%s", want, out)
		}
	}
	if out := e.ok("invoke", "triage", "--goal", "triage", "--context", "customer=a"); !strings.Contains(out, "cleared") {
		t.Errorf("the invocation after the rollback:\n%s", out)
	}
	if _, _, code := e.run("agents", "rollout", "triage", "--end"); code != exitNotFound {
		t.Errorf("end with none active: exit %d, want %d", code, exitNotFound)
	}
}

// squeeze is a table's output with each run of blanks one space.
func squeeze(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		b.WriteString(strings.Join(strings.Fields(line), " ") + "\n")
	}
	return b.String()
}
