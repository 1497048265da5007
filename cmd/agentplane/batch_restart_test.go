package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// amountsAPI answers GET /transactions/{n} with amount n and counts the
// requests it receives.
func amountsAPI(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(w, amountsSpec, "http://"+r.Host)
			return
		}
		calls.Add(1)
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/transactions/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id": n, "amount": n})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

const amountsSpec = `{"openapi": "3.0.3", "info": {"title": "payments", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/transactions/{id}": {"get": {"operationId": "getTransaction",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}}}}`

// triageAgent escalates transactions above the threshold.
func triageAgent(threshold int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"tools": ["payments"], "steps": [
  {"action": "fetch", "call": "payments.getTransaction", "args": {"id": "context.transaction_id"}, "save_as": "txn"}],
 "outcome": "txn.amount > %d ? 'escalated' : 'cleared'"}`, threshold))
}

// stop ends the server with SIGTERM, as an operator or an orchestrator does.
func (c *child) stop() {
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Wait()
}

// TestReplayBatchSurvivesStopsAndCrashes replays 1,000 workflows as one
// batch and interrupts it twice: a graceful stop, whose next start resumes
// at once though leases last five minutes, then a SIGKILL, whose next start
// takes over when the killed server's lease expires. The batch finishes
// with every workflow replayed exactly once and no request to the tool.
func TestReplayBatchSurvivesStopsAndCrashes(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	flags := func(lease string) []string {
		return []string{"--data", dir, "--allow-private-networks", "--workflow-lease", lease, "--replay-batch-workers", "1", "--shutdown-timeout", "2s", "--rate-limit", "1000000"}
	}
	a := startChild(t, addr, flags("5m")...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke workflows:read workflows:replay tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	api, calls := amountsAPI(t)
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "payments", "type": "openapi", "spec_url": api.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	for v, threshold := range map[string]int{"1": 1000, "2": 500} {
		if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "triage", "version": v, "definition": triageAgent(threshold)}); code != 201 {
			t.Fatalf("deploy %s: %d %v", v, code, body)
		}
	}

	// 1,000 workflows; amounts 0..1,998, so those of 501..1,000 change.
	const n = 1000
	wantChanged := 0
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				body, _ := json.Marshal(map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": strconv.Itoa(2 * i)}})
				req, _ := http.NewRequest("POST", a.base+"/v1/agents/triage@1/invoke", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("invoke: %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("invoke: %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i := range n {
		if 2*i > 500 && 2*i <= 1000 {
			wantChanged++
		}
	}
	before := calls.Load()

	// A check runs on every replay; its results must survive the restarts
	// and be counted once each.
	code, created := a.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "triage@2",
		"workflows": map[string]any{"agent": "triage", "limit": n},
		"checks":    []map[string]any{{"name": "outcome_unchanged"}}, "gate": map[string]any{"outcome_unchanged": 0.5}})
	if code != 202 || created["total"] != float64(n) {
		t.Fatalf("create batch: %d %v", code, created)
	}
	id := created["id"].(string)

	// waitDone polls the batch until at least min workflows are replayed,
	// and fails if it finished first: the interruption would test nothing.
	waitDone := func(c *child, min int) int {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			_, b := c.do("GET", "/v1/replay-batches/"+id, tok, nil)
			done := int(b["done"].(float64))
			if b["status"] != "running" {
				t.Fatalf("the batch finished (%v, %d done) before it could be interrupted", b["status"], done)
			}
			if done >= min {
				return done
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("the batch did not reach %d replays in 60 s", min)
		return 0
	}
	seen := waitDone(a, 1)
	a.stop()
	t.Logf("stopped with SIGTERM after %d replays", seen)

	b := startChild(t, addr, flags("2s")...)
	seen = waitDone(b, seen+1)
	b.kill()
	t.Logf("killed with SIGKILL after %d replays", seen)

	c := startChild(t, addr, flags("2s")...)
	var batch map[string]any
	deadline := time.Now().Add(120 * time.Second)
	for {
		_, batch = c.do("GET", "/v1/replay-batches/"+id, tok, nil)
		if batch["status"] != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if batch["status"] != "completed" || batch["done"] != float64(n) || batch["changed"] != float64(wantChanged) {
		t.Fatalf("batch after the restarts: %v", batch)
	}
	checks, _ := batch["checks"].([]any)
	if len(checks) != 1 || fmt.Sprint(checks[0].(map[string]any)["passed"], checks[0].(map[string]any)["failed"]) != fmt.Sprint(n-wantChanged, wantChanged) ||
		batch["verdict"] != "passed" {
		t.Errorf("checks after the restarts %v, verdict %v; want %d passed and %d failed, passed", checks, batch["verdict"], n-wantChanged, wantChanged)
	}

	// Every workflow has exactly one replay on triage@2.
	perWorkflow := map[string]int{}
	cursor := ""
	for range 100 {
		_, page := c.do("GET", "/v1/replays?target=triage@2&limit=200&cursor="+cursor, tok, nil)
		for _, r := range page["replays"].([]any) {
			perWorkflow[r.(map[string]any)["workflow_id"].(string)]++
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	twice := 0
	for _, k := range perWorkflow {
		if k != 1 {
			twice++
		}
	}
	if len(perWorkflow) != n || twice > 0 {
		t.Errorf("%d workflows replayed, %d of them more than once; want %d, each once", len(perWorkflow), twice, n)
	}
	if got := calls.Load() - before; got != 0 {
		t.Errorf("the batch sent %d requests to the tool", got)
	}
}
