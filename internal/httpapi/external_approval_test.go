package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
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
