package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// entriesAPI is a tool API with one unrepeatable write, POST /entries. It
// counts the writes it receives and keeps each one's Idempotency-Key and
// memo; with hold set, the first one waits until released, so a test can
// kill a process while the write is in flight.
type entriesAPI struct {
	srv     *httptest.Server
	writes  atomic.Int32
	arrived chan struct{}
	release chan struct{}
	mu      sync.Mutex
	keyed   []string // "<Idempotency-Key> <memo>"
}

const entriesSpec = `{"openapi": "3.0.3", "info": {"title": "ledger", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/entries": {"post": {"operationId": "createEntry", "requestBody": {"required": true, "content": {"application/json":
   {"schema": {"type": "object", "required": ["amount", "memo"], "properties": {"amount": {"type": "number"}, "memo": {"type": "string"}}}}}},
   "responses": {"201": {"description": "created"}}}}}}`

func newEntriesAPI(t *testing.T, hold bool) *entriesAPI {
	a := &entriesAPI{arrived: make(chan struct{}, 8), release: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/openapi.json":
			fmt.Fprintf(w, entriesSpec, "http://"+r.Host)
		case r.Method == "POST" && r.URL.Path == "/entries":
			var entry struct {
				Memo string `json:"memo"`
			}
			json.NewDecoder(r.Body).Decode(&entry)
			a.mu.Lock()
			a.keyed = append(a.keyed, r.Header.Get("Idempotency-Key")+" "+entry.Memo)
			a.mu.Unlock()
			n := a.writes.Add(1)
			a.arrived <- struct{}{}
			if hold && n == 1 {
				<-a.release
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"entry": "e-%d"}`, n)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		a.open()
		a.srv.Close()
	})
	return a
}

// received are the writes received, "<Idempotency-Key> <memo>" each.
func (a *entriesAPI) received() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.keyed)
}

// open lets a held write answer.
func (a *entriesAPI) open() {
	select {
	case <-a.release:
	default:
		close(a.release)
	}
}

// entryModel is a scripted Chat Completions model: asked the goal, it asks
// for the write; shown the write's answer, it answers. With hold set, its
// first answer after the write waits (up to a minute, or until the client
// goes), announced on the channel returned.
func entryModel(t *testing.T, hold bool) (*llmtest.Server, chan struct{}) {
	held := make(chan struct{}, 1)
	var once sync.Once
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		if r.Last().Role != "tool" {
			return llmtest.Calls(llmtest.Call("ledger__createEntry", `{"amount": 42, "memo": "settle tx-1"}`))
		}
		a := llmtest.Text("Entry " + r.Last().Content + " settles tx-1.")
		if hold {
			once.Do(func() {
				a.Delay = time.Minute
				held <- struct{}{}
			})
		}
		return a
	})
	return ms, held
}

// agentProcess is the Go recipe's agent (examples/external/go-agent) built
// and run as a process of its own on a fixed loopback port.
type agentProcess struct {
	t    *testing.T
	bin  string
	addr string
	cmd  *exec.Cmd
	logs *lockedBuffer
	// model is the model it asks for ("default" when empty).
	model string
}

// agentBuild is the Go recipe's agent, built once for the package's tests
// (TestMain removes its directory).
var agentBuild struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildAgent builds the Go recipe's agent, once; it skips the test where
// there is no go command to build it with.
func buildAgent(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build examples/external/go-agent with")
	}
	agentBuild.once.Do(func() {
		if agentBuild.dir, agentBuild.err = os.MkdirTemp("", "go-agent-"); agentBuild.err != nil {
			return
		}
		agentBuild.bin = filepath.Join(agentBuild.dir, "go-agent")
		build := exec.Command(goCmd, "build", "-o", agentBuild.bin, "../../examples/external/go-agent")
		if out, err := build.CombinedOutput(); err != nil {
			agentBuild.err = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if agentBuild.err != nil {
		t.Fatalf("build the Go recipe's agent: %v", agentBuild.err)
	}
	return agentBuild.bin
}

func newAgentProcess(t *testing.T, bin string) *agentProcess {
	p := &agentProcess{t: t, bin: bin, addr: freeAddr(t)}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() && p.logs != nil {
			t.Logf("agent logs:\n%s", p.logs.String())
		}
	})
	return p
}

func (p *agentProcess) url() string { return "http://" + p.addr }

// start runs the agent and waits until it accepts connections.
func (p *agentProcess) start() {
	p.t.Helper()
	_, port, _ := net.SplitHostPort(p.addr)
	p.cmd = exec.Command(p.bin)
	p.cmd.Env = append(os.Environ(), "PORT="+port, "MODEL="+cmp.Or(p.model, "default"))
	if p.logs == nil {
		p.logs = &lockedBuffer{}
	}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", p.addr); err == nil {
			c.Close()
			return
		}
	}
	p.t.Fatalf("the agent did not listen on %s within 20 s", p.addr)
}

// kill ends the agent with SIGKILL.
func (p *agentProcess) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// externalKill is an agentplane server whose model "default" is the
// scripted model, with the entries tool registered as "ledger" and the
// agent deployed as "settle", invoked once.
type externalKill struct {
	dir, addr string
	flags     []string
	server    *child
	tok       string
}

func startExternalKill(t *testing.T, api *entriesAPI, ms *llmtest.Server, agent *agentProcess) *externalKill {
	k := newExternalServer(t, api, ms, agent.url(), killSetup{})
	k.invoke("settle tx-1")
	return k
}

// killSetup is what a test asks of newExternalServer beyond its defaults.
type killSetup struct {
	// idempotent registers the tool with idempotency_support.
	idempotent bool
	// other, when set, is registered as the model "other", which the
	// agent may ask as well as "default".
	other *llmtest.Server
}

// newExternalServer starts the server of an externalKill with the agent at
// url, not yet invoked.
func newExternalServer(t *testing.T, api *entriesAPI, ms *llmtest.Server, url string, setup killSetup) *externalKill {
	k := &externalKill{dir: t.TempDir(), addr: freeAddr(t)}
	k.flags = []string{"--data", k.dir, "--allow-private-networks", "--workflow-lease", "1s",
		"--llm-base-url", ms.URL, "--llm-model", "test-model"}
	k.server = startChild(t, k.addr, k.flags...)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", k.dir, "--addr", k.addr, "--tenant", "acme", "--scope",
		"tools:write models:write agents:read agents:write agents:invoke workflows:read audit:read tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	k.tok = strings.TrimSpace(out.String())
	if code, body := k.server.do("POST", "/v1/tools", k.tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "side_effects": []string{"create"}, "idempotency_support": setup.idempotent}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	models := []string{"default"}
	if setup.other != nil {
		if code, body := k.server.do("POST", "/v1/models", k.tok, map[string]any{"name": "other", "provider": "openai",
			"base_url": setup.other.URL, "model": "test-model"}); code != 201 {
			t.Fatalf("register the model other: %d %v", code, body)
		}
		models = append(models, "other")
	}
	if code, body := k.server.do("POST", "/v1/agents", k.tok, map[string]any{"name": "settle", "external": map[string]any{
		"url": url, "tools": []string{"ledger"}, "models": models}}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	return k
}

// invoke starts a run of "settle" with goal, not waiting for its end.
func (k *externalKill) invoke(goal string) {
	body, _ := json.Marshal(map[string]any{"goal": goal})
	go func() {
		req, _ := http.NewRequest("POST", k.server.base+"/v1/agents/settle/invoke", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k.tok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
}

// killMidWrite starts a run, kills the server while the run's write is in
// flight, and starts the agent again asking model; it returns the
// workflow's id, for a server started again on k's data.
func (k *externalKill) killMidWrite(t *testing.T, api *entriesAPI, agent *agentProcess, model string) string {
	t.Helper()
	k.invoke("settle tx-1")
	waitFor(t, api.arrived, "the write")
	id := k.workflowID(t)
	k.server.kill()
	api.open()
	agent.kill()
	agent.model = model
	agent.start()
	return id
}

// workflowID is the id of the one workflow of "settle".
func (k *externalKill) workflowID(t *testing.T) string {
	t.Helper()
	_, list := k.server.do("GET", "/v1/workflows?agent=settle", k.tok, nil)
	wfs, _ := list["workflows"].([]any)
	if len(wfs) != 1 {
		t.Fatalf("workflows of settle: %v", list)
	}
	id, _ := wfs[0].(map[string]any)["workflow_id"].(string)
	return id
}

// attemptSteps lists a workflow's steps as kind:status:attempt, with the
// error code and the journal mark when they are set.
func attemptSteps(wf map[string]any) string {
	var out []string
	steps, _ := wf["steps"].([]any)
	for _, s := range steps {
		m, _ := s.(map[string]any)
		line := fmt.Sprintf("%v:%v:%v", m["kind"], m["status"], m["attempt"])
		for _, k := range []string{"error_code", "journal"} {
			if v, ok := m[k].(string); ok && v != "" {
				line += ":" + v
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, " ")
}

// conversations are the number of messages of each request the model got,
// in order.
func conversations(ms *llmtest.Server) []int {
	var out []int
	for _, r := range ms.Requests() {
		out = append(out, len(r.Messages))
	}
	return out
}

// completedWithOneWrite checks what both kill tests end with: the run
// answered with the write's one answer, the write sent once, the steps.
func completedWithOneWrite(t *testing.T, wf map[string]any, api *entriesAPI, steps string) {
	t.Helper()
	out, _ := json.Marshal(wf["output"])
	if wf["status"] != "completed" || wf["outcome"] != "answered" || !strings.Contains(string(out), `e-1`) {
		t.Errorf("workflow %v %v, output %s", wf["status"], wf["outcome"], out)
	}
	if n := api.writes.Load(); n != 1 {
		t.Errorf("the write reached the tool %d times, want once", n)
	}
	if got := attemptSteps(wf); got != steps {
		t.Errorf("steps\n got %s\nwant %s", got, steps)
	}
}

// TestExternalAgentKilledAfterItsWriteRepeatsItFromTheJournal kills the
// agent's process once its write has reached the tool, before the answer
// reaches the agent. The attempt fails (the agent is unreachable), the
// agent starts again on its port, and the next attempt repeats the first
// completion and the write: both are answered from the run's record, and
// only the completion after the write reaches the model.
func TestExternalAgentKilledAfterItsWriteRepeatsItFromTheJournal(t *testing.T) {
	agent := newAgentProcess(t, buildAgent(t))
	api := newEntriesAPI(t, true)
	ms, _ := entryModel(t, false)
	agent.start()
	k := startExternalKill(t, api, ms, agent)
	waitFor(t, api.arrived, "the write")
	agent.kill()
	agent.start()
	api.open()

	wf := finished(t, k.server, k.tok, k.workflowID(t))
	completedWithOneWrite(t, wf, api,
		"completion:ok:1 call:ok:1 attempt:error:1:agent_unreachable completion:ok:2 attempt:ok:2")
	if got := fmt.Sprint(conversations(ms)); got != "[1 3]" {
		t.Errorf("the model got requests of %s messages, want [1 3]: the goal once, the write's answer once", got)
	}
}

// TestExternalServerKilledMidRunResumesWithANewAttempt kills agentplane
// while the agent waits on the completion after its write. The server
// started again on the same data takes the workflow over: the cut attempt
// ends interrupted, and a new one gets the first completion and the write
// from the journal and completes the run.
func TestExternalServerKilledMidRunResumesWithANewAttempt(t *testing.T) {
	agent := newAgentProcess(t, buildAgent(t))
	api := newEntriesAPI(t, false)
	ms, held := entryModel(t, true)
	agent.start()
	k := startExternalKill(t, api, ms, agent)
	waitFor(t, held, "the completion after the write")
	id := k.workflowID(t)
	k.server.kill()

	b := startChild(t, k.addr, k.flags...)
	wf := finished(t, b, k.tok, id)
	completedWithOneWrite(t, wf, api,
		"completion:ok:1 call:ok:1 attempt:error:1:interrupted completion:ok:2 attempt:ok:2")
	reqs := ms.Requests()
	if got := fmt.Sprint(conversations(ms)); got != "[1 3 3]" {
		t.Fatalf("the model got requests of %s messages, want [1 3 3]: the goal once, the write's answer twice (the crash cut the first)", got)
	}
	if first, again := canonical(reqs[1].Body), canonical(reqs[2].Body); first != again {
		t.Errorf("the completion after the write differs between attempts:\n%s\n%s", first, again)
	}
	if _, rep := b.do("GET", "/v1/audit/verify", k.tok, nil); rep["ok"] != true {
		t.Errorf("audit chain after the crash: %v", rep)
	}
}

// canonical is a JSON document with its objects' keys sorted.
func canonical(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestExternalServerKilledMidWriteRefusesToRepeatIt kills agentplane while
// the agent's unrepeatable write is in flight: whether the tool did it is
// not recorded. The new attempt gets the first completion from the
// journal; the write it repeats is refused as interrupted, never sent
// again, and the agent's model answers with the refusal.
func TestExternalServerKilledMidWriteRefusesToRepeatIt(t *testing.T) {
	agent := newAgentProcess(t, buildAgent(t))
	api := newEntriesAPI(t, true)
	ms, _ := entryModel(t, false)
	agent.start()
	k := startExternalKill(t, api, ms, agent)
	waitFor(t, api.arrived, "the write")
	id := k.workflowID(t)
	k.server.kill()
	api.open()

	b := startChild(t, k.addr, k.flags...)
	wf := finished(t, b, k.tok, id)
	if wf["status"] != "completed" || wf["outcome"] != "answered" {
		t.Errorf("workflow %v %v", wf["status"], wf["outcome"])
	}
	if n := api.writes.Load(); n != 1 {
		t.Errorf("the write reached the tool %d times, want once", n)
	}
	if got, want := attemptSteps(wf), "completion:ok:1 attempt:error:1:interrupted call:error:2:interrupted completion:ok:2 attempt:ok:2"; got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
	reqs := ms.Requests()
	if got := fmt.Sprint(conversations(ms)); got != "[1 3]" {
		t.Fatalf("the model got requests of %s messages, want [1 3]: the goal once, the refusal once", got)
	}
	if refusal := reqs[1].Last().Content; !strings.Contains(refusal, "the call was not sent again") {
		t.Errorf("the model was shown %q for the write, want the refusal", refusal)
	}
}

// TestExternalServerKilledMidIdempotentWrite kills agentplane while the
// agent's write to a tool that honours Idempotency-Key is in flight, and
// starts the agent again. Asking the same model, the new attempt repeats
// the write, which is sent again with the key it had: the tool can tell it
// is the same. Asking another model, the attempt diverges and makes
// another write, which is another call with a key of its own: the tool
// must not take it for the first.
func TestExternalServerKilledMidIdempotentWrite(t *testing.T) {
	tests := []struct {
		name, model string
		memos       []string
		sameKey     bool
		steps       string
	}{
		{name: "repeated", model: "default", memos: []string{"settle tx-1", "settle tx-1"}, sameKey: true,
			steps: "completion:ok:1 attempt:error:1:interrupted call:ok:2 completion:ok:2 attempt:ok:2"},
		{name: "another write", model: "other", memos: []string{"settle tx-1", "settle tx-1 again"},
			steps: "completion:ok:1 attempt:error:1:interrupted completion:ok:2:diverged call:ok:2 completion:ok:2 attempt:ok:2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			agent := newAgentProcess(t, buildAgent(t))
			api := newEntriesAPI(t, true)
			ms, _ := entryModel(t, false)
			other := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
				if r.Last().Role != "tool" {
					return llmtest.Calls(llmtest.Call("ledger__createEntry", `{"amount": 42, "memo": "settle tx-1 again"}`))
				}
				return llmtest.Text("Entry " + r.Last().Content + " settles tx-1.")
			})
			agent.start()
			k := newExternalServer(t, api, ms, agent.url(), killSetup{idempotent: true, other: other})
			id := k.killMidWrite(t, api, agent, tc.model)

			b := startChild(t, k.addr, k.flags...)
			wf := finished(t, b, k.tok, id)
			if wf["status"] != "completed" || wf["outcome"] != "answered" {
				t.Errorf("workflow %v %v: %v", wf["status"], wf["outcome"], wf["error"])
			}
			got := api.received()
			if len(got) != 2 {
				t.Fatalf("the tool received %q, want two writes", got)
			}
			var keys []string
			for i, g := range got {
				key, memo, _ := strings.Cut(g, " ")
				if memo != tc.memos[i] || !strings.HasPrefix(key, id+".") {
					t.Errorf("write %d: key %q, memo %q; want a key of the run and %q", i+1, key, memo, tc.memos[i])
				}
				keys = append(keys, key)
			}
			if (keys[0] == keys[1]) != tc.sameKey {
				t.Errorf("Idempotency-Keys %q: want the same key %t", keys, tc.sameKey)
			}
			if got := attemptSteps(wf); got != tc.steps {
				t.Errorf("steps\n got %s\nwant %s", got, tc.steps)
			}
		})
	}
}

// TestExternalServerKilledMidWriteRefusesOnlyThatCall kills agentplane
// while the agent's unrepeatable write is in flight, and starts the agent
// again asking another model, which makes another write of the same
// operation first and then the interrupted one, twice. The other write was
// never sent and goes out; the interrupted one is refused each time, never
// sent again.
func TestExternalServerKilledMidWriteRefusesOnlyThatCall(t *testing.T) {
	agent := newAgentProcess(t, buildAgent(t))
	api := newEntriesAPI(t, true)
	ms, _ := entryModel(t, false)
	other := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		switch strings.Count(string(r.Body), `"role":"tool"`) {
		case 0:
			return llmtest.Calls(llmtest.Call("ledger__createEntry", `{"amount": 7, "memo": "settle tx-2"}`))
		case 1, 2:
			return llmtest.Calls(llmtest.Call("ledger__createEntry", `{"amount": 42, "memo": "settle tx-1"}`))
		}
		return llmtest.Text("tx-2 settled; tx-1 may have been.")
	})
	agent.start()
	k := newExternalServer(t, api, ms, agent.url(), killSetup{other: other})
	id := k.killMidWrite(t, api, agent, "other")

	b := startChild(t, k.addr, k.flags...)
	wf := finished(t, b, k.tok, id)
	if wf["status"] != "completed" || wf["outcome"] != "answered" {
		t.Errorf("workflow %v %v: %v", wf["status"], wf["outcome"], wf["error"])
	}
	var memos []string
	for _, g := range api.received() {
		_, memo, _ := strings.Cut(g, " ")
		memos = append(memos, memo)
	}
	if want := []string{"settle tx-1", "settle tx-2"}; !slices.Equal(memos, want) {
		t.Errorf("the tool received %q, want %q: each write once", memos, want)
	}
	want := "completion:ok:1 attempt:error:1:interrupted completion:ok:2:diverged call:ok:2 completion:ok:2 call:error:2:interrupted " +
		"completion:ok:2 call:error:2:interrupted completion:ok:2 attempt:ok:2"
	if got := attemptSteps(wf); got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
}

// agentBalancer forwards each connection it accepts to the agent process
// it points at, as a layer-4 load balancer in front of an agent's replicas
// does; a connection ends on both sides when either side closes it.
type agentBalancer struct {
	ln      net.Listener
	backend atomic.Value // string
}

func newAgentBalancer(t *testing.T, backend string) *agentBalancer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &agentBalancer{ln: ln}
	b.backend.Store(backend)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.forward(c)
		}
	}()
	return b
}

func (b *agentBalancer) url() string { return "http://" + b.ln.Addr().String() }

func (b *agentBalancer) forward(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", b.backend.Load().(string))
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// TestExternalAgentKilledOnAKeptAliveConnection runs the agent as two
// replicas behind a load balancer. A first run leaves agentplane a
// kept-alive connection to the first replica; the second run's attempt
// goes over it, and that replica is killed once its write reached the
// tool. The attempt fails and the next one, served by the other replica,
// gets the write from the journal: the same attempt is not posted again.
func TestExternalAgentKilledOnAKeptAliveConnection(t *testing.T) {
	bin := buildAgent(t)
	first, second := newAgentProcess(t, bin), newAgentProcess(t, bin)
	first.start()
	second.start()
	lb := newAgentBalancer(t, first.addr)
	api := newEntriesAPI(t, true)
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		switch {
		case r.Messages[0].Content == "say hello":
			return llmtest.Text("hello")
		case r.Last().Role != "tool":
			return llmtest.Calls(llmtest.Call("ledger__createEntry", `{"amount": 42, "memo": "settle tx-1"}`))
		}
		return llmtest.Text("Entry " + r.Last().Content + " settles tx-1.")
	})
	k := newExternalServer(t, api, ms, lb.url(), killSetup{})
	if code, wf := k.server.do("POST", "/v1/agents/settle/invoke", k.tok, map[string]any{"goal": "say hello"}); code != 200 || wf["status"] != "completed" {
		t.Fatalf("the first run: %d %v", code, wf)
	}
	k.invoke("settle tx-1")
	waitFor(t, api.arrived, "the write")
	lb.backend.Store(second.addr)
	first.kill()
	api.open()

	_, list := k.server.do("GET", "/v1/workflows?agent=settle", k.tok, nil)
	var id string
	wfs, _ := list["workflows"].([]any)
	for _, w := range wfs {
		if m, _ := w.(map[string]any); m["status"] == "running" {
			id, _ = m["workflow_id"].(string)
		}
	}
	if id == "" {
		t.Fatalf("no running workflow of settle: %v", list)
	}
	wf := finished(t, k.server, k.tok, id)
	completedWithOneWrite(t, wf, api,
		"completion:ok:1 call:ok:1 attempt:error:1:agent_unreachable completion:ok:2 attempt:ok:2")
	if got := fmt.Sprint(conversations(ms)); got != "[1 1 3]" {
		t.Errorf("the model got requests of %s messages, want [1 1 3]: the first run's, then the goal once and the write's answer once", got)
	}
}
