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
	"testing"
	"time"
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
	// The strict conversation was never recorded: its completion is unrecorded.
	if !strings.Contains(out, "changed  decide  ok        unrecorded") || asked.Load() != before {
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

// reviewAgent asks the model for a finding, then for a decision on it,
// which is the outcome; instructions is the system message.
func reviewAgent(instructions string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"purpose": %q, "tools": ["payments"], "steps": [
  {"action": "assess", "plan": {"prompt": "goal"}, "save_as": "finding"},
  {"action": "decide", "plan": {"prompt": "'Decide on: ' + finding"}, "save_as": "decision"}],
 "outcome": "decision"}`, instructions))
}

// reviewModel is a scripted Chat Completions endpoint: under instructions
// that escalate refunds over 100 it finds such refunds too high, and a
// decision escalates what was found too high. It counts the answers it
// gave per conversation, and holds the requests hold says to until their
// client goes away.
type reviewModel struct {
	srv      *httptest.Server
	mu       sync.Mutex
	answered map[string]int
	hold     atomic.Pointer[func(user, prompt string) bool]
	held     chan string
}

func newReviewModel(t *testing.T) *reviewModel {
	m := &reviewModel{answered: map[string]int{}, held: make(chan string, 100)}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) < 2 {
			http.Error(w, "not a chat request", http.StatusBadRequest)
			return
		}
		system, user := req.Messages[0].Content, req.Messages[1].Content
		prompt := user[strings.LastIndex(user, "\n")+1:]
		if h := m.hold.Load(); h != nil && (*h)(user, prompt) {
			m.held <- user
			<-r.Context().Done() // until the server is killed
			return
		}
		amount := 0
		fmt.Sscanf(prompt[strings.LastIndex(prompt, " ")+1:], "%d", &amount)
		answer := "fine: " + strconv.Itoa(amount)
		switch {
		case strings.HasPrefix(prompt, "Decide on: "):
			answer = "approved"
			if strings.Contains(prompt, "too high") {
				answer = "escalated"
			}
		case strings.Contains(system, "Escalate refunds over 100") && amount > 100:
			answer = "too high: " + strconv.Itoa(amount)
		}
		var key strings.Builder
		for _, msg := range req.Messages {
			key.WriteString(msg.Role + ":" + msg.Content + "\x00")
		}
		m.mu.Lock()
		m.answered[key.String()]++
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
			"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, answer)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// TestLiveReplayBatchSurvivesACrash replays twelve workflows as a live
// batch, four at a time, holding the decisions of the last four; once
// they are asked (so their findings are answered and journaled) the
// server is killed with SIGKILL. The next start takes the batch over when
// the lease expires and finishes it: every workflow replayed once, and no
// completion the model answered asked of it again.
func TestLiveReplayBatchSurvivesACrash(t *testing.T) {
	model := newReviewModel(t)
	dir, addr := t.TempDir(), freeAddr(t)
	flags := []string{"--data", dir, "--allow-private-networks", "--workflow-lease", "2s", "--shutdown-timeout", "2s",
		"--rate-limit", "1000000", "--llm-base-url", model.srv.URL + "/v1/", "--llm-model", "m"}
	a := startChild(t, addr, flags...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write agents:write agents:invoke workflows:read workflows:replay tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	api, _ := amountsAPI(t)
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "payments", "type": "openapi", "spec_url": api.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	for v, instructions := range map[string]string{"1": "You review refunds. Approve them.", "2": "You review refunds. Escalate refunds over 100."} {
		if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "review", "version": v, "definition": reviewAgent(instructions)}); code != 201 {
			t.Fatalf("deploy %s: %d %v", v, code, body)
		}
	}
	amounts := []int{10, 200, 30, 400, 50, 600, 70, 800, 90, 1000, 110, 20}
	var ids []string
	late := map[string]bool{}
	for i, amount := range amounts {
		code, wf := a.do("POST", "/v1/agents/review@1/invoke", tok, map[string]any{"goal": "Refund of " + strconv.Itoa(amount)})
		if code != 200 || wf["outcome"] != "approved" {
			t.Fatalf("invoke: %d %v", code, wf)
		}
		ids = append(ids, wf["workflow_id"].(string))
		if i >= 8 {
			late["Goal: Refund of "+strconv.Itoa(amount)] = true
		}
	}
	hold := func(user, prompt string) bool {
		goal, _, _ := strings.Cut(user, "\n")
		return late[goal] && strings.HasPrefix(prompt, "Decide on: ")
	}
	model.hold.Store(&hold)

	code, created := a.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "review@2",
		"workflow_ids": ids, "llm": "live", "concurrency": 4})
	if code != 202 || created["llm"] != "live" || created["concurrency"] != float64(4) {
		t.Fatalf("create batch: %d %v", code, created)
	}
	id := created["id"].(string)
	for range 4 {
		select {
		case <-model.held:
		case <-time.After(30 * time.Second):
			t.Fatal("the last four decisions were not asked within 30 s")
		}
	}
	_, before := a.do("GET", "/v1/replay-batches/"+id, tok, nil)
	a.kill()
	t.Logf("killed with SIGKILL after %v replays", before["done"])
	model.hold.Store(nil)
	model.mu.Lock()
	answeredBefore := len(model.answered)
	model.mu.Unlock()

	b := startChild(t, addr, flags...)
	var batch map[string]any
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, batch = b.do("GET", "/v1/replay-batches/"+id, tok, nil)
		if batch["status"] != "running" || time.Now().After(deadline) {
			break
		}
	}
	if batch["status"] != "completed" || batch["done"] != float64(len(ids)) || batch["changed"] != float64(6) {
		t.Fatalf("batch after the crash: %v", batch)
	}
	model.mu.Lock()
	for conv, n := range model.answered {
		if n != 1 {
			t.Errorf("the model answered %d times:\n%q", n, conv)
		}
	}
	if len(model.answered) <= answeredBefore {
		t.Errorf("nothing was asked after the restart")
	}
	model.mu.Unlock()
	_, page := b.do("GET", "/v1/replay-batches/"+id+"/replays?limit=100", tok, nil)
	seen := map[string]int{}
	for _, r := range page["replays"].([]any) {
		seen[r.(map[string]any)["workflow_id"].(string)]++
	}
	for _, wf := range ids {
		if seen[wf] != 1 {
			t.Errorf("workflow %s has %d replays in the batch, want 1", wf, seen[wf])
		}
	}
}
