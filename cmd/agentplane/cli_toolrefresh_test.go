package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCLIToolsRefresh drives tools refresh against a real server process
// and a real description served as version 1, then 2 (getCustomer gone,
// getTransaction with a new required argument): the breaking diff is
// printed and the revision is pending; the command exits 0 while no agent
// calls the tool, 5 once a deployed version's steps are broken (the
// impact naming them); --apply
// applies it; an addition after that applies at once and exits 0.
func TestCLIToolsRefresh(t *testing.T) {
	var version atomic.Int32
	version.Store(1)
	spec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host
		switch version.Load() {
		case 1:
			fmt.Fprintf(w, cliSpec, base)
		case 2:
			fmt.Fprintf(w, `{"openapi": "3.0.3", "info": {"title": "payments", "version": "2"}, "servers": [{"url": "%s"}],
 "paths": {"/transactions/{id}": {"get": {"operationId": "getTransaction", "summary": "Get a transaction",
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
      {"name": "account", "in": "query", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}}}}`, base)
		default:
			fmt.Fprintf(w, `{"openapi": "3.0.3", "info": {"title": "payments", "version": "3"}, "servers": [{"url": "%s"}],
 "paths": {"/transactions/{id}": {"get": {"operationId": "getTransaction", "summary": "Get a transaction",
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
      {"name": "account", "in": "query", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}},
  "/refunds": {"get": {"operationId": "listRefunds", "responses": {"200": {"description": "ok"}}}}}}`, base)
		}
	}))
	t.Cleanup(spec.Close)
	data, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks")
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope", "tools:read tools:write agents:write"},
		func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	e.ok("tools", "register", "--name", "payments", "--type", "openapi", "--spec-url", spec.URL+"/openapi.json")

	if out := e.ok("tools", "refresh", "payments"); !strings.Contains(out, "unchanged") {
		t.Errorf("refresh of the same description:\n%s", out)
	}
	version.Store(2)
	// Breaking, but no agent calls the tool yet: pending, exit 0.
	out, errs, code := e.run("tools", "refresh", "payments")
	if code != 0 || !strings.Contains(out, "pending") || !strings.Contains(out, "impact:") || !strings.Contains(errs, "affects no deployed version") {
		t.Fatalf("breaking refresh without impact: exit %d, want 0\nstdout: %s\nstderr: %s", code, out, errs)
	}
	for _, want := range []string{"- getCustomer", "operation removed", "~ getTransaction", "required_added account", "breaking"} {
		if !strings.Contains(out, want) {
			t.Errorf("the diff does not show %q:\n%s", want, out)
		}
	}
	// An agent version calling the removed operation: the same revision
	// now has impact, and the command exits 5 naming the step.
	e.ok("agents", "deploy", e.write("lookup.yaml", `name: lookup
definition:
  tools: [payments]
  steps:
    - {action: customer, call: payments.getCustomer, args: {id: "context.id"}}
    - {action: txn, call: payments.getTransaction, args: {id: "context.id"}}
`))
	out, errs, code = e.run("tools", "refresh", "payments")
	if code != exitChanged || !strings.Contains(errs, "revision 2 breaks 1 deployed versions") {
		t.Fatalf("breaking refresh with impact: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitChanged, out, errs)
	}
	for _, want := range [][]string{{"!", "lookup@1", "customer", "operation_removed"}, {"!", "lookup@1", "txn", "required_missing", "account"}} {
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
			f := strings.Fields(l)
			return len(f) >= len(want) && slices.Equal(f[:len(want)], want)
		}) {
			t.Errorf("the impact does not show %q:\n%s", want, out)
		}
	}
	var got struct{ Revision, Operations int }
	if err := json.Unmarshal([]byte(e.ok("tools", "get", "payments", "-o", "json")), &got); err != nil || got.Revision != 1 || got.Operations != 2 {
		t.Errorf("while pending the tool is %+v (%v), want revision 1 with 2 operations", got, err)
	}
	// The same breaking description again, accepted with --apply.
	out = e.ok("tools", "refresh", "payments", "--apply")
	if !strings.Contains(out, "applied revision 3: the tool is at revision 2") {
		t.Errorf("refresh --apply:\n%s", out)
	}
	version.Store(3)
	out = e.ok("tools", "refresh", "payments")
	if !strings.Contains(out, "applied") || !strings.Contains(out, "+ listRefunds") {
		t.Errorf("refresh adding an operation:\n%s", out)
	}
}
