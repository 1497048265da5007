package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestARealReplaySurvivesAKilledServer starts a real replay with
// respond-async, kills the server while the replay's workflow waits on its
// write, and finds the replay completed by the next server, which resumed
// that workflow.
func TestARealReplaySurvivesAKilledServer(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	flags := []string{"--data", dir, "--allow-private-networks", "--workflow-lease", "1s"}
	a := startChild(t, addr, flags...)
	tok := dataToken(t, dir, addr, "tools:write agents:write agents:invoke workflows:read workflows:replay tool:*")
	api := newWriteAPI(t)
	api.mu.Lock()
	api.keys = append(api.keys, "before the replay") // so the write of the original is not held
	api.mu.Unlock()
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "idempotency_support": true, "side_effects": []string{"create"}}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	for v, outcome := range map[string]string{"1": "settled", "2": "booked"} {
		def := strings.Replace(crashAgent, "'settled'", "'"+outcome+"'", 1)
		if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "settle", "version": v, "definition": json.RawMessage(def)}); code != 201 {
			t.Fatalf("deploy %s: %d %v", v, code, body)
		}
	}
	code, wf := a.do("POST", "/v1/agents/settle@1/invoke", tok, map[string]any{"goal": "settle tx-1"})
	if code != 200 || wf["outcome"] != "settled" {
		t.Fatalf("invoke: %d %v", code, wf)
	}
	<-api.arrived
	api.mu.Lock()
	api.keys = nil // the replay's write is the first again: held
	api.mu.Unlock()

	body, _ := json.Marshal(map[string]any{"target_agent_version": "settle@2", "dry_run": false})
	req, _ := http.NewRequest("POST", a.base+"/v1/workflows/"+wf["workflow_id"].(string)+"/replay", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rp map[string]any
	json.NewDecoder(resp.Body).Decode(&rp)
	resp.Body.Close()
	if resp.StatusCode != 202 || rp["status"] != "running" {
		t.Fatalf("replay: %d %v", resp.StatusCode, rp)
	}
	id := rp["replay_id"].(string)
	select {
	case <-api.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the replay's write never reached the tool")
	}
	a.kill()
	close(api.release)

	b := startChild(t, addr, flags...)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, rp = b.do("GET", "/v1/replays/"+id, tok, nil)
		if rp["status"] != "running" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rp["status"] != "completed" || rp["replay_outcome"] != "booked" || rp["replay_workflow_id"] == "" {
		t.Fatalf("replay after the restart: %v, want completed with outcome booked", rp)
	}
	_, nw := b.do("GET", "/v1/workflows/"+rp["replay_workflow_id"].(string), tok, nil)
	if nw["status"] != "completed" || nw["replay_of"] != wf["workflow_id"] {
		t.Errorf("the replay's workflow: %v", nw)
	}
}

// dataToken mints a token of tenant acme with scope, as `agentplane token`
// does for the server on dir and addr.
func dataToken(t *testing.T, dir, addr, scope string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope", scope},
		func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}
