package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestExternalInvokeIdempotency: invokes of an external version with one
// Idempotency-Key invoke the agent once, whichever front door's repeat
// comes first: two at the same time (async; the store is slow to create
// the workflow, so neither finds the other's), then a sync repeat, all
// answer the one workflow; another body under the key is refused. The
// agent is a program of its own whose work the gateway does not see: the
// invocation that loses the race for the key must not reach it.
func TestExternalInvokeIdempotency(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) {
		o.Store = slowCreation{Store: o.Store, delay: 300 * time.Millisecond}
	}))
	w := newFraudWorld(t, h)
	var mu sync.Mutex
	var runs []string
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		mu.Lock()
		runs = append(runs, in.Run.ID)
		mu.Unlock()
		fmt.Fprint(rw, `{"output": {"ok": true}}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-once", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	body := map[string]any{"goal": "once"}

	var wg sync.WaitGroup
	answers := make([]response, 2)
	for i := range answers {
		wg.Go(func() {
			answers[i] = h.do("POST", "/v1/agents/ext-once/invoke", w.admin, body, "Idempotency-Key", "k-1", "Prefer", "respond-async")
		})
	}
	wg.Wait()
	ids := map[string]bool{}
	for i, r := range answers {
		var wf externalWorkflow
		r.json(t, &wf)
		if r.Status != 202 {
			t.Fatalf("async invoke %d: %d %s", i, r.Status, r.Body)
		}
		ids[wf.ID] = true
	}
	if len(ids) != 1 {
		t.Fatalf("the two invokes answered workflows %v, want one", ids)
	}
	r := h.do("POST", "/v1/agents/ext-once/invoke", w.admin, body, "Idempotency-Key", "k-1")
	var repeat externalWorkflow
	r.json(t, &repeat)
	if r.Status != 200 || !ids[repeat.ID] || repeat.Status != "completed" || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("sync repeat: %d %s %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	mu.Lock()
	got := append([]string(nil), runs...)
	mu.Unlock()
	if len(got) != 1 || !ids[got[0]] {
		t.Errorf("the agent was invoked for runs %v, want once, for %v", got, ids)
	}

	r = h.do("POST", "/v1/agents/ext-once/invoke", w.admin, map[string]any{"goal": "another"}, "Idempotency-Key", "k-1")
	if r.Status != 422 || r.problem(t).Code != problem.IdempotencyKeyReused {
		t.Errorf("another body under the key: %d %s", r.Status, r.Body)
	}
}
