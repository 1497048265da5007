package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// TestExternalLiveBatchSurvivesACrash replays eight workflows of an
// external agent (the Go recipe, served by the test) as a live batch
// against a version with instructions, four at a time, holding the second
// completion of the last four; once they are asked (so their first
// completions are answered and journaled) the server is killed with
// SIGKILL. The next start takes the batch over when the lease expires and
// runs the agent again for the four: the gateway serves their first
// completions from the batch's journal, so every conversation the model
// answered was asked of it once, and the tool receives nothing.
func TestExternalLiveBatchSurvivesACrash(t *testing.T) {
	const instructions = "Answer in one line."
	var (
		mu       sync.Mutex
		answered = map[string]int{}
		hold     atomic.Pointer[func(llmtest.Request) bool]
		held     = make(chan struct{}, 100)
	)
	number := regexp.MustCompile(`[0-9]+`)
	model := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		if h := hold.Load(); h != nil && (*h)(r) {
			held <- struct{}{}
			return llmtest.Answer{Text: "never sent", Delay: time.Minute} // until the server is killed
		}
		var key strings.Builder
		for _, m := range r.Messages {
			key.WriteString(string(m.Role) + ":" + m.Content + "\x00")
		}
		mu.Lock()
		answered[key.String()]++
		mu.Unlock()
		if last := r.Last(); last.Role == "tool" {
			return llmtest.Text("done: " + last.Content)
		}
		return llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"`+number.FindString(r.Messages[len(r.Messages)-1].Content)+`"}`))
	})
	v1 := httptest.NewServer(goagent.Handler("gpt", 4))
	t.Cleanup(v1.Close)
	v2 := httptest.NewServer(goagent.NewHandler(goagent.Options{Model: "gpt", MaxTurns: 4, Instructions: instructions}))
	t.Cleanup(v2.Close)

	dir, addr := t.TempDir(), freeAddr(t)
	flags := []string{"--data", dir, "--allow-private-networks", "--workflow-lease", "2s", "--shutdown-timeout", "2s", "--rate-limit", "1000000"}
	a := startChild(t, addr, flags...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write models:write agents:write agents:invoke workflows:read workflows:replay tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	api, calls := amountsAPI(t)
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "payments", "type": "openapi", "spec_url": api.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := a.do("POST", "/v1/models", tok, map[string]any{"name": "gpt", "provider": "openai", "base_url": model.URL, "model": "test-model"}); code != 201 {
		t.Fatalf("register the model: %d %v", code, body)
	}
	for v, url := range []string{v1.URL, v2.URL} {
		if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "triage", "version": strconv.Itoa(v + 1),
			"external": map[string]any{"url": url, "tools": []string{"payments"}, "models": []string{"gpt"}}}); code != 201 {
			t.Fatalf("deploy %d: %d %v", v+1, code, body)
		}
	}
	var ids []string
	late := map[string]bool{}
	for i := range 8 {
		goal := "How much is transaction " + strconv.Itoa(100+i) + "?"
		code, wf := a.do("POST", "/v1/agents/triage@1/invoke", tok, map[string]any{"goal": goal})
		if code != 200 || wf["outcome"] != "answered" {
			t.Fatalf("invoke: %d %v", code, wf)
		}
		ids = append(ids, wf["workflow_id"].(string))
		if i >= 4 {
			late[goal] = true
		}
	}
	called := calls.Load()
	// The replays' second completions of the last four goals are held.
	holdLate := func(r llmtest.Request) bool {
		return len(r.Messages) > 2 && r.Messages[0].Content == instructions && late[r.Messages[1].Content] && r.Last().Role == "tool"
	}
	hold.Store(&holdLate)

	code, created := a.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "triage@2",
		"workflow_ids": ids, "llm": "live", "concurrency": 4})
	if code != 202 {
		t.Fatalf("create batch: %d %v", code, created)
	}
	id := created["id"].(string)
	for range 4 {
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatal("the last four replays' second completions were not asked within 30 s")
		}
	}
	a.kill()
	hold.Store(nil)
	mu.Lock()
	answeredBefore := len(answered)
	mu.Unlock()

	b := startChild(t, addr, flags...)
	var batch map[string]any
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, batch = b.do("GET", "/v1/replay-batches/"+id, tok, nil)
		if batch["status"] != "running" || time.Now().After(deadline) {
			break
		}
	}
	if batch["status"] != "completed" || batch["done"] != float64(len(ids)) {
		t.Fatalf("batch after the crash: %v", batch)
	}
	mu.Lock()
	for conv, n := range answered {
		if n != 1 {
			t.Errorf("the model answered %d times:\n%q", n, conv)
		}
	}
	// 8 originals and 8 replays, two completions each.
	if len(answered) != 32 || len(answered) <= answeredBefore {
		t.Errorf("the model answered %d conversations (%d before the kill), want 32", len(answered), answeredBefore)
	}
	mu.Unlock()
	if n := calls.Load() - called; n != 0 {
		t.Errorf("the tool received %d requests during the dry batch", n)
	}
	_, page := b.do("GET", "/v1/replay-batches/"+id+"/replays?limit=100", tok, nil)
	for _, r := range page["replays"].([]any) {
		rp := r.(map[string]any)
		usage, _ := rp["usage"].(map[string]any)
		replayUsage, _ := usage["replay"].(map[string]any)
		out, _ := json.Marshal(rp["replay_output"])
		if rp["replay_outcome"] != "answered" || replayUsage["completions"] != 2.0 || !strings.Contains(string(out), "done: ") {
			t.Errorf("replay of %v: %v %s, usage %v", rp["workflow_id"], rp["replay_outcome"], out, usage)
		}
		for _, c := range rp["completions"].([]any) {
			if _, ok := c.(map[string]any)["wire"]; ok {
				t.Errorf("replay of %v shows a completion's journal record", rp["workflow_id"])
			}
		}
	}
}
