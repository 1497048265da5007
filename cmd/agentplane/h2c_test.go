package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// TestServerWideModelOverH2C runs the server with
// --llm-http2-prior-knowledge against a model speaking Chat Completions
// over unencrypted HTTP/2 only: the plan steps of workflows invoked at once
// are answered, every completion over HTTP/2, all on one connection.
func TestServerWideModelOverH2C(t *testing.T) {
	const n = 6
	model := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		// Each answer waits, so the completions are in flight together.
		return llmtest.Answer{Text: "answered: " + r.Last().Content, Delay: 500 * time.Millisecond}
	}, llmtest.H2C())
	dir, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", dir, "--allow-private-networks",
		"--llm-base-url", model.URL, "--llm-model", "gpt-test", "--llm-http2-prior-knowledge")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	// The plan offers the ledger's operations; the model answers at once.
	ledger := newBlockingReads(t)
	if code, body := srv.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": ledger.srv.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	def := `{"tools": ["ledger"], "steps": [{"action": "answer", "plan": {"prompt": "goal"}, "save_as": "answer"}],
		"output": "answer", "outcome": "'answered'"}`
	if code, body := srv.do("POST", "/v1/agents", tok, map[string]any{"name": "asker", "definition": json.RawMessage(def)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			goal := "question " + string(rune('a'+i))
			code, wf := srv.do("POST", "/v1/agents/asker/invoke", tok, map[string]any{"goal": goal})
			if code != 200 || wf["outcome"] != "answered" || !strings.Contains(wf["output"].(string), goal) {
				t.Errorf("invoke %q: %d %v", goal, code, wf)
			}
		})
	}
	wg.Wait()
	reqs := model.Requests()
	if len(reqs) != n {
		t.Fatalf("the model got %d completions, want %d", len(reqs), n)
	}
	for _, r := range reqs {
		if r.ProtoMajor != 2 {
			t.Errorf("completion %d over HTTP/%d, want HTTP/2", r.N, r.ProtoMajor)
		}
	}
	if c := model.Conns(); c != 1 {
		t.Errorf("%d completions in flight took %d connections, want 1", n, c)
	}
}
