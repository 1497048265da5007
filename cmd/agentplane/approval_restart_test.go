package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/store/postgres"
)

const approvalAgent = `{"tools": ["ledger"], "steps": [
  {"action": "fetch", "call": "ledger.getTransaction", "args": {"id": "'tx-1'"}, "save_as": "txn"},
  {"action": "entry_approval", "approve": {"reason": "'Post ' + string(txn.amount)", "timeout": "1h"}},
  {"action": "post_entry", "call": "ledger.postEntry", "args": {"amount": "txn.amount"}}
 ], "outcome": "'settled'"}`

// pgToken mints a token from the keys in the shared database.
func pgToken(t *testing.T, dbURL, sub, scope string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--database-url", dbURL, "--public-url", "http://agentplane.test",
		"--tenant", "acme", "--sub", sub, "--scope", scope}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}

// TestAnApprovalSurvivesAKilledServer runs two replicas on one PostgreSQL
// database: a workflow waits for an approval on replica a, a is killed with
// SIGKILL and restarted, and an approval sent to replica b resumes the
// workflow, whose write reaches the tool once.
func TestAnApprovalSurvivesAKilledServer(t *testing.T) {
	if os.Getenv(postgres.TestDatabaseEnv) == "" {
		t.Skip(postgres.TestDatabaseEnv + " not set: skipping the two-replica approval test " +
			"(set it to e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	dbURL := postgres.NewTestDatabase(t)
	flags := func() []string {
		return []string{"--data", t.TempDir(), "--database-url", dbURL, "--public-url", "http://agentplane.test",
			"--allow-private-networks", "--workflow-lease", "1s"}
	}
	addrA := freeAddr(t)
	a := startChild(t, addrA, flags()...)
	b := startChild(t, freeAddr(t), flags()...)
	alice := pgToken(t, dbURL, "alice", "tools:write agents:write agents:invoke workflows:read workflows:approve audit:read tool:*")
	bob := pgToken(t, dbURL, "bob", "workflows:approve workflows:read")

	api := newWriteAPI(t)
	close(api.release) // writes answer at once
	if code, body := a.do("POST", "/v1/tools", alice, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "side_effects": []string{"create"}}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := a.do("POST", "/v1/agents", alice, map[string]any{"name": "settle", "definition": json.RawMessage(approvalAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	code, wf := a.do("POST", "/v1/agents/settle/invoke", alice, map[string]any{"goal": "settle tx-1"})
	if code != 200 || wf["status"] != "waiting" {
		t.Fatalf("invoke: %d %v; want 200 with the workflow waiting", code, wf)
	}
	id := wf["workflow_id"].(string)

	a.kill()
	a = startChild(t, addrA, flags()...)
	if code, p := a.do("POST", "/v1/workflows/"+id+"/approvals/2", alice, map[string]any{"decision": "approve"}); code != 403 {
		t.Errorf("the invoker approving: %d %v; want 403", code, p)
	}
	if code, p := b.do("POST", "/v1/workflows/"+id+"/approvals/2", bob, map[string]any{"decision": "approve", "comment": "ok"}); code != 200 || p["decided_by"] != "bob" {
		t.Fatalf("bob approving on replica b: %d %v", code, p)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, wf = a.do("GET", "/v1/workflows/"+id, alice, nil)
		if wf["status"] != "running" && wf["status"] != "waiting" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if wf["status"] != "completed" || wf["outcome"] != "settled" {
		t.Fatalf("workflow after the approval: %v", wf)
	}
	if got := strings.Join(stepsOf(wf), " "); got != "1:fetch:ok 2:entry_approval:waiting_approval 3:entry_approval:approved 4:post_entry:ok" {
		t.Errorf("steps %s", got)
	}
	if keys := api.writeKeys(); len(keys) != 1 {
		t.Errorf("the write reached the tool %d times, want once", len(keys))
	}
	if n := api.reads.Load(); n != 1 {
		t.Errorf("the read reached the tool %d times, want once", n)
	}
	if code, p := b.do("POST", "/v1/workflows/"+id+"/approvals/2", bob, map[string]any{"decision": "deny"}); code != 409 {
		t.Errorf("a second decision: %d %v", code, p)
	}
	_, recs := a.do("GET", "/v1/audit/query?action=workflow.approval", alice, nil)
	list, _ := recs["records"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["actor"].(map[string]any)["sub"] != "bob" {
		t.Errorf("approval audit records: %v", recs)
	}
	if _, rep := b.do("GET", "/v1/audit/verify", alice, nil); rep["ok"] != true {
		t.Errorf("audit chain: %v", rep)
	}
}
