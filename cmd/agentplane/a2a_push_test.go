package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// gateAgent waits at an approval, then ends with an output.
const gateAgent = `{"steps": [{"action": "check", "approve": {"when": "true", "reason": "'check it'", "approver_scope": "approve:gate"}}],
 "outcome": "'passed'", "output": "{'checked': true}"}`

// TestA2APushNotificationsFromTheServer: the server process, as serve
// wires it, delivers a task's push notification as the A2A StreamResponse
// of the task, signed with the config's token.
func TestA2APushNotificationsFromTheServer(t *testing.T) {
	var (
		mu      sync.Mutex
		bodies  [][]byte
		headers []http.Header
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, headers = append(bodies, b), append(headers, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	data, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks")
	token := func(sub, scopes string) string {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--sub", sub,
			"--scope", scopes}, func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	alice, bob := token("alice", "agents:write agents:invoke"), token("bob", "workflows:approve approve:gate")
	if code, body := srv.do("POST", "/v1/agents", alice, map[string]any{"name": "gate", "definition": json.RawMessage(gateAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	code, sent := srv.do("POST", "/a2a/gate/message:send", alice, map[string]any{"message": map[string]any{
		"messageId": "m-1", "role": "ROLE_USER", "parts": []map[string]any{{"text": "pass the gate"}}}})
	task, _ := sent["task"].(map[string]any)
	if code != 200 || task == nil {
		t.Fatalf("send: %d %v", code, sent)
	}
	id := task["id"].(string)
	code, cfg := srv.do("POST", "/a2a/gate/tasks/"+id+"/pushNotificationConfigs", alice, map[string]any{"url": hook.URL})
	secret, _ := cfg["token"].(string)
	if code != 200 || secret == "" {
		t.Fatalf("push config: %d %v", code, cfg)
	}
	if code, body := srv.do("POST", "/v1/workflows/"+id+"/approvals/check", bob, map[string]any{"decision": "approve"}); code != 200 {
		t.Fatalf("decide: %d %v", code, body)
	}
	eventually(t, "a push notification", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	v, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(bodies[0], headers[0]); err != nil {
		t.Errorf("the notification does not verify with the config's token: %v", err)
	}
	var got struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Artifacts []struct {
				Parts []struct {
					Data map[string]any `json:"data"`
				} `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	}
	if err := json.Unmarshal(bodies[0], &got); err != nil || got.Task.ID != id || got.Task.Status.State != "TASK_STATE_COMPLETED" ||
		len(got.Task.Artifacts) != 1 || got.Task.Artifacts[0].Parts[0].Data["checked"] != true {
		t.Errorf("the notification: %v %s", err, bodies[0])
	}
}
