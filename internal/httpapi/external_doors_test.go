package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/httpapi"
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
	h, w := slowCreationWorld(t)
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

// lookupScript has the agent look tx-1 up, then answer with what the call
// answered.
func lookupScript(r llmtest.Request) llmtest.Answer {
	if last := r.Last(); last.Role == "tool" {
		return llmtest.Text("done: " + last.Content)
	}
	return llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-1"}`))
}

// withScheduledExternal has the schedules start their workflows with the
// server's runner, which withExternal (given before it) replaced.
func withScheduledExternal() option {
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		d.Schedules.Scheduler.Invoker = &workflow.Invoker{Runner: d.Runner, Workflows: d.Workflows, Now: time.Now}
	}
}

// TestExternalFrontDoorsCarryTheInvokersScopes: an external agent invoked
// through A2A, MCP and a schedule runs with its invoker's scopes (the
// schedule's creator's): a caller without tool:payments has the agent's
// call refused, an isError result the agent reads, while a caller with it
// has the call made.
func TestExternalFrontDoorsCarryTheInvokersScopes(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, lookupScript)
	h := newHarness(t, withExternal(t, ms), withScheduledExternal())
	w := newFraudWorld(t, h)
	agentSrv := httptest.NewServer(goagent.Handler("gpt", 5))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-doors", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	narrow := h.token("acme", "agents:invoke mcp:use workflows:read schedules:write")
	wide := h.token("acme", "agents:invoke mcp:use workflows:read schedules:write tool:payments")

	doors := map[string]func(t *testing.T, token string) string{
		"a2a": func(t *testing.T, token string) string {
			rep := h.rpc(t, "ext-doors", token, "SendMessage", map[string]any{"message": a2aMessage(fmt.Sprint("m-", time.Now().UnixNano()), "look tx-1 up", nil)})
			var sent struct {
				Task a2aTaskJSON `json:"task"`
			}
			json.Unmarshal(rep.Result, &sent)
			if sent.Task.Status.State != "TASK_STATE_COMPLETED" {
				t.Fatalf("SendMessage: %s %+v", rep.Result, rep.Error)
			}
			return sent.Task.ID
		},
		"mcp": func(t *testing.T, token string) string {
			var wf externalWorkflow
			res := callTool(t, mcpSession(t, h, token), "agent_ext-doors", map[string]any{"goal": "look tx-1 up"}, &wf)
			if res.IsError || wf.Status != "completed" {
				t.Fatalf("agent_ext-doors: %s", resultText(res))
			}
			return wf.ID
		},
		"schedule": func(t *testing.T, token string) string {
			r := h.do("POST", "/v1/schedules", token, map[string]any{"agent": "ext-doors", "cron": "@daily", "goal": "look tx-1 up", "paused": true})
			var sch struct {
				ID string `json:"id"`
			}
			r.json(t, &sch)
			r = h.do("POST", "/v1/schedules/"+sch.ID+"/trigger", token, nil)
			var wf externalWorkflow
			r.json(t, &wf)
			if r.Status != 202 {
				t.Fatalf("trigger: %d %s", r.Status, r.Body)
			}
			return waitStatus(t, h, token, wf.ID, "completed").ID
		},
	}
	for name, door := range doors {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				token, status, says string
			}{
				{narrow, "denied", "denied: "},
				{wide, "ok", `\"amount\":20`},
			} {
				wf := externalRunOf(t, h, tc.token, door(t, tc.token))
				if len(wf.Steps) < 2 || wf.Steps[1].Kind != "call" || wf.Steps[1].Status != tc.status ||
					!strings.Contains(string(wf.Output), tc.says) {
					t.Errorf("want the call %s: %s output %s", tc.status, stepList(wf), wf.Output)
				}
			}
		})
	}
}

// TestExternalRunFollowedLive: a follower of an external run sees its
// gateway exchange as a step while the agent still runs, then the rest;
// one reconnecting with Last-Event-ID gets what follows it, without a gap
// or a repeat; a streamed invoke's repeat sends the same events.
func TestExternalRunFollowedLive(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	proceed := make(chan struct{})
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		postGateway(r.Context(), in, "/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`)
		<-proceed
		fmt.Fprint(rw, `{"output": {"ok": true}}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-live", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-live/invoke", w.admin, map[string]any{"goal": "go"}, "Prefer", "respond-async", "Idempotency-Key", "live-1")
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 202 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	es := openEventStream(ctx, t, h, "/v1/workflows/"+wf.ID+"/events", w.admin)
	if first := es.next(t); !strings.Contains(first, `"action":"completion"`) {
		t.Fatalf("first event %s, want the completion's step while the agent runs", first)
	}
	close(proceed)
	var rest []string
	for ev := es.next(t); ev != ""; ev = es.next(t) {
		rest = append(rest, ev)
	}
	if len(rest) != 2 || !strings.Contains(rest[0], `"action":"attempt"`) || !strings.Contains(rest[1], `"event":"complete"`) {
		t.Fatalf("events after the completion: %v", rest)
	}

	all := parseSSE(t, "stream", h.do("POST", "/v1/agents/ext-live/invoke", w.admin, map[string]any{"goal": "go"},
		"Prefer", "respond-async", "Idempotency-Key", "live-1", "Accept", "text/event-stream").Body)
	again := parseSSE(t, "resumed", h.do("GET", "/v1/workflows/"+wf.ID+"/events", w.admin, nil,
		"Accept", "text/event-stream", "Last-Event-ID", "1").Body)
	if len(all) != 3 || len(again) != 2 || again[0] != all[1] || again[1] != all[2] {
		t.Errorf("repeat %v, resumed after 1 %v", all, again)
	}
}

// TestExternalCancelThroughA2AAndMCP: A2A's CancelTask and MCP's
// tasks/cancel of an external run reach the agent as POST
// /v1/workflows/{id}/cancel does: its request is cancelled, the task is
// cancelled, and the run's token is refused (401) afterwards.
func TestExternalCancelThroughA2AAndMCP(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	started, cancelled := make(chan string, 1), make(chan struct{}, 1)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		started <- in.Gateway.Token
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-stop", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	tok := h.token("acme", "agents:invoke mcp:use workflows:read")

	doors := []struct {
		name   string
		start  func() string
		cancel func(id string) string // the task's state after the cancel
	}{
		{"a2a", func() string {
			rep := h.rpc(t, "ext-stop", tok, "SendMessage", map[string]any{"message": a2aMessage("stop-1", "wait", nil),
				"configuration": map[string]any{"returnImmediately": true}})
			var sent struct {
				Task a2aTaskJSON `json:"task"`
			}
			json.Unmarshal(rep.Result, &sent)
			return sent.Task.ID
		}, func(id string) string {
			var task a2aTaskJSON
			json.Unmarshal(h.rpc(t, "ext-stop", tok, "CancelTask", map[string]any{"id": id}).Result, &task)
			return task.Status.State
		}},
		{"mcp", func() string {
			a := rpc(t, h, tok, "tools/call", map[string]any{"name": "agent_ext-stop", "arguments": map[string]any{"goal": "wait"}, "_meta": withTasks})
			id, _ := a.Result["taskId"].(string)
			return id
		}, func(id string) string {
			rpc(t, h, tok, "tasks/cancel", map[string]any{"taskId": id, "_meta": withTasks})
			return pollTask(t, h, tok, id, "cancelled")["status"].(string)
		}},
	}
	for _, d := range doors {
		id := d.start()
		token := <-started
		if state := d.cancel(id); state != "TASK_STATE_CANCELED" && state != "cancelled" {
			t.Errorf("%s: the task is %s after the cancel", d.name, state)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the agent's request was not cancelled", d.name)
		}
		r := h.do("POST", "/gateway/openai/v1/chat/completions", token, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`)
		if r.Status != 401 {
			t.Errorf("%s: a gateway request after the cancel: %d %s", d.name, r.Status, r.Body)
		}
	}
}
