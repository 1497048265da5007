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
	"sync/atomic"
	"testing"
)

// refundsAgent is an LLM agent of one plan step whose answer is its
// outcome; instructions is its system message.
func refundsAgent(version, instructions string) string {
	return fmt.Sprintf(`name: refunds
version: "%s"
definition:
  purpose: %q
  tools: [payments]
  steps:
    - {action: decide, plan: {prompt: goal}, save_as: decision}
  outcome: decision
`, version, instructions)
}

// TestCLIWhatIfReplay runs the server with --llm-base-url on a scripted
// Chat Completions endpoint whose answer depends on the instructions, and
// replays a workflow of a lenient version against a strict one: from the
// record nothing is asked and the strict conversation is unrecorded; with
// --llm live the model is asked once and the outcome changes, with the
// usage shown. (The tokens are the planner's to report.)
func TestCLIWhatIfReplay(t *testing.T) {
	var asked atomic.Int32
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.NotFound(w, r)
			return
		}
		asked.Add(1)
		answer := "approved"
		if strings.Contains(req.Messages[0].Content, "Escalate") {
			answer = "escalated"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
			"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":30,"completion_tokens":1,"total_tokens":31}}`, answer)
	}))
	defer model.Close()
	api := newCLIAPI(t)
	data := t.TempDir()
	addr := freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks", "--llm-base-url", model.URL+"/v1/", "--llm-model", "m")
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:read tools:write agents:read agents:write agents:invoke workflows:read workflows:replay tool:*"},
		func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}
	e.ok("tools", "register", "--name", "payments", "--type", "openapi", "--spec-url", api.srv.URL+"/openapi.json")
	e.ok("agents", "deploy", e.write("v1.yaml", refundsAgent("1", "You review refunds. Approve them.")))
	e.ok("agents", "deploy", e.write("v2.yaml", refundsAgent("2", "You review refunds. Escalate them.")))
	st, wf := srv.do("POST", "/v1/agents/refunds@1/invoke", e.token, map[string]any{"goal": "Refund 40"})
	if st != 200 || wf["outcome"] != "approved" {
		t.Fatalf("invoke refunds@1: %d %v", st, wf)
	}
	id := wf["workflow_id"].(string)
	before := asked.Load()

	out := e.ok("replay", id, "--target", "refunds@2")
	// The strict conversation was never recorded: its plan step is unrecorded.
	if !strings.Contains(out, "added  decide  -         unrecorded") || asked.Load() != before {
		t.Errorf("recorded replay asked the model %d times:\n%s", asked.Load()-before, out)
	}
	out = e.ok("replay", id, "--target", "refunds@2", "--llm", "live")
	for _, want := range []string{"(dry run, llm live, unrecorded calls skip)", "outcome: approved -> escalated",
		"usage: original 1 completions", "; replay 1 completions"} {
		if !strings.Contains(out, want) {
			t.Errorf("live replay output lacks %q:\n%s", want, out)
		}
	}
	if n := asked.Load() - before; n != 1 {
		t.Errorf("the live replay asked the model %d times, want once", n)
	}
}
