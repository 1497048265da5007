package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCLISchedules(t *testing.T) {
	t.Parallel()
	data, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", data)
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--sub", "alice",
		"--scope", "agents:write workflows:read schedules:write schedules:read"}, func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	alice := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	alice.ok("agents", "deploy", alice.write("sweep.yaml", `name: sweep
definition:
  tools: []
  steps:
    - {action: note, set: {n: "1"}}
  outcome: "'swept'"
`))
	if _, errs, code := alice.run("schedules", "create", "--agent", "sweep", "--cron", "@every 10s", "--goal", "g"); code == 0 || !strings.Contains(errs, "cron") {
		t.Errorf("@every 10s: exit %d, %s", code, errs)
	}
	out := alice.ok("schedules", "create", "--agent", "sweep", "--cron", "0 9 * * 1-5", "--timezone", "Europe/Paris",
		"--goal", "sweep the queue", "--context", `{"queue": "billing"}`, "--paused")
	id := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "sch_") {
			id = f
		}
	}
	if id == "" || !has(out, "creator.sub: alice") || !has(out, "paused: true") {
		t.Fatalf("create printed:\n%s", out)
	}
	if out := alice.ok("schedules", "list"); !strings.Contains(out, id) {
		t.Errorf("list:\n%s", out)
	}
	if out := alice.ok("schedules", "resume", id); !has(out, "paused: false") || !strings.Contains(out, "next_due_at:") {
		t.Errorf("resume:\n%s", out)
	}
	out = alice.ok("schedules", "trigger", id)
	if !strings.HasPrefix(out, "started workflow wf_") {
		t.Fatalf("trigger printed %q", out)
	}
	wf := strings.Fields(out)[2]
	if got := alice.ok("workflows", "get", wf); !strings.Contains(got, wf) {
		t.Errorf("workflows get:\n%s", got)
	}
	alice.ok("schedules", "pause", id)
	if out := alice.ok("schedules", "delete", id); !strings.Contains(out, "deleted "+id) {
		t.Errorf("delete printed %q", out)
	}
	if _, _, code := alice.run("schedules", "get", id); code == 0 {
		t.Error("get of a deleted schedule succeeded")
	}
}

// has reports whether out holds the words of want in a row, whatever the
// spaces between them.
func has(out, want string) bool {
	return strings.Contains(strings.Join(strings.Fields(out), " "), want)
}

func TestCLIWebhooks(t *testing.T) {
	t.Parallel()
	received := make(chan string, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received <- r.Header.Get("webhook-id")
	}))
	t.Cleanup(rcv.Close)
	data, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks")
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--sub", "alice",
		"--scope", "agents:write agents:invoke workflows:read webhooks:write webhooks:read"}, func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	alice := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	alice.ok("agents", "deploy", alice.write("sweep.yaml", "name: sweep\ndefinition:\n  tools: []\n  steps:\n    - {action: note, set: {n: \"1\"}}\n  outcome: \"'swept'\"\n"))
	out, hint, code := alice.run("webhooks", "create", "--url", rcv.URL, "--event", "workflow.completed")
	if code != 0 || !has(out, "secret: whsec_") || !strings.Contains(hint, "shown this once") {
		t.Fatalf("create: exit %d\n%s\n%s", code, out, hint)
	}
	id := strings.Fields(out)[1]
	if out := alice.ok("webhooks", "list"); !strings.Contains(out, id) || strings.Contains(out, "whsec_") {
		t.Errorf("list:\n%s", out)
	}
	alice.ok("invoke", "sweep", "--goal", "sweep")
	var msg string
	select {
	case msg = <-received:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20 s")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !has(alice.ok("webhooks", "deliveries", id, "--status", "delivered"), msg) {
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s not shown delivered", msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := alice.ok("webhooks", "retry", id, msg); !strings.Contains(out, msg+" pending") {
		t.Errorf("retry printed %q", out)
	}
	select {
	case again := <-received:
		if again != msg {
			t.Errorf("resent with webhook-id %s, want %s", again, msg)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no resend within 20 s")
	}
	if out := alice.ok("webhooks", "rotate", id); !has(out, "secret: whsec_") {
		t.Errorf("rotate printed %q", out)
	}
	alice.ok("webhooks", "delete", id)
}
