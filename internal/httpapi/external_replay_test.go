package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/workflow"
)

// withExternalReplays makes the replays and batches use the external
// runner (after withExternal), as cmd/agentplane wires them: dry runs of
// external versions through its gateway, live completions and reads.
func withExternalReplays() option {
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		r, s := d.Runner, d.Replays
		s.Programs, s.Runner, s.Reader, s.Externals, s.Models = r, r, r, r, replay.RunnerModels{Runner: r}
		s.Invoker = &workflow.Invoker{Runner: r, Workflows: d.Workflows, Now: time.Now}
		r.OnFinish(s.Finished)
	}
}

// replayScript is the scripted model of the replay tests: it asks for
// what the goal names (a case, tx-2, else tx-1), then answers with the
// tool's words.
func replayScript(r llmtest.Request) llmtest.Answer {
	if last := r.Last(); last.Role == "tool" {
		return llmtest.Text("done: " + last.Content)
	}
	switch goal := r.Messages[0].Content; {
	case strings.Contains(goal, "file a case"):
		return llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud-review"}`))
	case strings.Contains(goal, "tx-2"):
		return llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-2"}`))
	}
	return llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-1"}`))
}

// replayAgent serves the Go recipe's agent with its goal rewritten (a
// version with other instructions), keeping the run.replay it was sent.
type replayAgent struct {
	mu      sync.Mutex
	replays []map[string]any
	// inflight counts the invocations being answered, peak the most at once.
	inflight, peak atomic.Int32
}

func (ra *replayAgent) serve(t *testing.T, rewrite func(string) string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		var run struct {
			Run struct {
				Replay map[string]any `json:"replay"`
			} `json:"run"`
		}
		raw := json.NewDecoder(r.Body)
		var body json.RawMessage
		if err := raw.Decode(&body); err != nil || json.Unmarshal(body, &in) != nil || json.Unmarshal(body, &run) != nil {
			http.Error(rw, "not an invocation", http.StatusBadRequest)
			return
		}
		ra.mu.Lock()
		ra.replays = append(ra.replays, run.Run.Replay)
		ra.mu.Unlock()
		n := ra.inflight.Add(1)
		defer ra.inflight.Add(-1)
		for p := ra.peak.Load(); n > p && !ra.peak.CompareAndSwap(p, n); p = ra.peak.Load() {
		}
		in.Goal = rewrite(in.Goal)
		answer, err := goagent.Run(r.Context(), in, "gpt", 5)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(rw).Encode(map[string]any{"output": map[string]any{"answer": answer}, "outcome": "answered"})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (ra *replayAgent) last() map[string]any {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if len(ra.replays) == 0 {
		return nil
	}
	return ra.replays[len(ra.replays)-1]
}

type extReplayResult struct {
	ID             string          `json:"replay_id"`
	Outcome        string          `json:"replay_outcome"`
	ReplayError    string          `json:"replay_error"`
	Output         json.RawMessage `json:"replay_output"`
	OriginalTarget string          `json:"original_agent_version"`
	Delta          replay.Delta    `json:"delta"`
	Steps          []struct {
		Kind     string        `json:"kind"`
		Original *externalStep `json:"original"`
		Replay   *externalStep `json:"replay"`
		Fields   []string      `json:"changed_fields"`
	} `json:"steps"`
	Usage       replay.Usages       `json:"usage"`
	Completions []replay.Completion `json:"completions"`
	ViewerURL   string              `json:"viewer_url"`
}

// replaySteps are the replay side's steps, kind:status.
func (r extReplayResult) replaySteps() []string {
	var out []string
	for _, e := range r.Steps {
		if e.Replay != nil {
			out = append(out, e.Replay.Kind+":"+e.Replay.Status)
		}
	}
	return out
}

func (r extReplayResult) replayStep(kind string) *externalStep {
	for _, e := range r.Steps {
		if e.Replay != nil && e.Replay.Kind == kind {
			return e.Replay
		}
	}
	return nil
}

func doExtReplay(t *testing.T, h *harness, token, wfID string, body map[string]any) extReplayResult {
	t.Helper()
	r := h.do("POST", "/v1/workflows/"+wfID+"/replay", token, body)
	if r.Status != 201 {
		t.Fatalf("replay %v: %d %s", body, r.Status, r.Body)
	}
	var res extReplayResult
	r.json(t, &res)
	return res
}

// TestExternalDryReplay replays an external agent's workflow against
// versions of it: the tool server receives nothing, the recorded answer
// reaches the agent, completions come from the record or the model as llm
// says, and a call never recorded is unrecorded, read live, or (a write)
// never sent.
func TestExternalDryReplay(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, replayScript)
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	agents := &replayAgent{}
	same := func(g string) string { return g }
	deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": agents.serve(t, same), "tools": []string{"payments", "cases"}, "models": []string{"gpt"}})

	r := h.do("POST", "/v1/agents/ext-triage/invoke", w.admin, map[string]any{"goal": "How much is tx-1?"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "answered" || !strings.Contains(string(wf.Output), `\"amount\":20`) {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if agents.last() != nil {
		t.Errorf("a first run was sent run.replay %v", agents.last())
	}
	// Other versions: new instructions; a goal that needs tx-2; one that
	// files a case.
	for _, rewrite := range []func(string) string{
		func(g string) string { return "Be brief. " + g },
		func(g string) string { return g + " Compare with tx-2." },
		func(g string) string { return g + " Then file a case." },
	} {
		deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": agents.serve(t, rewrite), "tools": []string{"payments", "cases"}, "models": []string{"gpt"}})
	}
	// A live call now would answer 99: a replay that says 20 was served
	// from the record.
	w.amounts.Store("tx-1", 99.0)
	w.amounts.Store("tx-2", 7.0)
	paid, modelled := w.payments.Load(), ms.Count()
	replayer := h.token("acme", replayScopes)

	t.Run("same version, recorded: nothing is sent", func(t *testing.T) {
		res := doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-triage@1"})
		if res.Outcome != "answered" || string(res.Output) != string(wf.Output) {
			t.Errorf("replay %s %s, want answered %s (%s)", res.Outcome, res.Output, wf.Output, res.ReplayError)
		}
		if got := strings.Join(res.replaySteps(), " "); got != "completion:ok call:ok completion:ok attempt:ok" {
			t.Errorf("replay steps %s", got)
		}
		if res.Delta != (replay.Delta{}) {
			t.Errorf("delta %+v, want none", res.Delta)
		}
		if w.payments.Load() != paid || ms.Count() != modelled {
			t.Errorf("tool %d→%d, model %d→%d requests: a dry run with recorded completions sends nothing", paid, w.payments.Load(), modelled, ms.Count())
		}
		if rp := agents.last(); rp["of"] != wf.ID || rp["dry_run"] != true {
			t.Errorf("run.replay %v", rp)
		}
		// The viewer names the agent that ran.
		page := h.do("GET", strings.TrimPrefix(res.ViewerURL, h.URL), "", nil)
		if page.Status != 200 || !strings.Contains(string(page.Body), `<code id="target-url">http://127.0.0.1:`) {
			t.Errorf("the viewer (%d) does not name the external agent's URL:\n%.2000s", page.Status, page.Body)
		}
		if res.Usage.Replay.Completions != 0 || res.Usage.Original.Completions != 2 {
			t.Errorf("usage %+v", res.Usage)
		}
	})

	t.Run("new instructions, recorded: the changed request is unrecorded", func(t *testing.T) {
		res := doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-triage@2", "llm": "recorded"})
		if res.Outcome != "failed" || ms.Count() != modelled {
			t.Errorf("replay %s (%s), %d model requests", res.Outcome, res.ReplayError, ms.Count()-modelled)
		}
		if c := res.replayStep("completion"); c == nil || c.Status != "unrecorded" {
			t.Errorf("replay steps %v, want an unrecorded completion", res.replaySteps())
		}
	})

	t.Run("new instructions, live: the recorded answer reaches the model", func(t *testing.T) {
		before := ms.Count()
		res := doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-triage@2", "llm": "live"})
		if res.Outcome != "answered" || !strings.Contains(string(res.Output), `\"amount\":20`) {
			t.Errorf("replay %s %s (%s)", res.Outcome, res.Output, res.ReplayError)
		}
		if w.payments.Load() != paid {
			t.Errorf("the tool got %d requests, want none", w.payments.Load()-paid)
		}
		reqs := ms.Requests()
		if ms.Count() != before+2 {
			t.Fatalf("%d model requests, want 2", ms.Count()-before)
		}
		if first, next := reqs[len(reqs)-2], reqs[len(reqs)-1]; !strings.HasPrefix(first.Messages[0].Content, "Be brief.") ||
			next.Last().Role != "tool" || !strings.Contains(next.Last().Content, `"amount":20`) {
			t.Errorf("the model was asked %q, then given %+v; want the recorded answer", first.Messages[0].Content, next.Last())
		}
		if res.Delta.ToolCallsChanged != 0 {
			t.Errorf("delta %+v: the same call was made", res.Delta)
		}
		if res.Usage.Replay.Completions != 2 || len(res.Completions) != 2 || res.Completions[1].Request == nil {
			t.Errorf("usage %+v, %d completions kept", res.Usage, len(res.Completions))
		}
	})

	t.Run("a read never recorded", func(t *testing.T) {
		res := doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-triage@3", "llm": "live"})
		call := res.replayStep("call")
		if call == nil || call.Status != "unrecorded" || w.payments.Load() != paid {
			t.Fatalf("skip: call %+v, %d tool requests", call, w.payments.Load()-paid)
		}
		if last := ms.Requests()[len(ms.Requests())-1].Last(); !strings.Contains(last.Content, "unrecorded") {
			t.Errorf("the agent was given %q, want an unrecorded error", last.Content)
		}
		if res.Delta.ToolCallsChanged != 1 {
			t.Errorf("delta %+v", res.Delta)
		}
		res = doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-triage@3", "llm": "live", "unrecorded_calls": "read"})
		call = res.replayStep("call")
		if call == nil || call.Status != "ok" || w.payments.Load() != paid+1 || !strings.Contains(string(call.Result), `"amount":7`) {
			t.Errorf("read: call %+v, %d tool requests, want it made once", call, w.payments.Load()-paid)
		}
	})

	t.Run("a write never recorded is never sent", func(t *testing.T) {
		cases := w.cases.Load()
		res := doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-triage@4", "llm": "live", "unrecorded_calls": "read"})
		call := res.replayStep("call")
		if call == nil || call.Status != "unrecorded" || call.Tool != "cases" || w.cases.Load() != cases {
			t.Errorf("call %+v, %d case requests", call, w.cases.Load()-cases)
		}
		if last := ms.Requests()[len(ms.Requests())-1].Last(); !strings.Contains(last.Content, "never sends a write") {
			t.Errorf("the agent was given %q", last.Content)
		}
	})

	t.Run("real replay", func(t *testing.T) {
		before := w.payments.Load()
		res := doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-triage@2", "dry_run": false})
		if res.Outcome != "answered" || w.payments.Load() != before+1 {
			t.Errorf("real replay %s (%s), %d tool requests", res.Outcome, res.ReplayError, w.payments.Load()-before)
		}
		if rp := agents.last(); rp["of"] != wf.ID || rp["dry_run"] != false {
			t.Errorf("run.replay %v", rp)
		}
	})
}

// newExternalReplayWorld is the fraud world with the replay tests' scripted
// model and ext-triage@1, the Go recipe's agent, deployed against it.
func newExternalReplayWorld(t *testing.T) (*harness, *fraudWorld, *llmtest.Server) {
	t.Helper()
	ms := llmtest.NewOpenAIServer(t, replayScript)
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	agents := &replayAgent{}
	deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": agents.serve(t, func(g string) string { return g }),
		"tools": []string{"payments", "cases"}, "models": []string{"gpt"}})
	return h, w, ms
}

// TestExternalDryReplayCompletionsInAnotherOrder: an agent that asks the
// model twice at once may ask in another order in a replay; with llm
// recorded each request still gets the recorded answer to its identical
// request, and nothing changed.
func TestExternalDryReplayCompletionsInAnotherOrder(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer { return llmtest.Text("on " + r.Last().Content) })
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	bodies := map[string]string{"a": `{"model":"gpt","messages":[{"role":"user","content":"tx-1"}]}`,
		"b": `{"model":"gpt","messages":[{"role":"user","content":"tx-2"}]}`}
	answers := make(chan []string, 4)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in struct {
			goagent.Invocation
			Run struct {
				Replay map[string]any `json:"replay"`
			} `json:"run"`
		}
		json.NewDecoder(r.Body).Decode(&in)
		order := []string{"a", "b"}
		if in.Run.Replay != nil {
			order = []string{"b", "a"}
		}
		var got []string
		for _, name := range order {
			a := postGateway(r.Context(), in.Invocation, "/chat/completions", bodies[name])
			var answer struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			text := fmt.Sprint(a.status)
			if json.Unmarshal([]byte(a.body), &answer) == nil && len(answer.Choices) > 0 {
				text += " " + answer.Choices[0].Message.Content
			}
			got = append(got, name+": "+text)
		}
		answers <- got
		fmt.Fprint(rw, `{"output": {"ok": true}}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-twice", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-twice/invoke", w.admin, map[string]any{"goal": "compare"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if got := strings.Join(<-answers, ", "); got != "a: 200 on tx-1, b: 200 on tx-2" {
		t.Fatalf("the run's answers: %s", got)
	}
	modelled := ms.Count()
	res := doExtReplay(t, h, h.token("acme", replayScopes), wf.ID, map[string]any{"target_agent_version": "ext-twice@1"})
	if got := strings.Join(<-answers, ", "); got != "b: 200 on tx-2, a: 200 on tx-1" {
		t.Errorf("the replay's answers: %s, want each request's recorded answer", got)
	}
	if res.Outcome != "answered" || res.Delta != (replay.Delta{}) || ms.Count() != modelled {
		t.Errorf("replay %s (%s), delta %+v, steps %v, the model asked %d times: want answered, nothing changed or asked",
			res.Outcome, res.ReplayError, res.Delta, res.replaySteps(), ms.Count()-modelled)
	}
}

// TestExternalDefinedReplays replays across kinds: a defined agent's
// workflow against an external version, and an external agent's workflow
// against a defined version, each served from the other's record.
func TestExternalDefinedReplays(t *testing.T) {
	t.Parallel()
	h, w, _ := newExternalReplayWorld(t)
	ctx := map[string]any{"transaction_id": "tx-1"}
	var defined, external externalWorkflow
	h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "How much is tx-1?", "context": ctx}).json(t, &defined)
	h.do("POST", "/v1/agents/ext-triage/invoke", w.admin, map[string]any{"goal": "How much is tx-1?", "context": ctx}).json(t, &external)
	if defined.Outcome != "cleared" || external.Outcome != "answered" {
		t.Fatalf("originals: %s, %s", defined.Outcome, external.Outcome)
	}
	paid := w.payments.Load()
	replayer := h.token("acme", replayScopes)

	res := doExtReplay(t, h, replayer, defined.ID, map[string]any{"target_agent_version": "ext-triage@1", "llm": "live"})
	if res.Outcome != "answered" || !strings.Contains(string(res.Output), `\"amount\":20`) {
		t.Errorf("defined→external: %s %s (%s)", res.Outcome, res.Output, res.ReplayError)
	}
	if call := res.replayStep("call"); call == nil || call.Status != "ok" {
		t.Errorf("defined→external: the recorded call was not served: %v", res.replaySteps())
	}
	if res.Delta.StepsAdded == 0 || res.Delta.StepsRemoved == 0 {
		t.Errorf("defined→external delta %+v", res.Delta)
	}

	res = doExtReplay(t, h, replayer, external.ID, map[string]any{"target_agent_version": "fraud-triage@1"})
	if res.Outcome != "cleared" || res.OriginalTarget != "ext-triage@1" {
		t.Errorf("external→defined: %s (%s)", res.Outcome, res.ReplayError)
	}
	if call := res.replayStep("call"); call == nil || call.Status != "ok" || !strings.Contains(string(call.Result), `"amount":20`) {
		t.Errorf("external→defined: call %+v", call)
	}
	if res.Delta.StepsAdded == 0 || res.Delta.StepsRemoved == 0 {
		t.Errorf("external→defined delta %+v", res.Delta)
	}
	if w.payments.Load() != paid {
		t.Errorf("the tool got %d requests, want none", w.payments.Load()-paid)
	}
}

// TestExternalReplayBatch replays workflows of an external agent against
// a version with new instructions, the model live: no tool request, every
// call the same, the gate passed, and no more invocations of the agent at
// once than its max_concurrency.
func TestExternalReplayBatch(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, replayScript)
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	agents := &replayAgent{}
	deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": agents.serve(t, func(g string) string { return g }),
		"tools": []string{"payments"}, "models": []string{"gpt"}})
	const n = 12
	for i := range n {
		if r := h.do("POST", "/v1/agents/ext-triage/invoke", w.admin, map[string]any{"goal": fmt.Sprintf("How much is tx-1? (%d)", i)}); r.Status != 200 {
			t.Fatalf("invoke: %d %s", r.Status, r.Body)
		}
	}
	deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": agents.serve(t, func(g string) string { return "Be brief. " + g }),
		"tools": []string{"payments"}, "models": []string{"gpt"}, "max_concurrency": 2})
	paid, modelled := w.payments.Load(), ms.Count()
	agents.peak.Store(0)
	tok := h.token("acme", replayScopes)
	r := h.do("POST", "/v1/replay-batches", tok, map[string]any{
		"target_agent_version": "ext-triage@2", "workflows": map[string]any{"agent": "ext-triage", "limit": n},
		"llm": "live", "concurrency": 8,
		"checks": []map[string]any{{"name": "same_tool_calls"}, {"name": "outcome_unchanged"}},
		"gate":   map[string]float64{"same_tool_calls": 1},
	})
	if r.Status != http.StatusAccepted {
		t.Fatalf("create batch: %d %s", r.Status, r.Body)
	}
	var created checkedBatch
	r.json(t, &created)
	b := getCheckedBatch(t, h, tok, created.ID)
	if b.Status != "completed" || b.Done != n || b.Verdict != "passed" {
		t.Fatalf("batch %+v", b)
	}
	for _, c := range b.Checks {
		if c.Passed != n {
			t.Errorf("check %s: %d of %d passed", c.Name, c.Passed, n)
		}
	}
	if w.payments.Load() != paid || ms.Count() != modelled+2*n {
		t.Errorf("%d tool requests (want none), %d model requests (want %d)", w.payments.Load()-paid, ms.Count()-modelled, 2*n)
	}
	if p := agents.peak.Load(); p > 2 || p == 0 {
		t.Errorf("at most %d invocations at once, want 1 or 2 (max_concurrency)", p)
	}
}

// TestExternalDryReplayOfAMaskedRun: with redaction on, the original's
// record keeps the model's and the tool's answers masked, and a dry run
// serves them so; the agent's next request, built from them, is still
// identical to the recorded one (both compared masked, as a definition's
// completions are), so it gets the recorded answer, not unrecorded.
func TestExternalDryReplayOfAMaskedRun(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		if last := r.Last(); last.Role == "tool" {
			return llmtest.Text("done: " + last.Content)
		}
		return llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"jane.doe@example.com"}`))
	})
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) {
		o.Redact = &redact.Service{Keys: o.Store.(redact.KeyStore), Detect: []string{redact.Email}}
	}), withExternalReplays())
	w := newFraudWorld(t, h)
	agents := &replayAgent{}
	deployExternal(t, h, w.admin, "ext-masked", map[string]any{"url": agents.serve(t, func(g string) string { return g }),
		"tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-masked/invoke", w.admin, map[string]any{"goal": "How much is the transaction?"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "answered" || !strings.Contains(string(wf.Output), "[redacted:email:") {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	paid, modelled := w.payments.Load(), ms.Count()
	res := doExtReplay(t, h, h.token("acme", replayScopes), wf.ID, map[string]any{"target_agent_version": "ext-masked@1"})
	if got := strings.Join(res.replaySteps(), " "); got != "completion:ok call:ok completion:ok attempt:ok" {
		t.Errorf("replay steps %s (%s)", got, res.ReplayError)
	}
	if res.Outcome != "answered" || string(res.Output) != string(wf.Output) || res.Delta != (replay.Delta{}) {
		t.Errorf("replay %s %s, delta %+v; want answered %s and no delta", res.Outcome, res.Output, res.Delta, wf.Output)
	}
	if w.payments.Load() != paid || ms.Count() != modelled {
		t.Errorf("tool %d→%d, model %d→%d requests: a dry run with recorded completions sends nothing", paid, w.payments.Load(), modelled, ms.Count())
	}
}

// TestExternalDryReplayOfAStream: a streamed chat completion whose agent
// did not ask for its usage is recorded with the tokens the gateway asked
// for; a dry run serving it with llm recorded counts them too (its step,
// max_llm_tokens), as the original did.
func TestExternalDryReplayOfAStream(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("streamed words")))
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	deployExternal(t, h, w.admin, "ext-stream", map[string]any{"url": streamingAgent(t, nil), "tools": []string{"payments"}, "models": []string{"gpt"}})
	var wf externalWorkflow
	if r := h.do("POST", "/v1/agents/ext-stream/invoke", w.admin, map[string]any{"goal": "say something"}); r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &wf)
	}
	orig := externalRunOf(t, h, w.admin, wf.ID).Steps[0]
	if orig.InputTokens == 0 {
		t.Fatalf("original completion step %+v", orig)
	}
	res := doExtReplay(t, h, h.token("acme", replayScopes), wf.ID, map[string]any{"target_agent_version": "ext-stream@1"})
	s := res.replayStep("completion")
	if res.Outcome != "answered" || s == nil || s.InputTokens != orig.InputTokens || s.OutputTokens != orig.OutputTokens {
		t.Errorf("replay %s (%s), completion step %+v; want the original's tokens %d+%d", res.Outcome, res.ReplayError, s, orig.InputTokens, orig.OutputTokens)
	}
}
