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

// serveInProcess runs agentplane serve until the returned stop is called.
func serveInProcess(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve"}, args...), func(string) string { return "" }, io.Discard, io.Discard)
	}()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop within 30 s")
		}
	}
}

func TestShutdownHandsRunningWorkflowsToTheNextStart(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	// A lease far longer than the test: only an explicit release lets the
	// next start resume the workflow in time.
	flags := []string{"--data", dir, "--addr", addr, "--allow-private-networks", "--workflow-lease", "5m", "--shutdown-timeout", "1s"}
	stop := serveInProcess(t, flags...)
	srv := &child{t: t, base: "http://" + addr}
	waitReady(t, srv.base)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke workflows:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	api := newWriteAPI(t)
	if code, body := srv.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "idempotency_support": true}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := srv.do("POST", "/v1/agents", tok, map[string]any{"name": "settle", "definition": json.RawMessage(crashAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	go func() {
		req, _ := http.NewRequest("POST", srv.base+"/v1/agents/settle/invoke", strings.NewReader(`{"goal": "settle", "stream": true}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-api.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the write never reached the tool")
	}
	stop() // SIGTERM: drain, stop the workflow without finishing it, release its lease
	close(api.release)

	stop = serveInProcess(t, flags...)
	defer stop()
	waitReady(t, srv.base)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, list := srv.do("GET", "/v1/workflows?agent=settle", tok, nil)
		if wfs, _ := list["workflows"].([]any); len(wfs) == 1 {
			if wf := wfs[0].(map[string]any); wf["status"] != "running" {
				if wf["outcome"] != "settled" {
					t.Fatalf("workflow after the restart: %v", wf)
				}
				if keys := api.writeKeys(); len(keys) != 2 || keys[0] != keys[1] {
					t.Fatalf("write keys %q", keys)
				}
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the workflow was not resumed within 20 s of the restart, though its lease runs 5 minutes")
}
