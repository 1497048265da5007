package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tableLines reads a vertical table ("key:  value" a line) as a map.
func tableLines(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// TestCLIExternalAgents deploys an external version from a file through
// the client, shows it as a table and as the API's JSON, and sees the
// server refuse what breaks its rules.
func TestCLIExternalAgents(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--secret-ref-allow", "env://AGENT_*")
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write models:write agents:read agents:write"}, func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	e.ok("tools", "register", "--name", "payments", "--type", "openapi", "--spec-file", e.write("payments.json", fmt.Sprintf(cliSpec, "https://203.0.113.8")))
	e.ok("models", "register", "--name", "gpt", "--provider", "openai", "--base-url", "https://203.0.113.5/v1", "--model", "gpt-4o-mini")

	const block = `  url: https://203.0.113.7/triage
  auth: {type: bearer, secrets_ref: env://AGENT_TRIAGE_TOKEN}
  timeout: 20m
  tools: [payments]
  operations: [payments.getTransaction]
  models: [gpt]
  policies: {standard: {allow: "operation != 'getCustomer'"}}
  approvals:
    - {when: "operation == 'getTransaction'", approver_scope: "approve:reads"}
    - {when: "has(args.id) && args.id == 'tx_9'"}
  limits: {max_tool_calls: 20}
`
	deployed := tableLines(e.ok("agents", "deploy", e.write("triage.yaml", "name: triage\ndescription: Triage, in Python\nexternal:\n"+block)))
	want := map[string]string{
		"ref":                   "triage@1",
		"description":           "Triage, in Python",
		"default":               "true",
		"tools":                 "payments",
		"url":                   "https://203.0.113.7/triage",
		"auth":                  "bearer, secret env://AGENT_TRIAGE_TOKEN",
		"timeout":               "20m",
		"max_attempts":          "3 (default)",
		"operations":            "payments.getTransaction",
		"models":                "gpt",
		"policies.standard":     "allow operation != 'getCustomer'",
		"approvals":             "2",
		"approvals[0].when":     "operation == 'getTransaction' (by approve:reads)",
		"approvals[1].when":     "has(args.id) && args.id == 'tx_9'",
		"limits.max_tool_calls": "20",
	}
	delete(deployed, "deployed_at")
	if diff := cmp.Diff(want, deployed); diff != "" {
		t.Errorf("agents deploy (-want +got):\n%s", diff)
	}
	got := tableLines(e.ok("agents", "get", "triage@1"))
	delete(got, "deployed_at")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agents get triage@1 (-want +got):\n%s", diff)
	}
	if got := tableLines(e.ok("agents", "get", "triage")); got["url"] != want["url"] || got["approvals[1].when"] != want["approvals[1].when"] {
		t.Errorf("agents get triage shows no external block of its default version: %v", got)
	}

	// -o json is the API's document as it is.
	req, _ := http.NewRequest("GET", srv.base+"/v1/agents/triage@1", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var api, cli map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&api); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(e.ok("agents", "get", "triage@1", "-o", "json")), &cli); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(api, cli); diff != "" || api["external"] == nil {
		t.Errorf("agents get -o json (-api +cli):\n%s", diff)
	}

	// A bare block takes --name; agents get -o yaml, edited, deploys again.
	bare := e.write("bare.yaml", strings.ReplaceAll(block, "\n  ", "\n")[2:])
	if _, errs, code := e.run("agents", "deploy", bare); code != exitUsage || !strings.Contains(errs, "bare external block: name its agent with --name") {
		t.Errorf("a bare external block without --name: exit %d, %s", code, errs)
	}
	if out := e.ok("agents", "deploy", bare, "--name", "triage-copy"); !strings.Contains(out, "triage-copy@1") {
		t.Errorf("a bare external block with --name:\n%s", out)
	}
	y := e.ok("agents", "get", "triage", "-o", "yaml")
	edited := e.write("edited.yaml", strings.Replace(y, "20m", "30m", 1))
	cmd := e.command("agents", "deploy", edited)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil || !strings.Contains(errs.String(), "deploying the external block of triage's default version 1") {
		t.Fatalf("deploying agents get triage -o yaml, edited: %v\n%s%s", err, out.String(), errs.String())
	}
	if got := tableLines(out.String()); got["ref"] != "triage@2" || got["timeout"] != "30m" {
		t.Errorf("the edited copy: %v", got)
	}

	// The server's rules, through the client.
	for _, tc := range []struct {
		name, file, says string
	}{
		{"both", "name: triage\ndefinition: {tools: [], steps: [{action: a, finish: done}]}\nexternal:\n" + block, "give exactly one of definition and external"},
		{"loopback url", "name: triage\nexternal:\n" + strings.Replace(block, "203.0.113.7", "127.0.0.1", 1), "external.url: 127.0.0.1 is a loopback address"},
		{"secret not allowed", "name: triage\nexternal:\n" + strings.Replace(block, "AGENT_TRIAGE_TOKEN", "DATABASE_PASSWORD", 1), "secrets_ref env://DATABASE_PASSWORD is not among"},
		{"max_attempts", "name: triage\nexternal:\n" + block + "  max_attempts: 11\n", "external.max_attempts: must be from 1 to 10"},
	} {
		if _, errs, code := e.run("agents", "deploy", e.write("bad.yaml", tc.file)); code != exitOther || !strings.Contains(errs, tc.says) {
			t.Errorf("%s: exit %d, %s; want %d saying %q", tc.name, code, errs, exitOther, tc.says)
		}
	}
}
