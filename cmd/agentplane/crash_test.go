package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// writeAPI is a tool API with one read and one write operation; the first
// write blocks until released, so a test can kill the server mid-call.
type writeAPI struct {
	srv     *httptest.Server
	reads   atomic.Int32
	mu      sync.Mutex
	keys    []string // Idempotency-Key of each write received
	arrived chan struct{}
	release chan struct{}
}

func newWriteAPI(t *testing.T) *writeAPI {
	a := &writeAPI{arrived: make(chan struct{}, 8), release: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/openapi.json":
			fmt.Fprintf(w, crashSpec, "http://"+r.Host)
		case r.Method == "GET":
			a.reads.Add(1)
			json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/transactions/"), "amount": 42.0})
		case r.Method == "POST":
			a.mu.Lock()
			a.keys = append(a.keys, r.Header.Get("Idempotency-Key"))
			first := len(a.keys) == 1
			a.mu.Unlock()
			a.arrived <- struct{}{}
			if first {
				<-a.release
			}
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]any{"entry": "e-1"})
		}
	}))
	t.Cleanup(func() {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
		a.srv.Close()
	})
	return a
}

func (a *writeAPI) writeKeys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.keys...)
}

const crashSpec = `{"openapi": "3.0.3", "info": {"title": "ledger", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {
  "/transactions/{id}": {"get": {"operationId": "getTransaction", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
    "responses": {"200": {"description": "ok"}}}},
  "/entries": {"post": {"operationId": "postEntry", "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
    "responses": {"201": {"description": "created"}}}}}}`

const crashAgent = `{"tools": ["ledger"], "steps": [
  {"action": "fetch", "call": "ledger.getTransaction", "args": {"id": "'tx-1'"}, "save_as": "txn"},
  {"action": "post_entry", "call": "ledger.postEntry", "args": {"amount": "txn.amount"}}
 ], "outcome": "'settled'"}`

// crashRun registers the ledger (with or without idempotency support),
// starts a workflow, kills the server while the write is in flight, starts
// a new server on the same data and returns the workflow once it ends.
func crashRun(t *testing.T, idempotent bool) (wf map[string]any, api *writeAPI, a, b *child, tok string) {
	dir, addr := t.TempDir(), freeAddr(t)
	flags := []string{"--data", dir, "--allow-private-networks", "--workflow-lease", "1s"}
	a = startChild(t, addr, flags...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke workflows:read audit:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok = strings.TrimSpace(out.String())
	api = newWriteAPI(t)
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "idempotency_support": idempotent, "side_effects": []string{"create"}}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "settle", "definition": json.RawMessage(crashAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	go func() {
		req, _ := http.NewRequest("POST", a.base+"/v1/agents/settle/invoke", strings.NewReader(`{"goal": "settle tx-1"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-api.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the write never reached the tool")
	}
	a.kill()
	close(api.release)

	b = startChild(t, addr, flags...)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, list := b.do("GET", "/v1/workflows?agent=settle", tok, nil)
		wfs, _ := list["workflows"].([]any)
		if len(wfs) == 1 {
			w := wfs[0].(map[string]any)
			if w["status"] != "running" {
				_, wf = b.do("GET", "/v1/workflows/"+w["workflow_id"].(string), tok, nil)
				return wf, api, a, b, tok
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the workflow did not finish within 30 s of the restart")
	return
}

func stepsOf(wf map[string]any) []string {
	var out []string
	for _, s := range wf["steps"].([]any) {
		m := s.(map[string]any)
		out = append(out, fmt.Sprintf("%v:%v:%v", m["step"], m["action"], m["status"]))
	}
	return out
}

func TestCrashResumesAnIdempotentWriteWithTheSameKey(t *testing.T) {
	wf, api, _, b, tok := crashRun(t, true)
	if wf["status"] != "completed" || wf["outcome"] != "settled" {
		t.Fatalf("workflow after restart: %v", wf)
	}
	if got := stepsOf(wf); strings.Join(got, " ") != "1:fetch:ok 2:post_entry:ok" {
		t.Errorf("steps %v", got)
	}
	keys := api.writeKeys()
	want := wf["workflow_id"].(string) + ".2"
	if len(keys) != 2 || keys[0] != want || keys[1] != want {
		t.Errorf("write Idempotency-Keys %q, want two of %q", keys, want)
	}
	if n := api.reads.Load(); n != 1 {
		t.Errorf("the recorded read was sent %d times", n)
	}
	if _, rep := b.do("GET", "/v1/audit/verify", tok, nil); rep["ok"] != true {
		t.Errorf("audit chain after the crash: %v", rep)
	}
}

func TestCrashEndsAnUnrepeatableWriteInterrupted(t *testing.T) {
	wf, api, _, b, tok := crashRun(t, false)
	if wf["status"] != "failed" || wf["outcome"] != "failed" {
		t.Fatalf("workflow after restart: %v", wf)
	}
	e, _ := wf["error"].(map[string]any)
	if detail, _ := e["detail"].(string); !strings.Contains(detail, "interrupted") || e["code"] != "workflow-failed" {
		t.Errorf("error %v", e)
	}
	if got := stepsOf(wf); strings.Join(got, " ") != "1:fetch:ok" {
		t.Errorf("steps %v", got)
	}
	if keys := api.writeKeys(); len(keys) != 1 {
		t.Errorf("the write reached the tool %d times", len(keys))
	}
	if _, rep := b.do("GET", "/v1/audit/verify", tok, nil); rep["ok"] != true {
		t.Errorf("audit chain after the crash: %v", rep)
	}
}
