package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReadTimeoutBoundsRequestsNotResponses checks --read-timeout: a client
// that stops sending its body is cut off, while a response that takes longer
// than the timeout (a sync invoke waiting on a slow tool) is not.
func TestReadTimeoutBoundsRequestsNotResponses(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	c := startChild(t, addr, "--data", dir, "--allow-private-networks", "--read-timeout", "1s")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())

	t.Run("a stalled body is cut off", func(t *testing.T) {
		waited, err := stallBody(addr, tok)
		if err != nil {
			t.Fatal(err)
		}
		if waited > 5*time.Second {
			t.Errorf("the server waited %v for a body that never came; want about 1 s", waited)
		}
	})

	t.Run("a slow response is not", func(t *testing.T) {
		api := newWriteAPI(t)
		if code, body := c.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
			"spec_url": api.srv.URL + "/openapi.json", "side_effects": []string{"create"}}); code != 201 {
			t.Fatalf("register: %d %v", code, body)
		}
		if code, body := c.do("POST", "/v1/agents", tok, map[string]any{"name": "settle", "definition": json.RawMessage(crashAgent)}); code != 201 {
			t.Fatalf("deploy: %d %v", code, body)
		}
		go func() {
			<-api.arrived
			// The tool answers once the read timeout has passed for the
			// invoke: the server has cut off a request sent after it.
			if _, err := stallBody(addr, tok); err != nil {
				t.Error(err)
			}
			close(api.release)
		}()
		code, wf := c.do("POST", "/v1/agents/settle/invoke", tok, map[string]any{"goal": "settle tx-1"})
		if code != http.StatusOK || wf["status"] != "completed" {
			t.Errorf("invoke held past the read timeout by its tool: %d %v, want 200 completed", code, wf)
		}
	})
}

// stallBody sends a request whose body stops after its first byte and
// returns how long the server took to answer and close the connection (at
// most ten seconds).
func stallBody(addr, tok string) (time.Duration, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	start := time.Now()
	conn.SetDeadline(start.Add(10 * time.Second))
	io.WriteString(conn, "POST /v1/tools HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+tok+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	io.Copy(io.Discard, conn) // until the server answers and closes, or the deadline
	return time.Since(start), nil
}
