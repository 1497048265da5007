package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestCLIAgentsArchive archives a version, then the agent, through the
// client, and reads what was archived.
func TestCLIAgentsArchive(t *testing.T) {
	data := t.TempDir()
	addr := freeAddr(t)
	srv := startChild(t, addr, "--data", data)
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope",
		"agents:read agents:write agents:invoke"}, func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	scratch := func(version string) string {
		return e.write("v"+version+".yaml", `name: scratch
version: "`+version+`"
definition:
  tools: []
  steps:
    - {action: rate, score: "0.5"}
  outcome: "'done'"
`)
	}
	e.ok("agents", "deploy", scratch("1"))
	e.ok("agents", "deploy", scratch("2"))

	if _, errs, code := e.run("agents", "archive", "scratch@1"); code != exitOther || !strings.Contains(errs, "default version") {
		t.Errorf("archive the default: exit %d %q", code, errs)
	}
	if _, errs, code := e.run("agents", "archive", "nobody"); code != exitNotFound {
		t.Errorf("archive an unknown agent: exit %d %q, want %d", code, errs, exitNotFound)
	}
	if out := e.ok("agents", "archive", "scratch@2"); out != "archived scratch@2\n" {
		t.Errorf("agents archive scratch@2 printed %q", out)
	}
	if out := e.ok("agents", "versions", "scratch"); !strings.Contains(out, "ARCHIVED") || strings.Count(out, "\n") != 3 {
		t.Errorf("agents versions:\n%s", out)
	}
	if _, errs, code := e.run("invoke", "scratch@2", "--goal", "g"); code != exitOther || !strings.Contains(errs, "archived") {
		t.Errorf("invoke an archived version: exit %d %q", code, errs)
	}
	if out := e.ok("agents", "archive", "scratch"); out != "archived agent scratch (1 versions archived now)\n" {
		t.Errorf("agents archive scratch printed %q", out)
	}
	if out := e.ok("agents", "list"); strings.Contains(out, "scratch") {
		t.Errorf("agents list shows the archived agent:\n%s", out)
	}
	if out := e.ok("agents", "list", "--archived"); !strings.Contains(out, "scratch") {
		t.Errorf("agents list --archived leaves the archived agent out:\n%s", out)
	}
}
