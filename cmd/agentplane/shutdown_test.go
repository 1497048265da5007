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

// deploySettle mints a token of acme for the server on dir at addr,
// registers the ledger (whose first write waits for api.release) and
// deploys the settle agent.
func deploySettle(t *testing.T, srv *child, dir, addr string) (tok string, api *writeAPI) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke workflows:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok = strings.TrimSpace(out.String())
	api = newWriteAPI(t)
	if code, body := srv.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "idempotency_support": true}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := srv.do("POST", "/v1/agents", tok, map[string]any{"name": "settle", "definition": json.RawMessage(crashAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	return tok, api
}

func TestShutdownHandsRunningWorkflowsToTheNextStart(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	// A lease far longer than the test: only an explicit release lets the
	// next start resume the workflow in time.
	flags := []string{"--data", dir, "--addr", addr, "--allow-private-networks", "--workflow-lease", "5m", "--shutdown-timeout", "1s"}
	stop := serveInProcess(t, flags...)
	srv := &child{t: t, base: "http://" + addr}
	waitReady(t, srv.base)
	tok, api := deploySettle(t, srv, dir, addr)
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

// TestShutdownEndsOpenStreams checks that an open event stream does not
// hold a shutdown for its grace period: the stream ends with a comment
// saying why, and the server exits at once.
func TestShutdownEndsOpenStreams(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", dir, "--allow-private-networks", "--shutdown-timeout", "2m")
	tok, api := deploySettle(t, srv, dir, addr)
	req, _ := http.NewRequest("POST", srv.base+"/v1/agents/settle/invoke", strings.NewReader(`{"goal": "settle", "stream": true}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamed := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		streamed <- string(b)
	}()
	select {
	case <-api.arrived: // the stream is open while the write is in flight
	case <-time.After(20 * time.Second):
		t.Fatal("the write never reached the tool")
	}

	exited := make(chan struct{})
	go func() {
		srv.stop()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		srv.cmd.Process.Kill()
		<-exited
		t.Fatal("the server did not exit within 15 s of SIGTERM with a stream open (grace period 2 min)")
	}
	select {
	case body := <-streamed:
		if !strings.HasSuffix(body, ": server shutting down\n\n") {
			t.Fatalf("the stream ended with %q, want the shutdown comment", body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the stream is still open after the server exited")
	}
}
