package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// chatServer is a model speaking the Chat Completions wire format. A
// conversation's first completion asks for transaction tx-1, the next
// answers. The first request of all blocks until released, so a test can
// kill the server while it is in flight. It counts the requests of each
// conversation (the hash of its messages).
type chatServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	seen    map[string]int
	order   []string
	arrived chan struct{}
	release chan struct{}
}

func newChatServer(t *testing.T) *chatServer {
	m := &chatServer{seen: map[string]int{}, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error": {"message": "not a chat completion"}}`, http.StatusNotFound)
			return
		}
		msgs, _ := json.Marshal(req.Messages)
		sum := sha256.Sum256(msgs)
		hash := hex.EncodeToString(sum[:8])
		m.mu.Lock()
		m.seen[hash]++
		m.order = append(m.order, hash)
		first := len(m.order) == 1
		m.mu.Unlock()
		m.arrived <- struct{}{}
		if first {
			<-m.release
		}
		msg, finish := `{"role": "assistant", "content": "tx-1 is settled"}`, "stop"
		if len(req.Messages) == 2 {
			msg, finish = `{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
				"function": {"name": "ledger__getTransaction", "arguments": "{\"id\": \"tx-1\"}"}}]}`, "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": "chatcmpl-%d", "object": "chat.completion", "created": 1, "model": "gpt-test-2026",
			"choices": [{"index": 0, "message": %s, "finish_reason": %q}],
			"usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}}`, len(req.Messages), msg, finish)
	}))
	t.Cleanup(func() {
		select {
		case <-m.release:
		default:
			close(m.release)
		}
		m.srv.Close()
	})
	return m
}

// requests is how many times each conversation was requested, in the
// order they were first requested.
func (m *chatServer) requests() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	done := map[string]bool{}
	for _, h := range m.order {
		if !done[h] {
			done[h] = true
			out = append(out, m.seen[h])
		}
	}
	return out
}

// blockingReads is the ledger tool of crashSpec whose first read blocks
// until released.
type blockingReads struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reads   int
	arrived chan struct{}
	release chan struct{}
}

func newBlockingReads(t *testing.T) *blockingReads {
	a := &blockingReads{arrived: make(chan struct{}, 8), release: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(w, crashSpec, "http://"+r.Host)
			return
		}
		a.mu.Lock()
		a.reads++
		first := a.reads == 1
		a.mu.Unlock()
		a.arrived <- struct{}{}
		if first {
			<-a.release
		}
		json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/transactions/"), "amount": 42.0})
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

const solverAgent = `{"tools": ["ledger"], "steps": [
  {"action": "solve", "plan": {"prompt": "goal"}, "save_as": "answer"}
 ], "output": "answer", "outcome": "'answered'"}`

func waitFor(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// finished polls the server until the workflow has ended.
func finished(t *testing.T, c *child, tok, id string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, wf := c.do("GET", "/v1/workflows/"+id, tok, nil); code == 200 && wf["status"] != "running" {
			return wf
		}
	}
	t.Fatalf("workflow %s did not finish within 30 s", id)
	return nil
}

// TestCrashRequestsACompletionOnceAnswered kills the server twice: while
// the first completion is in flight (it is requested again after the
// restart, exactly once), then while the tool call the recorded answer
// asked for is in flight (the recorded completion is not requested again).
// The client then reads the conversation and the tenant's usage.
func TestCrashRequestsACompletionOnceAnswered(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	model := newChatServer(t)
	ledger := newBlockingReads(t)
	flags := []string{"--data", dir, "--allow-private-networks", "--workflow-lease", "1s",
		"--llm-base-url", model.srv.URL + "/v1", "--llm-model", "gpt-test"}
	a := startChild(t, addr, flags...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:read agents:write agents:invoke workflows:read usage:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": ledger.srv.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "solver", "definition": json.RawMessage(solverAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	go func() {
		req, _ := http.NewRequest("POST", a.base+"/v1/agents/solver/invoke", strings.NewReader(`{"goal": "settle tx-1"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, model.arrived, "the first completion request")
	a.kill()
	close(model.release)

	b := startChild(t, addr, flags...)
	_, list := b.do("GET", "/v1/workflows?agent=solver", tok, nil)
	wfs, _ := list["workflows"].([]any)
	if len(wfs) != 1 {
		t.Fatalf("workflows after the first restart: %v", list)
	}
	id, _ := wfs[0].(map[string]any)["workflow_id"].(string)
	waitFor(t, model.arrived, "the completion requested again")
	waitFor(t, ledger.arrived, "the tool call the model asked for")
	b.kill()
	close(ledger.release)

	c := startChild(t, addr, flags...)
	wf := finished(t, c, tok, id)
	if wf["status"] != "completed" || wf["outcome"] != "answered" || wf["output"] != "tx-1 is settled" {
		t.Fatalf("workflow after two restarts: %v", wf)
	}
	if got := fmt.Sprint(model.requests()); got != "[2 1]" {
		t.Errorf("requests per conversation %s, want [2 1]: the unanswered first completion once more, the second once", got)
	}
	comps, _ := wf["completions"].([]any)
	usage, _ := wf["usage"].(map[string]any)
	if len(comps) != 2 || usage["completions"] != 2.0 || usage["input_tokens"] != 100.0 || usage["output_tokens"] != 10.0 {
		t.Errorf("completions %v, usage %v; want two of 50 in, 5 out", comps, usage)
	}

	e := &cliEnv{t: t, url: c.base, config: t.TempDir(), dir: t.TempDir(), token: tok}
	convo := e.ok("workflows", "get", id, "--conversation")
	for _, want := range []string{"completion 1", "user:", "calls ledger__getTransaction({\"id\": \"tx-1\"}) [call_1]",
		"tool (call_1):", "assistant: tx-1 is settled"} {
		if !strings.Contains(convo, want) {
			t.Errorf("workflows get --conversation lacks %q:\n%s", want, convo)
		}
	}
	if got := e.ok("workflows", "get", id); !strings.Contains(got, "usage: 2 completions, in=100 out=10") {
		t.Errorf("workflows get:\n%s", got)
	}
	table := e.ok("usage", "--group-by", "agent")
	if !hasRow(table, "solver 100 10 2 -") || !hasRow(table, "TOTAL 100 10 2 -") {
		t.Errorf("usage table:\n%s", table)
	}
	var rep struct {
		Total struct {
			Completions int `json:"completions"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(e.ok("usage", "--group-by", "model", "-o", "json")), &rep); err != nil || rep.Total.Completions != 2 {
		t.Errorf("usage -o json: %+v, %v", rep, err)
	}
	stream := e.ok("invoke", "solver", "--goal", "settle tx-1", "--stream", "--max-llm-tokens", "1000")
	if !strings.Contains(stream, "outcome answered") || !strings.Contains(stream, `output: "tx-1 is settled"`) {
		t.Errorf("invoke --stream printed:\n%s", stream)
	}
}

// hasRow reports whether a table printed a row of these words.
func hasRow(table, row string) bool {
	for _, line := range strings.Split(table, "\n") {
		if strings.Join(strings.Fields(line), " ") == row {
			return true
		}
	}
	return false
}

func TestCompletionLine(t *testing.T) {
	ev := map[string]any{"step": 2, "action": "solve", "status": "ok", "model": "gpt-4o-mini", "input_tokens": 812,
		"output_tokens": 40, "finish_reason": "tool_calls"}
	if got := stepLine(ev); got != "   2  solve                    ok               completion gpt-4o-mini  in=812 out=40  tool_calls" {
		t.Errorf("stepLine = %q", got)
	}
}
