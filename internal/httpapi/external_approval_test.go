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
	approvals := []map[string]any{{"when": "operation == 'createCase' && args.amount > 500.0",
		"reason": "'Open a case for ' + string(args.amount)", "approver_scope": "approve:cases"}}
	approver := func(h *harness) string { return h.tokenFor("bob", "workflows:approve workflows:read approve:cases") }

	t.Run("in time", func(t *testing.T) {
		t.Parallel()
		ms := llmtest.NewOpenAIServer(t, script)
		h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) { o.External.ApprovalHold = 10 * time.Second }))
		w := newFraudWorld(t, h)
		agentSrv := httptest.NewServer(goagent.Handler("gpt", 5))
		t.Cleanup(agentSrv.Close)
		deployExternal(t, h, w.admin, "ext-approve", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvals})
		r := h.do("POST", "/v1/agents/ext-approve/invoke", w.admin, map[string]any{"goal": "open a case"}, "Prefer", "respond-async")
		var wf externalWorkflow
		r.json(t, &wf)
		a := pendingApproval(t, h, approver(h))
		if a.WorkflowID != wf.ID || a.Reason != "Open a case for 900" {
			t.Fatalf("pending: %+v", a)
		}
		if w.cases.Load() != 0 {
			t.Fatal("the call went out before its approval")
		}
		if r := h.do("POST", "/v1/workflows/"+wf.ID+"/approvals/"+strconv.Itoa(a.Step), approver(h), map[string]any{"decision": "approve"}); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		done := waitStatus(t, h, w.admin, wf.ID, "completed")
		if got, want := stepList(done), "1:completion:ok 1:approve:waiting_approval 1:approve:approved 1:call:ok 1:completion:ok 1:attempt:ok"; got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		if w.cases.Load() != 1 || ms.Count() != 2 {
			t.Errorf("cases %d, model requests %d", w.cases.Load(), ms.Count())
		}
	})

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		ms := llmtest.NewOpenAIServer(t, script)
		h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) { o.External.ApprovalHold = 10 * time.Second }))
		w := newFraudWorld(t, h)
		agentSrv := httptest.NewServer(goagent.Handler("gpt", 5))
		t.Cleanup(agentSrv.Close)
		deployExternal(t, h, w.admin, "ext-deny", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvals})
		r := h.do("POST", "/v1/agents/ext-deny/invoke", w.admin, map[string]any{"goal": "open a case"}, "Prefer", "respond-async")
		var wf externalWorkflow
		r.json(t, &wf)
		a := pendingApproval(t, h, approver(h))
		if r := h.do("POST", "/v1/workflows/"+wf.ID+"/approvals/"+strconv.Itoa(a.Step), approver(h), map[string]any{"decision": "deny"}); r.Status != 200 {
			t.Fatalf("deny: %d %s", r.Status, r.Body)
		}
		done := waitStatus(t, h, w.admin, wf.ID, "completed")
		if got, want := stepList(done), "1:completion:ok 1:approve:waiting_approval 1:approve:denied 1:completion:ok 1:attempt:ok"; got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		if w.cases.Load() != 0 {
			t.Errorf("a denied call reached the tool %d times", w.cases.Load())
		}
		// The model was told: the denial is the tool result it read.
		if reqs := ms.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Last().Content, "was denied by bob") {
			t.Errorf("the model's second request: %+v", reqs)
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
		deployExternal(t, h, w.admin, "ext-later", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvals})
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
	approvals := []map[string]any{{"when": "operation == 'createCase' && args.amount > 500.0",
		"reason": "'Open a case for ' + string(args.amount)", "approver_scope": "approve:cases"}}
	held := map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}, "approvals": approvals}
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
