package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/workflow"
)

// testClock is a clock a test moves on.
type testClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// waitStatus polls the workflow until its status is status.
func waitStatus(t *testing.T, h *harness, token, id, status string) externalWorkflow {
	t.Helper()
	for range 400 {
		wf := externalRunOf(t, h, token, id)
		if wf.Status == status {
			return wf
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("workflow %s never became %s: %s", id, status, stepList(externalRunOf(t, h, token, id)))
	return externalWorkflow{}
}

// approvalRules hold createCase over 500 for a person with approve:cases.
var approvalRules = []map[string]any{{"when": "operation == 'createCase' && args.amount > 500.0",
	"reason": "'Open a case for ' + string(args.amount)", "approver_scope": "approve:cases"}}

// heldRun is a run of the Go recipe's agent deployed with approvalRules,
// the model following a script, and the gateway holding a call up to 10 s.
type heldRun struct {
	h  *harness
	w  *fraudWorld
	ms *llmtest.Server
	id string
}

// startHeldRun deploys the agent as name and invokes it asynchronously.
func startHeldRun(t *testing.T, name string, script llmtest.Script) *heldRun {
	t.Helper()
	ms := llmtest.NewOpenAIServer(t, script)
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) { o.External.ApprovalHold = 10 * time.Second }))
	w := newFraudWorld(t, h)
	agentSrv := httptest.NewServer(goagent.Handler("gpt", 5))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, name, map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvalRules})
	var wf externalWorkflow
	h.do("POST", "/v1/agents/"+name+"/invoke", w.admin, map[string]any{"goal": "open a case"}, "Prefer", "respond-async").json(t, &wf)
	return &heldRun{h: h, w: w, ms: ms, id: wf.ID}
}

// approver is a token of a person who may decide the rules' approvals.
func (r *heldRun) approver() string {
	return r.h.tokenFor("bob", "workflows:approve workflows:read approve:cases")
}

// decide waits for the run's pending approval and decides it, returning it.
func (r *heldRun) decide(t *testing.T, decision string) approvalJSON {
	t.Helper()
	a := pendingApproval(t, r.h, r.approver())
	if resp := r.h.do("POST", "/v1/workflows/"+r.id+"/approvals/"+strconv.Itoa(a.Step), r.approver(), map[string]any{"decision": decision}); resp.Status != 200 {
		t.Fatalf("%s: %d %s", decision, resp.Status, resp.Body)
	}
	return a
}

// steps waits for the run to complete and lists its steps.
func (r *heldRun) steps(t *testing.T) string {
	t.Helper()
	return stepList(waitStatus(t, r.h, r.w.admin, r.id, "completed"))
}

// TestExternalApprovals: a call that matches an approvals rule waits for a
// person. Decided while the gateway holds it, the call goes on in the same
// attempt. Decided an hour later, the attempt was set aside, and the new
// attempt replays the journal to the call, which the decision lets through
// once.
func TestExternalApprovals(t *testing.T) {
	t.Parallel()
	script := llmtest.Sequence(
		llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud","amount":900}`)),
		llmtest.Text("case opened"),
	)
	approver := func(h *harness) string { return h.tokenFor("bob", "workflows:approve workflows:read approve:cases") }

	t.Run("in time", func(t *testing.T) {
		t.Parallel()
		r := startHeldRun(t, "ext-approve", script)
		a := pendingApproval(t, r.h, r.approver())
		if a.WorkflowID != r.id || a.Reason != "Open a case for 900" {
			t.Fatalf("pending: %+v", a)
		}
		if r.w.cases.Load() != 0 {
			t.Fatal("the call went out before its approval")
		}
		r.decide(t, "approve")
		if got, want := r.steps(t), "1:completion:ok 1:approve:waiting_approval 1:approve:approved 1:call:ok 1:completion:ok 1:attempt:ok"; got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		if r.w.cases.Load() != 1 || r.ms.Count() != 2 {
			t.Errorf("cases %d, model requests %d", r.w.cases.Load(), r.ms.Count())
		}
	})

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		r := startHeldRun(t, "ext-deny", script)
		r.decide(t, "deny")
		if got, want := r.steps(t), "1:completion:ok 1:approve:waiting_approval 1:approve:denied 1:completion:ok 1:attempt:ok"; got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		if r.w.cases.Load() != 0 {
			t.Errorf("a denied call reached the tool %d times", r.w.cases.Load())
		}
		// The model was told: the denial is the tool result it read.
		if reqs := r.ms.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Last().Content, "was denied by bob") {
			t.Errorf("the model's second request: %+v", reqs)
		}
	})

	// The same call made twice in a run is two calls, and each needs its
	// own decision: the first one's approval does not let the second
	// through.
	t.Run("the same call twice", func(t *testing.T) {
		t.Parallel()
		call := llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud","amount":900}`))
		r := startHeldRun(t, "ext-twice", llmtest.Sequence(call, call, llmtest.Text("two cases opened")))
		for n := range 2 {
			pendingApproval(t, r.h, r.approver())
			if got := r.w.cases.Load(); got != int32(n) {
				t.Fatalf("%d calls reached the tool before the approval of call %d", got, n+1)
			}
			r.decide(t, "approve")
		}
		want := "1:completion:ok 1:approve:waiting_approval 1:approve:approved 1:call:ok 1:completion:ok " +
			"1:approve:waiting_approval 1:approve:approved 1:call:ok 1:completion:ok 1:attempt:ok"
		if got := r.steps(t); got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		if r.w.cases.Load() != 2 {
			t.Errorf("cases %d, want 2", r.w.cases.Load())
		}
	})

	// A call the tool answered with an error did not use its approval: the
	// agent's repeat of it goes through without asking again.
	t.Run("the same call again after it failed", func(t *testing.T) {
		t.Parallel()
		call := llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"busy","amount":900}`))
		r := startHeldRun(t, "ext-retry", llmtest.Sequence(call, call, llmtest.Text("case opened")))
		r.decide(t, "approve")
		want := "1:completion:ok 1:approve:waiting_approval 1:approve:approved 1:call:error 1:completion:ok 1:approve:approved 1:call:ok 1:completion:ok 1:attempt:ok"
		if got := r.steps(t); got != want || r.w.cases.Load() != 2 {
			t.Errorf("steps %s, cases %d; want %s and 2 cases (the first refused busy)", got, r.w.cases.Load(), want)
		}
	})

	// Across resumed attempts too: each of three identical calls, decided
	// after its hold, waits for a decision of its own.
	t.Run("the same call three times, each decided later", func(t *testing.T) {
		t.Parallel()
		call := llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud","amount":900}`))
		ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
			if strings.Count(string(r.Body), `"role":"tool"`) < 3 {
				return call
			}
			return llmtest.Text("three cases opened")
		})
		clock := &testClock{}
		h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) {
			o.External.ApprovalHold = 50 * time.Millisecond
			o.Now = clock.now
		}))
		w := newFraudWorld(t, h)
		answered := make(chan struct{}, 4)
		agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			goagent.Handler("gpt", 8).ServeHTTP(rw, r)
			answered <- struct{}{}
		}))
		t.Cleanup(agentSrv.Close)
		deployExternal(t, h, w.admin, "ext-thrice", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvalRules})
		r := h.do("POST", "/v1/agents/ext-thrice/invoke", w.admin, map[string]any{"goal": "open three cases"}, "Prefer", "respond-async")
		var wf externalWorkflow
		r.json(t, &wf)
		for n := range 3 {
			a := pendingApproval(t, h, approver(h))
			<-answered // the set-aside attempt is over
			if got := w.cases.Load(); got != int32(n) {
				t.Fatalf("%d calls reached the tool before the approval of call %d", got, n+1)
			}
			clock.advance(time.Hour)
			if r := h.do("POST", "/v1/workflows/"+wf.ID+"/approvals/"+strconv.Itoa(a.Step), approver(h), map[string]any{"decision": "approve"}); r.Status != 200 {
				t.Fatalf("approve call %d: %d %s", n+1, r.Status, r.Body)
			}
		}
		done := waitStatus(t, h, w.admin, wf.ID, "completed")
		if w.cases.Load() != 3 || !strings.HasSuffix(stepList(done), "4:call:ok 4:completion:ok 4:attempt:ok") {
			t.Errorf("cases %d, steps %s: want 3 cases, the third made by attempt 4", w.cases.Load(), stepList(done))
		}
	})

	t.Run("an hour later", func(t *testing.T) {
		t.Parallel()
		ms := llmtest.NewOpenAIServer(t, script)
		clock := &testClock{}
		h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) {
			o.External.ApprovalHold = 50 * time.Millisecond
			o.Now = clock.now
		}))
		w := newFraudWorld(t, h)
		answered := make(chan struct{}, 2)
		agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			goagent.Handler("gpt", 5).ServeHTTP(rw, r)
			answered <- struct{}{}
		}))
		t.Cleanup(agentSrv.Close)
		deployExternal(t, h, w.admin, "ext-later", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvalRules})
		r := h.do("POST", "/v1/agents/ext-later/invoke", w.admin, map[string]any{"goal": "open a case"})
		var wf externalWorkflow
		r.json(t, &wf)
		if r.Status != 200 || wf.Status != "waiting" {
			t.Fatalf("invoke: %d %s", r.Status, r.Body)
		}
		a := pendingApproval(t, h, approver(h))
		<-answered // the set-aside attempt is over: the agent holds nothing
		clock.advance(time.Hour)
		if r := h.do("POST", "/v1/workflows/"+wf.ID+"/approvals/"+strconv.Itoa(a.Step), approver(h), map[string]any{"decision": "approve"}); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		done := waitStatus(t, h, w.admin, wf.ID, "completed")
		want := "1:completion:ok 1:approve:waiting_approval 1:attempt:set_aside 2:approve:approved 2:call:ok 2:completion:ok 2:attempt:ok"
		if got := stepList(done); got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		if w.cases.Load() != 1 {
			t.Errorf("cases %d, want 1", w.cases.Load())
		}
	})
}

// TestExternalDryReplayApprovals: a dry run of an external version asks
// nobody. A call its approvals rules hold gets the decision the original
// recorded for the identical call: approved, the recorded answer is
// served; denied, the call is refused with the words the agent read then,
// so the conversation goes on from the record. A call whose original was
// never held (the rule is new in the target) has an unrecorded approval
// step and goes on as though approved, which the delta shows as added
// steps. No approval is left pending and the cases API receives nothing.
func TestExternalDryReplayApprovals(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		if last := r.Last(); last.Role == "tool" {
			return llmtest.Text("case: " + last.Content)
		}
		return llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud","amount":900}`))
	})
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) { o.External.ApprovalHold = 10 * time.Second }), withExternalReplays())
	w := newFraudWorld(t, h)
	agentSrv := httptest.NewServer(goagent.Handler("gpt", 5))
	t.Cleanup(agentSrv.Close)
	held := map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvalRules}
	plain := map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}}
	deployExternal(t, h, w.admin, "ext-held", held) // @1
	deployExternal(t, h, w.admin, "ext-held", held) // @2, the replays' target
	deployExternal(t, h, w.admin, "ext-free", plain)
	deployExternal(t, h, w.admin, "ext-free", held)
	approver := h.tokenFor("bob", "workflows:approve workflows:read approve:cases")
	replayer := h.token("acme", replayScopes)

	// decided runs ext-held@1 to its end with the decision given.
	decided := func(decision string) string {
		var wf externalWorkflow
		h.do("POST", "/v1/agents/ext-held@1/invoke", w.admin, map[string]any{"goal": "open a case"}, "Prefer", "respond-async").json(t, &wf)
		a := pendingApproval(t, h, approver)
		if r := h.do("POST", "/v1/workflows/"+wf.ID+"/approvals/"+strconv.Itoa(a.Step), approver, map[string]any{"decision": decision}); r.Status != 200 {
			t.Fatalf("%s: %d %s", decision, r.Status, r.Body)
		}
		waitStatus(t, h, w.admin, wf.ID, "completed")
		return wf.ID
	}
	approved, denied := decided("approve"), decided("deny")
	var free externalWorkflow
	h.do("POST", "/v1/agents/ext-free@1/invoke", w.admin, map[string]any{"goal": "open a case"}).json(t, &free)
	if free.Status != "completed" {
		t.Fatalf("ext-free@1: %+v", free)
	}
	cases, model := w.cases.Load(), ms.Count()
	if cases != 2 {
		t.Fatalf("the cases API received %d requests, want 2: the approved call and ext-free's", cases)
	}

	for _, tc := range []struct {
		name, wf, target string
		steps            string
		delta            replay.Delta
		answer           string
	}{
		{"approved", approved, "ext-held@2", "completion:ok approve:waiting_approval approve:approved call:ok completion:ok attempt:ok",
			replay.Delta{}, "case: {"},
		{"denied", denied, "ext-held@2", "completion:ok approve:waiting_approval approve:denied completion:ok attempt:ok",
			replay.Delta{}, "case: cases.createCase was denied by bob"},
		// The two approval steps name the call: added, they count as
		// calls changed.
		{"no recorded decision", free.ID, "ext-free@2", "completion:ok approve:waiting_approval approve:unrecorded call:ok completion:ok attempt:ok",
			replay.Delta{StepsAdded: 2, ToolCallsChanged: 2}, "case: {"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := doExtReplay(t, h, replayer, tc.wf, map[string]any{"target_agent_version": tc.target, "llm": "recorded"})
			if got := strings.Join(rp.replaySteps(), " "); got != tc.steps {
				t.Errorf("replay steps %s, want %s", got, tc.steps)
			}
			if rp.Delta != tc.delta {
				t.Errorf("delta %+v, want %+v", rp.Delta, tc.delta)
			}
			var out struct{ Answer string }
			if json.Unmarshal(rp.Output, &out) != nil || rp.Outcome != "answered" || !strings.HasPrefix(out.Answer, tc.answer) {
				t.Errorf("replay %s %s (%s), want an answer starting %q", rp.Outcome, rp.Output, rp.ReplayError, tc.answer)
			}
			if a := rp.replayStep("approve"); a == nil || a.Tool != "cases" || a.Operation != "createCase" {
				t.Errorf("the approval step names no call: %+v", a)
			}
		})
	}
	if r := h.do("GET", "/v1/approvals?status=pending", approver, nil); r.Status != 200 || strings.Contains(string(r.Body), "wf_") {
		t.Errorf("pending approvals after the dry runs: %d %s", r.Status, r.Body)
	}
	if w.cases.Load() != cases || ms.Count() != model {
		t.Errorf("during the dry runs the cases API received %d requests and the model %d, want none", w.cases.Load()-cases, ms.Count()-model)
	}
}
