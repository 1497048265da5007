package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestRetentionFlagsRefuseBadValues: a retention shorter than an hour, or
// that is not one, stops serve at start naming the flag and what to write.
func TestRetentionFlagsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--retention", "30m"}, "--retention: \"30m\" is shorter than the minimum of one hour"},
		{[]string{"--retention", "ninety days"}, "--retention: \"ninety days\" is not a number of days (90d)"},
		{[]string{"--retention", "-5d"}, "--retention: \"-5d\" is not a number of days"},
		{[]string{"--audit-retention", "59m"}, "--audit-retention: \"59m\" is shorter"},
		{[]string{"--tenant-retention", "acme"}, "--tenant-retention: \"acme\" is not tenant=retention (acme=30d)"},
		{[]string{"--tenant-retention", "acme=2s"}, "--tenant-retention: tenant \"acme\": \"2s\" is shorter"},
		{[]string{"--tenant-retention", "acme=30d", "--tenant-retention", "acme=0"}, "tenant \"acme\" is given twice"},
		{[]string{"--retention-interval", "10ms"}, "--retention-interval must be at least 1s"},
		{[]string{"--retention-share", "0"}, "--retention-share must be over 0 and at most 1"},
		{[]string{"--retention-share", "1.5"}, "--retention-share must be over 0 and at most 1"},
		{[]string{"--retention-share", "NaN"}, "--retention-share must be over 0 and at most 1"},
	} {
		args := append([]string{"serve", "--data", t.TempDir()}, tc.args...)
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	f := retentionFlags{workflows: "90d", tenants: []string{"acme=30d", "globex=0"}, audit: "8760h", every: time.Minute, share: 1}
	p, err := f.policy()
	if err != nil || p.Default.Hours() != 90*24 || p.Tenants["acme"].Hours() != 30*24 || p.Tenants["globex"] != 0 || p.Audit.Hours() != 8760 {
		t.Errorf("policy of %+v: %+v, %v", f, p, err)
	}
}

// TestCLIWorkflowsDelete deletes a finished workflow through the CLI
// against a real server started with a retention.
func TestCLIWorkflowsDelete(t *testing.T) {
	data, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--retention", "90d", "--tenant-retention", "acme=30d", "--audit-retention", "365d")
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--sub", "alice",
		"--scope", "agents:write agents:invoke workflows:read workflows:delete"}, func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	alice := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	alice.ok("agents", "deploy", alice.write("note.yaml", `name: note
definition:
  tools: []
  steps:
    - {action: note, set: {n: "1"}}
  outcome: "'noted'"
`))
	out := alice.ok("invoke", "note", "--goal", "g")
	wf := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "wf_") {
			wf = strings.TrimRight(f, ":,")
			break
		}
	}
	if wf == "" {
		t.Fatalf("invoke printed:\n%s", out)
	}
	if out := alice.ok("workflows", "delete", wf); !strings.HasPrefix(out, "deleted "+wf+": 1 workflows, 1 steps") {
		t.Errorf("delete printed %q", out)
	}
	if _, errs, code := alice.run("workflows", "get", wf); code == 0 || !strings.Contains(errs, "no workflow") {
		t.Errorf("get after delete: exit %d, %s", code, errs)
	}
}
