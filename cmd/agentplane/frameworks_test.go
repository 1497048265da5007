package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// The tests of external agents written with third-party frameworks run
// examples/external/<name>/agent.mjs with Node 22 and the packages its
// package.json pins (.ci/run installs both).
const (
	// Node22Env names a Node 22 binary.
	Node22Env = "AGENTPLANE_TEST_NODE22"
	// FrameworksNodeModulesEnv names a node_modules holding the packages
	// of every examples/external/*/package.json.
	FrameworksNodeModulesEnv = "AGENTPLANE_TEST_FRAMEWORKS_NODE_MODULES"
)

// frameworks is the Node 22 binary and the frameworks' node_modules, or a
// skip (a failure under CI=1).
func frameworks(t *testing.T) (node, modules string) {
	t.Helper()
	node, modules = os.Getenv(Node22Env), os.Getenv(FrameworksNodeModulesEnv)
	if node != "" && modules != "" {
		return node, modules
	}
	install := fmt.Sprintf("npm install --prefix DIR node@22 and set %s=DIR/node_modules/node/bin/node; "+
		"npm install --prefix DIR2 the packages of examples/external/*/package.json and set %s=DIR2/node_modules (.ci/run does both)",
		Node22Env, FrameworksNodeModulesEnv)
	if os.Getenv("CI") == "1" {
		t.Fatalf("CI=1 needs %s and %s: %s", Node22Env, FrameworksNodeModulesEnv, install)
	}
	t.Skipf("%s or %s unset: %s", Node22Env, FrameworksNodeModulesEnv, install)
	return "", ""
}

// startExample runs examples/external/<name>/agent.mjs on a port of its
// choosing and returns its URL once it listens. The program is copied
// beside a link to modules: Node resolves an ES module's imports from the
// module's own directory up, never from NODE_PATH.
func startExample(t *testing.T, node, modules, name string, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "external", name, "agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.mjs"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "agent.mjs")
	cmd.Dir = dir
	return listening(t, cmd, name, env)
}

// python is the Python 3 that runs examples/external/python, or a skip (a
// failure under CI=1). The recipe needs nothing beyond the standard library.
func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err == nil {
		return py
	}
	if os.Getenv("CI") == "1" {
		t.Fatalf("CI=1 needs python3 on the PATH (apt-get install python3; .ci/run does)")
	}
	t.Skip("no python3 on the PATH")
	return ""
}

// startPythonExample runs examples/external/python/agent.py where it is
// (its import of server.py is from its own directory), writing no bytecode
// there, and returns its URL once it listens.
func startPythonExample(t *testing.T, py string, env ...string) string {
	t.Helper()
	cmd := exec.Command(py, "agent.py")
	cmd.Dir = filepath.Join("..", "..", "examples", "external", "python")
	return listening(t, cmd, "python", append([]string{"PYTHONDONTWRITEBYTECODE=1"}, env...))
}

// listening starts cmd on a port of its choosing (PORT=0, env added to the
// test's environment) and returns the URL it prints once it listens; the
// process is killed when the test ends.
func listening(t *testing.T, cmd *exec.Cmd, name string, env []string) string {
	t.Helper()
	cmd.Env = append(os.Environ(), append([]string{"PORT=0"}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s agent's stderr:\n%s", name, logs.String())
		}
	})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				listening <- url
			}
		}
	}()
	select {
	case url := <-listening:
		return url
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s agent did not listen within 30 s", name)
		return ""
	}
}

// ledgerAPI is a tool API with one read, getTransaction; it keeps every
// request it is sent but its spec's.
type ledgerAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string
}

const ledgerSpec = `{"openapi": "3.0.3", "info": {"title": "ledger", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/transactions/{id}": {"get": {"operationId": "getTransaction", "summary": "A transaction by its id",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "the transaction"}}}}}}`

func newLedgerAPI(t *testing.T) *ledgerAPI {
	a := &ledgerAPI{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(w, ledgerSpec, "http://"+r.Host)
			return
		}
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %q, "amount": 42.5, "currency": "EUR", "status": "settled"}`, strings.TrimPrefix(r.URL.Path, "/transactions/"))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *ledgerAPI) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.reqs)
}

// frameworkCase is one framework's agent and the model it talks to.
type frameworkCase struct {
	// example names examples/external/<example>; env is its environment
	// beyond PORT and MODEL.
	example string
	env     []string
	// provider is the registered model's provider; model starts the
	// scripted model speaking the wire format the framework uses.
	provider string
	model    func(testing.TB, llmtest.Script, ...llmtest.Option) *llmtest.Server
	// stream says the framework streams its completions.
	stream bool
	// script is the model's script, frameworkScript when nil.
	script llmtest.Script
}

// The scripted conversation: the model asks for the transaction, then
// answers with what the tool said, in one word when its instructions are
// the second version's.
const (
	frameworkGoal     = "What is the status of transaction tx-1?"
	frameworkAnswer   = "Transaction tx-1 is settled: 42.50 EUR."
	frameworkAnswerV2 = "Settled."
	instructionsV2    = "Answer in one word."
)

// frameworkScript asks for the transaction until the tool's answer is the
// last message, then answers.
func frameworkScript(r llmtest.Request) llmtest.Answer {
	switch {
	case !strings.Contains(r.Last().Content, `"settled"`):
		return llmtest.Calls(llmtest.Call("ledger__getTransaction", `{"id":"tx-1"}`))
	case strings.Contains(string(r.Body), instructionsV2):
		return llmtest.Text(frameworkAnswerV2)
	}
	return llmtest.Text(frameworkAnswer)
}

// frameworkWorld is a real server with c's agent deployed as version 1 of
// ledger-helper, its tool and its scripted model.
type frameworkWorld struct {
	c             frameworkCase
	node, modules string // agent.mjs's
	python        string // agent.py's
	srv           *child
	tok           string
	ledger        *ledgerAPI
	model         *llmtest.Server
}

func newFrameworkWorld(t *testing.T, c frameworkCase) *frameworkWorld {
	w := &frameworkWorld{c: c}
	if c.example == "python" {
		w.python = python(t)
	} else {
		w.node, w.modules = frameworks(t)
	}
	dir, addr := t.TempDir(), freeAddr(t)
	w.srv = startChild(t, addr, "--data", dir, "--allow-private-networks")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write models:write agents:write agents:invoke workflows:read workflows:replay audit:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	w.tok = strings.TrimSpace(out.String())

	w.ledger = newLedgerAPI(t)
	if code, body := w.srv.do("POST", "/v1/tools", w.tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": w.ledger.srv.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register the tool: %d %v", code, body)
	}
	script := c.script
	if script == nil {
		script = frameworkScript
	}
	w.model = c.model(t, script)
	if code, body := w.srv.do("POST", "/v1/models", w.tok, map[string]any{"name": "helper", "provider": c.provider,
		"base_url": w.model.URL, "model": "test-model"}); code != 201 {
		t.Fatalf("register the model: %d %v", code, body)
	}
	w.deploy(t)
	return w
}

// deploy runs another process of the agent with env added to its own and
// deploys it as the next version of ledger-helper.
func (w *frameworkWorld) deploy(t *testing.T, env ...string) {
	t.Helper()
	env = slices.Concat([]string{"MODEL=helper"}, w.c.env, env)
	var agentURL string
	if w.python != "" {
		agentURL = startPythonExample(t, w.python, env...)
	} else {
		agentURL = startExample(t, w.node, w.modules, w.c.example, env...)
	}
	if code, body := w.srv.do("POST", "/v1/agents", w.tok, map[string]any{"name": "ledger-helper", "external": map[string]any{
		"url": agentURL, "tools": []string{"ledger"}, "models": []string{"helper"}, "timeout": "2m", "max_attempts": 1}}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
}

// runFramework runs c's agent as an external agent of a real server and
// checks the run end to end: the agent's output, the steps and
// completions the gateway recorded, the one request the tool received,
// the model's two requests, and the audit log. Then it replays the run.
func runFramework(t *testing.T, c frameworkCase) {
	w := newFrameworkWorld(t, c)
	srv, tok, ledger, model := w.srv, w.tok, w.ledger, w.model

	code, res := srv.do("POST", "/v1/agents/ledger-helper/invoke", tok, map[string]any{"goal": frameworkGoal})
	id, _ := res["workflow_id"].(string)
	if code != 200 || res["status"] != "completed" || res["outcome"] != "answered" {
		t.Fatalf("invoke: %d %v", code, res)
	}
	if got, _ := json.Marshal(res["output"]); string(got) != `{"answer":"`+frameworkAnswer+`"}` {
		t.Errorf("output %s", got)
	}

	// The steps: two completions of the registered model, the call
	// between, then the attempt's answer.
	var steps []string
	for _, s := range res["steps"].([]any) {
		step := s.(map[string]any)
		switch step["action"] {
		case "completion":
			steps = append(steps, fmt.Sprintf("completion %v in=%v out=%v %v %v", step["model"], step["input_tokens"], step["output_tokens"], step["finish_reason"], step["status"]))
		case "call":
			steps = append(steps, fmt.Sprintf("call %v.%v %v", step["tool"], step["operation"], step["status"]))
		default:
			steps = append(steps, fmt.Sprintf("%v %v", step["action"], step["status"]))
		}
	}
	want := []string{"completion helper in=10 out=5 tool_calls ok", "call ledger.getTransaction ok",
		"completion helper in=10 out=5 stop ok", "attempt ok"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %q, want %q\n%v", steps, want, res["steps"])
	}
	// The workflow shows the conversation: the second completion was asked
	// with the tool's answer and answered with the agent's output.
	code, wf := srv.do("GET", "/v1/workflows/"+id, tok, nil)
	var comps []struct {
		Model   string `json:"model"`
		Request struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		} `json:"request"`
		Response struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"response"`
	}
	b, _ := json.Marshal(wf["completions"])
	if err := json.Unmarshal(b, &comps); err != nil || code != 200 || len(comps) != 2 {
		t.Fatalf("workflow %d: completions %s (%v)", code, b, err)
	}
	msgs := comps[1].Request.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "tool" || !strings.Contains(msgs[len(msgs)-1].Content, `"settled"`) ||
		comps[1].Response.Message.Content != frameworkAnswer {
		t.Errorf("the second completion's conversation: %s", b)
	}
	if usage, _ := wf["usage"].(map[string]any); usage["completions"] != 2.0 || usage["input_tokens"] != 20.0 || usage["output_tokens"] != 10.0 {
		t.Errorf("usage %v", usage)
	}

	// The tool got exactly the call the model asked for.
	if got := ledger.requests(); !slices.Equal(got, []string{"GET /transactions/tx-1"}) {
		t.Errorf("the tool received %q", got)
	}
	// The model got the goal, then the tool's answer, with the provider's
	// credentials (none here), never the run's token.
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model received %d requests, want 2", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), "tx-1") || !strings.Contains(reqs[1].Last().Content, "settled") {
		t.Errorf("the model's requests:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	for _, r := range reqs {
		if r.Stream != c.stream {
			t.Errorf("request %d: stream %t, want %t", r.N, r.Stream, c.stream)
		}
		if r.Model != "test-model" || r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			t.Errorf("request %d: model %q, Authorization %t, X-Api-Key %t", r.N, r.Model, r.Header.Get("Authorization") != "", r.Header.Get("X-Api-Key") != "")
		}
	}

	// The audit log has the call and the end of the workflow.
	code, audit := srv.do("GET", "/v1/audit/query?limit=1000&workflow_id="+id, tok, nil)
	var actions []string
	for _, r := range audit["records"].([]any) {
		actions = append(actions, r.(map[string]any)["action"].(string))
	}
	for _, a := range []string{"tool.call", "workflow.step", "workflow.finish"} {
		if code != 200 || !slices.Contains(actions, a) {
			t.Errorf("audit of %s: %d, actions %q lack %s", id, code, actions, a)
		}
	}

	w.replayNewInstructions(t, id, wf["steps"].([]any))
	w.replayRecorded(t, id, res["output"])
}

// frameworkReplay is what a replay answers that the tests check.
type frameworkReplay struct {
	Outcome string          `json:"replay_outcome"`
	Error   string          `json:"replay_error"`
	Output  json.RawMessage `json:"replay_output"`
	Delta   struct {
		Added        int `json:"steps_added"`
		Changed      int `json:"steps_changed"`
		Removed      int `json:"steps_removed"`
		CallsChanged int `json:"tool_calls_changed"`
	} `json:"delta"`
	Steps []struct {
		Kind     string         `json:"kind"`
		Original map[string]any `json:"original"`
		Replay   map[string]any `json:"replay"`
	} `json:"steps"`
	Usage struct {
		Replay struct {
			Completions int `json:"completions"`
		} `json:"replay"`
	} `json:"usage"`
}

// replay replays workflow id as body asks and returns the answer.
func (w *frameworkWorld) replay(t *testing.T, id string, body map[string]any) frameworkReplay {
	t.Helper()
	code, res := w.srv.do("POST", "/v1/workflows/"+id+"/replay", w.tok, body)
	var rp frameworkReplay
	b, _ := json.Marshal(res)
	if err := json.Unmarshal(b, &rp); err != nil || code != 201 {
		t.Fatalf("replay %v: %d %s (%v)", body, code, b, err)
	}
	return rp
}

// stepFacts are the facts of a step that a replay compares (tool,
// operation, canonical args, status, result, model, finish reason), one
// line per step.
func stepFacts(s map[string]any) string {
	var b strings.Builder
	for _, k := range []string{"action", "tool", "operation", "args", "status", "result", "model", "finish_reason"} {
		v, _ := json.Marshal(s[k]) // map keys sorted: canonical for these values
		fmt.Fprintf(&b, "%s=%s ", k, v)
	}
	return b.String()
}

// replayNewInstructions deploys the agent again as version 2 with new
// instructions and replays the recorded run against it, dry and with the
// model live: the tool receives nothing, the model is asked with the new
// instructions and then given the recorded tool answer, and the delta is
// the steps whose facts differ from the original's (original).
func (w *frameworkWorld) replayNewInstructions(t *testing.T, id string, original []any) {
	w.deploy(t, "INSTRUCTIONS="+instructionsV2)
	toolBefore, modelBefore := len(w.ledger.requests()), w.model.Count()
	rp := w.replay(t, id, map[string]any{"target_agent_version": "ledger-helper@2", "dry_run": true, "llm": "live"})
	if rp.Outcome != "answered" || string(rp.Output) != `{"answer":"`+frameworkAnswerV2+`"}` {
		t.Errorf("replay against @2: %s %s (%s)", rp.Outcome, rp.Output, rp.Error)
	}
	if got := w.ledger.requests()[toolBefore:]; len(got) != 0 {
		t.Errorf("the tool received %q during the replay", got)
	}
	reqs := w.model.Requests()[modelBefore:]
	if len(reqs) != 2 {
		t.Fatalf("the model received %d requests during the replay, want 2", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), instructionsV2) || !strings.Contains(string(reqs[1].Body), instructionsV2) ||
		!strings.Contains(reqs[1].Last().Content, `"settled"`) || !strings.Contains(reqs[1].Last().Content, "42.5") {
		t.Errorf("the model's requests during the replay, want the new instructions and then the recorded answer:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	if rp.Usage.Replay.Completions != 2 {
		t.Errorf("the replay's usage counts %d completions, want 2", rp.Usage.Replay.Completions)
	}

	// The replay made the original's steps in the original's order, so
	// every step aligns with the original's at its place and the changed
	// ones are those whose facts differ.
	if len(rp.Steps) != len(original) {
		t.Fatalf("the replay has %d steps, the original %d: %+v", len(rp.Steps), len(original), rp.Steps)
	}
	changed := 0
	for i, e := range rp.Steps {
		o := original[i].(map[string]any)
		if e.Original == nil || e.Replay == nil || stepFacts(e.Original) != stepFacts(o) {
			t.Fatalf("step %d: %+v does not align with the original's %v", i, e, o)
		}
		want := "same"
		if stepFacts(e.Replay) != stepFacts(o) {
			want = "changed"
			changed++
		}
		if e.Kind != want {
			t.Errorf("step %d is %s, want %s:\n%s\n%s", i, e.Kind, want, stepFacts(o), stepFacts(e.Replay))
		}
	}
	if d := rp.Delta; d.Added != 0 || d.Removed != 0 || d.Changed != changed || d.CallsChanged != 0 {
		t.Errorf("delta %+v, want %d steps changed and nothing else", d, changed)
	}
}

// replayRecorded replays the recorded run against its own version with
// the model's answers from the record: neither the model nor the tool
// receives a request, and the replay answers as the run did, step for
// step.
func (w *frameworkWorld) replayRecorded(t *testing.T, id string, output any) {
	toolBefore, modelBefore := len(w.ledger.requests()), w.model.Count()
	rp := w.replay(t, id, map[string]any{"target_agent_version": "ledger-helper@1", "dry_run": true, "llm": "recorded"})
	want, _ := json.Marshal(output)
	if rp.Outcome != "answered" || string(rp.Output) != string(want) {
		t.Errorf("replay against @1: %s %s (%s), want answered %s", rp.Outcome, rp.Output, rp.Error, want)
	}
	if n, m := len(w.ledger.requests())-toolBefore, w.model.Count()-modelBefore; n != 0 || m != 0 {
		t.Errorf("during the replay from the record the tool received %d requests and the model %d", n, m)
	}
	if rp.Usage.Replay.Completions != 0 {
		t.Errorf("the replay's usage counts %d completions, want 0", rp.Usage.Replay.Completions)
	}
	var kinds []string
	for _, e := range rp.Steps {
		kinds = append(kinds, e.Kind)
	}
	if d := rp.Delta; d.Added+d.Removed+d.Changed+d.CallsChanged != 0 || len(kinds) != 4 || slices.ContainsFunc(kinds, func(k string) bool { return k != "same" }) {
		t.Errorf("delta %+v, steps %q: want 4 steps all the same", d, kinds)
	}
}

// parallelScript asks for two transactions in one answer until the
// tools' answers are the last messages, then answers.
func parallelScript(r llmtest.Request) llmtest.Answer {
	if !strings.Contains(r.Last().Content, `"settled"`) {
		return llmtest.Calls(llmtest.Call("ledger__getTransaction", `{"id":"tx-1"}`), llmtest.Call("ledger__getTransaction", `{"id":"tx-2"}`))
	}
	return llmtest.Text(frameworkAnswer)
}

// TestExternalAgentLangGraphParallelCalls: the model asks for two calls in
// one answer and LangGraph's ToolNode makes them at once. The gateway makes
// them in turn, each once, in whatever order they came; replays of the run
// from its record, whose calls may come in another order, change nothing.
func TestExternalAgentLangGraphParallelCalls(t *testing.T) {
	w := newFrameworkWorld(t, frameworkCase{example: "langgraph", provider: "openai", model: llmtest.NewOpenAIServer, script: parallelScript})
	code, res := w.srv.do("POST", "/v1/agents/ledger-helper/invoke", w.tok, map[string]any{"goal": "What are tx-1 and tx-2?"})
	id, _ := res["workflow_id"].(string)
	if code != 200 || res["status"] != "completed" || res["outcome"] != "answered" {
		t.Fatalf("invoke: %d %v", code, res)
	}
	code, wf := w.srv.do("GET", "/v1/workflows/"+id, w.tok, nil)
	if code != 200 {
		t.Fatalf("get %s: %d %v", id, code, wf)
	}
	var steps, calls []string
	for _, s := range wf["steps"].([]any) {
		step := s.(map[string]any)
		steps = append(steps, fmt.Sprintf("%v %v", step["action"], step["status"]))
		if step["action"] == "call" {
			args, _ := json.Marshal(step["args"])
			calls = append(calls, string(args))
		}
	}
	if want := []string{"completion ok", "call ok", "call ok", "completion ok", "attempt ok"}; !slices.Equal(steps, want) {
		t.Fatalf("steps %q, want %q", steps, want)
	}
	slices.Sort(calls)
	if want := []string{`{"id":"tx-1"}`, `{"id":"tx-2"}`}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	got := w.ledger.requests()
	slices.Sort(got)
	if want := []string{"GET /transactions/tx-1", "GET /transactions/tx-2"}; !slices.Equal(got, want) {
		t.Errorf("the tool received %q, want each transaction once", got)
	}
	// The agent's framework makes the two calls at once, so a replay's may
	// reach the gateway in either order; each replay pairs them with the
	// run's by their arguments.
	for i := range 3 {
		rp := w.replay(t, id, map[string]any{"target_agent_version": "ledger-helper@1", "dry_run": true, "llm": "recorded"})
		var kinds []string
		for _, e := range rp.Steps {
			kinds = append(kinds, e.Kind)
		}
		if d := rp.Delta; rp.Outcome != "answered" || d.Added+d.Removed+d.Changed+d.CallsChanged != 0 ||
			!slices.Equal(kinds, []string{"same", "same", "same", "same", "same"}) {
			t.Errorf("replay %d: %s (%s), delta %+v, steps %q: want the run's steps all the same", i+1, rp.Outcome, rp.Error, d, kinds)
		}
	}
	if n := len(w.ledger.requests()); n != 2 {
		t.Errorf("the tool received %d requests in all, want the run's 2", n)
	}
}

func TestExternalAgentLangGraph(t *testing.T) {
	runFramework(t, frameworkCase{example: "langgraph", provider: "openai", model: llmtest.NewOpenAIServer})
}

func TestExternalAgentOpenAIAgentsSDK(t *testing.T) {
	t.Parallel()
	for _, api := range []string{"responses", "chat_completions"} {
		for _, stream := range []string{"0", "1"} {
			t.Run(api+"/stream="+stream, func(t *testing.T) {
				runFramework(t, frameworkCase{example: "openai-agents", env: []string{"OPENAI_API=" + api, "STREAM=" + stream},
					provider: "openai", model: llmtest.NewOpenAIServer, stream: stream == "1"})
			})
		}
	}
}

// TestExternalAgentPython: the Python recipe with no framework (urllib for
// Chat Completions and for MCP) goes through the same checks.
func TestExternalAgentPython(t *testing.T) {
	runFramework(t, frameworkCase{example: "python", provider: "openai", model: llmtest.NewOpenAIServer})
}

func TestExternalAgentVercelAISDK(t *testing.T) {
	runFramework(t, frameworkCase{example: "vercel-ai", provider: "anthropic", model: llmtest.NewAnthropicServer})
}

// TestFrameworksAgainstTheDemo runs each framework's recipe against serve
// --demo as docs/external-agents.md tells a new user to ("Each recipe
// against the demo"): the demo model on the wire the recipe speaks, the
// demo's payments and customers APIs as its tools.
func TestFrameworksAgainstTheDemo(t *testing.T) {
	t.Parallel()
	node, modules := frameworks(t)
	py := python(t)
	e := demoEnv(t)
	for i, c := range []struct {
		example, model string
		env            []string
	}{
		{"langgraph", "demo", nil},
		{"openai-agents", "demo", nil}, // the Responses API
		{"openai-agents", "demo", []string{"OPENAI_API=chat_completions", "STREAM=1"}},
		{"vercel-ai", "demo-anthropic", nil}, // Anthropic's Messages API
		{"python", "demo", nil},
	} {
		env := append([]string{"MODEL=" + c.model}, c.env...)
		var url string
		if c.example == "python" {
			url = startPythonExample(t, py, env...)
		} else {
			url = startExample(t, node, modules, c.example, env...)
		}
		name := fmt.Sprintf("helper-%d", i)
		e.ok("agents", "deploy", e.write(name+".yaml", fmt.Sprintf(
			"name: %s\nexternal:\n  url: %s\n  tools: [payments, customers]\n  models: [%s]\n", name, url, c.model)))
		out := e.ok("invoke", name, "--goal", "Is tx_1003 risky?", "--stream")
		for _, want := range []string{"completion " + c.model, "payments.getTransaction", "customers.customer",
			"completed, outcome answered", "tx_1003 is 2400.00 EUR at Gold & Co", "It looks risky"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s %v on %s: the invoke lacks %q:\n%s", c.example, c.env, c.model, want, out)
			}
		}
	}
}

// TestExternalAgentLangGraphSurvivesAServerKill kills the server while the
// LangGraph agent's second completion is in flight. After the restart a
// new attempt runs the agent again: the gateway answers its first
// completion and its tool call from the run's record, so the tool is
// called once, and only the unanswered completion is requested again.
func TestExternalAgentLangGraphSurvivesAServerKill(t *testing.T) {
	node, modules := frameworks(t)
	dir, addr := t.TempDir(), freeAddr(t)
	flags := []string{"--data", dir, "--allow-private-networks", "--workflow-lease", "1s"}
	a := startChild(t, addr, flags...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write models:write agents:write agents:invoke workflows:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	ledger := newLedgerAPI(t)
	if code, body := a.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": ledger.srv.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register the tool: %d %v", code, body)
	}
	inFlight := make(chan struct{}, 1)
	model := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		switch r.N {
		case 1:
			return llmtest.Calls(llmtest.Call("ledger__getTransaction", `{"id":"tx-1"}`))
		case 2: // held until the server that asked is killed
			inFlight <- struct{}{}
			return llmtest.Answer{Text: "never sent", Delay: time.Minute}
		}
		return llmtest.Text(frameworkAnswer)
	})
	if code, body := a.do("POST", "/v1/models", tok, map[string]any{"name": "helper", "provider": "openai",
		"base_url": model.URL, "model": "test-model"}); code != 201 {
		t.Fatalf("register the model: %d %v", code, body)
	}
	agentURL := startExample(t, node, modules, "langgraph", "MODEL=helper")
	if code, body := a.do("POST", "/v1/agents", tok, map[string]any{"name": "ledger-helper", "external": map[string]any{
		"url": agentURL, "tools": []string{"ledger"}, "models": []string{"helper"}, "timeout": "2m"}}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	go func() {
		req, _ := http.NewRequest("POST", a.base+"/v1/agents/ledger-helper/invoke", strings.NewReader(`{"goal": "`+frameworkGoal+`"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, inFlight, "the second completion")
	a.kill()

	b := startChild(t, addr, flags...)
	_, list := b.do("GET", "/v1/workflows?agent=ledger-helper", tok, nil)
	wfs, _ := list["workflows"].([]any)
	if len(wfs) != 1 {
		t.Fatalf("workflows after the restart: %v", list)
	}
	id, _ := wfs[0].(map[string]any)["workflow_id"].(string)
	wf := finished(t, b, tok, id)
	got, _ := json.Marshal(wf["output"])
	if wf["status"] != "completed" || string(got) != `{"answer":"`+frameworkAnswer+`"}` {
		t.Fatalf("workflow after the restart: %v", wf)
	}
	// Attempt 1's exchanges and its interruption, then attempt 2's one
	// live completion: its first completion and its call were answered
	// from the record and made no steps.
	var steps []string
	for _, s := range wf["steps"].([]any) {
		step := s.(map[string]any)
		steps = append(steps, strings.TrimSpace(fmt.Sprintf("%v attempt=%v %v %v%v%v", step["action"], step["attempt"], step["status"],
			textOf(step["finish_reason"]), textOf(step["error_code"]), textOf(step["journal"]))))
	}
	want := []string{"completion attempt=1 ok tool_calls", "call attempt=1 ok", "attempt attempt=1 error interrupted",
		"completion attempt=2 ok stop", "attempt attempt=2 ok"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %q, want %q", steps, want)
	}
	if got := ledger.requests(); !slices.Equal(got, []string{"GET /transactions/tx-1"}) {
		t.Errorf("the tool received %q", got)
	}
	if n := model.Count(); n != 3 {
		t.Errorf("the model received %d requests, want 3: the first once, the second again after the kill", n)
	}
}

// textOf is v as text, or "" when v is absent.
func textOf(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// TestPythonRecipesParse: the Python frameworks' recipes of
// docs/external-agents.md, which the suite does not run (their packages
// come from PyPI), are Python that parses.
func TestPythonRecipesParse(t *testing.T) {
	t.Parallel()
	py := python(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "external-agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, part := range strings.Split(string(doc), "```python\n")[1:] {
		src, _, ok := strings.Cut(part, "\n```\n")
		if !ok {
			t.Fatalf("a python block that does not close: %.80q", part)
		}
		blocks++
		cmd := exec.Command(py, "-c", "import ast, sys; ast.parse(sys.stdin.read())")
		cmd.Stdin = strings.NewReader(src)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("python block %d does not parse: %v\n%s\n%s", blocks, err, out, src)
		}
	}
	if blocks < 4 {
		t.Errorf("%d python blocks in external-agents.md, want the recipes' 4", blocks)
	}
}
