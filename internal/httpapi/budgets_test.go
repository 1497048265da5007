package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	openaiopt "github.com/openai/openai-go/v3/option"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Budgets that ask (docs/change-safety.md): a run past its max_llm_tokens
// or max_tool_calls under on_exhausted ask waits at a budget_exhausted
// approval; approving grants more, denying ends it limit_exceeded.

// budgetJSON is a budget approval's budget as the API shows it.
type budgetJSON struct {
	Limit   string `json:"limit"`
	Used    int64  `json:"used"`
	Allowed int64  `json:"allowed"`
	Grant   int64  `json:"grant"`
}

type budgetApprovalJSON struct {
	approvalJSON
	Kind   string      `json:"kind"`
	Budget *budgetJSON `json:"budget"`
}

// waitingBudget waits until the workflow id waits at an approval, and
// returns it as the approvals list shows it.
func waitingBudget(t *testing.T, h *harness, token, id string) budgetApprovalJSON {
	t.Helper()
	for range 400 {
		var page struct {
			Approvals []budgetApprovalJSON `json:"approvals"`
		}
		h.do("GET", "/v1/approvals?status=pending", token, nil).json(t, &page)
		for _, a := range page.Approvals {
			if a.WorkflowID == id {
				return a
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("workflow %s never waited at an approval", id)
	return budgetApprovalJSON{}
}

// spendingScript asks for a transaction with a completion of 4,210 tokens,
// then answers.
func spendingScript() llmtest.Script {
	first := llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-1"}`))
	first.InputTokens, first.OutputTokens = 4000, 210
	return llmtest.Sequence(first, llmtest.Text("tx-1 is 20 USD."))
}

const spenderDef = `{"model": "gpt", "tools": ["payments"],
 "limits": {"max_llm_tokens": 4000, "on_exhausted": "ask"},
 "steps": [{"action": "solve", "plan": {"prompt": "goal", "save_as": "answer"}}],
 "output": "answer", "outcome": "'answered'"}`

// budgetWorld is a fraud world whose server runs LLM agents and external
// ones with the scripted model.
func budgetWorld(t *testing.T, script llmtest.Script, hold time.Duration) (*harness, *fraudWorld, *llmtest.Server) {
	t.Helper()
	ms := llmtest.NewOpenAIServer(t, script)
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) { o.External.ApprovalHold = hold }), withExternalReplays())
	return h, newFraudWorld(t, h), ms
}

func decide(h *harness, id string, step int, token string, body map[string]any) response {
	return h.do("POST", "/v1/workflows/"+id+"/approvals/"+strconv.Itoa(step), token, body)
}

// settle decides step of workflow id as body says, waits until the
// workflow completes, and checks its outcome and its steps (action:status).
func settle(t *testing.T, h *harness, token, id string, step int, body map[string]any, outcome, steps string) externalWorkflow {
	t.Helper()
	if r := decide(h, id, step, token, body); r.Status != 200 {
		t.Fatalf("decide %v: %d %s", body, r.Status, r.Body)
	}
	done := waitStatus(t, h, token, id, "completed")
	if done.Outcome != outcome {
		t.Errorf("outcome %s, want %s", done.Outcome, outcome)
	}
	if got := stepsOf(t, h, token, id); got != steps {
		t.Errorf("steps %s, want %s", got, steps)
	}
	return done
}

func stepsOf(t *testing.T, h *harness, token, id string) string {
	t.Helper()
	var out []string
	for _, s := range externalRunOf(t, h, token, id).Steps {
		out = append(out, s.Action+":"+s.Status)
	}
	return strings.Join(out, " ")
}

// TestDefinedAgentTokenBudgetAsks: an LLM agent past its max_llm_tokens
// waits at a budget_exhausted approval, which only another person with
// approve:budget may decide; approved with a budget of 5,000 it completes,
// denied it ends limit_exceeded without asking the model again.
func TestDefinedAgentTokenBudgetAsks(t *testing.T) {
	t.Parallel()
	bob := func(h *harness) string { return h.tokenFor("bob", "workflows:approve workflows:read approve:budget") }
	start := func(t *testing.T) (*harness, *fraudWorld, *llmtest.Server, string) {
		h, w, ms := budgetWorld(t, spendingScript(), 10*time.Second)
		if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "spender", "definition": json.RawMessage(spenderDef)}); r.Status != 201 {
			t.Fatalf("deploy: %d %s", r.Status, r.Body)
		}
		r := h.do("POST", "/v1/agents/spender/invoke", w.admin, map[string]any{"goal": "How much is tx-1?"})
		var wf externalWorkflow
		r.json(t, &wf)
		if r.Status != 200 || wf.Status != "waiting" {
			t.Fatalf("invoke: %d %s", r.Status, r.Body)
		}
		return h, w, ms, wf.ID
	}

	t.Run("approved with a new budget", func(t *testing.T) {
		t.Parallel()
		h, w, ms, id := start(t)
		a := waitingBudget(t, h, bob(h), id)
		if a.Kind != "budget_exhausted" || a.Action != "budget_exhausted" || a.ApproverScope == nil || *a.ApproverScope != "approve:budget" ||
			!strings.HasPrefix(a.Reason, "used 4,210 of 4,000 LLM tokens") {
			t.Fatalf("approval: %+v", a)
		}
		if diff := cmp.Diff(&budgetJSON{Limit: "max_llm_tokens", Used: 4210, Allowed: 4000, Grant: 4000}, a.Budget); diff != "" {
			t.Errorf("budget (-want +got):\n%s", diff)
		}
		// Four eyes and the approver scope, then the decision's checks.
		for _, c := range []struct {
			name   string
			token  string
			body   map[string]any
			status int
			field  string
		}{
			{"the invoker", h.tokenFor("alice", "workflows:approve approve:budget"), map[string]any{"decision": "approve"}, 403, ""},
			{"no approve:budget", h.tokenFor("carol", "workflows:approve"), map[string]any{"decision": "approve"}, 403, ""},
			{"a budget with a denial", bob(h), map[string]any{"decision": "deny", "budget": 10}, 422, "budget"},
			{"a budget of 0", bob(h), map[string]any{"decision": "approve", "budget": 0}, 422, "budget"},
			{"a budget over 10^8", bob(h), map[string]any{"decision": "approve", "budget": 100_000_001}, 422, "budget"},
		} {
			r := decide(h, id, a.Step, c.token, c.body)
			if r.Status != c.status || (c.field != "" && !strings.Contains(string(r.Body), `"field":"`+c.field+`"`)) {
				t.Errorf("%s: %d %s, want %d naming %q", c.name, r.Status, r.Body, c.status, c.field)
			}
		}
		if r := decide(h, id, a.Step, h.tokenFor("carol", "workflows:approve"), map[string]any{"decision": "approve"}); r.Header.Get("WWW-Authenticate") == "" ||
			!strings.Contains(r.Header.Get("WWW-Authenticate"), "approve:budget") {
			t.Errorf("WWW-Authenticate %q, want the approver scope", r.Header.Get("WWW-Authenticate"))
		}
		// 100 more is not enough for the next completion: the run asks again.
		conform(t, "GET", "/v1/approvals", "GET /v1/approvals", h.do("GET", "/v1/approvals?status=pending", bob(h), nil))
		r := decide(h, id, a.Step, bob(h), map[string]any{"decision": "approve", "budget": 100})
		conform(t, "POST", "/v1/workflows/"+id+"/approvals/"+strconv.Itoa(a.Step), "POST /v1/workflows/{id}/approvals/{step}", r)
		var decided budgetApprovalJSON
		r.json(t, &decided)
		if r.Status != 200 || decided.Status != "approved" || decided.Budget == nil || decided.Budget.Grant != 100 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		again := waitingBudget(t, h, bob(h), id)
		if !strings.HasPrefix(again.Reason, "used 4,210 of 4,100 LLM tokens") || again.Step <= a.Step {
			t.Fatalf("second approval %+v", again)
		}
		if r := decide(h, id, again.Step, bob(h), map[string]any{"decision": "approve", "budget": 5000, "comment": "worth finishing"}); r.Status != 200 {
			t.Fatalf("approve again: %d %s", r.Status, r.Body)
		}
		done := waitStatus(t, h, w.admin, id, "completed")
		if done.Outcome != "answered" || !strings.Contains(string(done.Output), "20 USD") || ms.Count() != 2 {
			t.Fatalf("workflow %+v after %d model requests", done, ms.Count())
		}
		want := "solve:ok solve:ok budget_exhausted:waiting_approval budget_exhausted:approved budget_exhausted:waiting_approval budget_exhausted:approved solve:ok"
		if got := stepsOf(t, h, w.admin, id); got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		// A replay serves both recorded decisions, each with its grant: the
		// first grant alone is not enough, so without it the replay would
		// ask once only, and without the second it would end there.
		res := doExtReplay(t, h, h.token("acme", replayScopes+" tool:*"), id, map[string]any{"target_agent_version": "spender@1"})
		if res.Outcome != "answered" || res.Delta.StepsChanged != 0 || res.Delta.StepsAdded != 0 || res.Delta.StepsRemoved != 0 || ms.Count() != 2 {
			t.Errorf("replay: outcome %s, delta %+v, %d model requests", res.Outcome, res.Delta, ms.Count())
		}
		q := h.do("GET", "/v1/audit/query?workflow_id="+id+"&action=workflow.approval", h.token("acme", "audit:read"), nil)
		if !strings.Contains(string(q.Body), `"budget":5000`) || !strings.Contains(string(q.Body), `"kind":"budget_exhausted"`) {
			t.Errorf("audit of the decision: %s", q.Body)
		}
	})

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		h, _, ms, id := start(t)
		a := waitingBudget(t, h, bob(h), id)
		settle(t, h, bob(h), id, a.Step, map[string]any{"decision": "deny"}, "limit_exceeded",
			"solve:ok solve:ok budget_exhausted:waiting_approval budget_exhausted:denied")
		if ms.Count() != 1 {
			t.Errorf("%d model requests after the denial, want 1", ms.Count())
		}
	})
}

// spendingTriage invokes fraud-triage on a transaction over 1,000 with one
// tool call allowed and on_exhausted ask: it waits before opening the case.
func spendingTriage(t *testing.T) (*harness, *fraudWorld, string) {
	t.Helper()
	h, w, _ := budgetWorld(t, llmtest.Sequence(), 10*time.Second)
	w.amounts.Store("tx-8", 1500.0)
	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "triage",
		"context": map[string]any{"transaction_id": "tx-8"}, "max_tool_calls": 1, "on_exhausted": "ask"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "waiting" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	return h, w, wf.ID
}

// TestDefinedAgentToolCallBudgetAsks: an invocation with max_tool_calls 1
// and on_exhausted ask waits before its second call; approved (the same
// budget again) the case is opened, denied it is not and the run ends
// limit_exceeded. A budget on an approve step's approval is refused.
func TestDefinedAgentToolCallBudgetAsks(t *testing.T) {
	t.Parallel()
	bob := func(h *harness) string {
		return h.tokenFor("bob", "workflows:approve workflows:read approve:budget approve:refunds")
	}
	start := spendingTriage
	const asked = "fetch_transaction:ok fraud_score:ok route_queue:ok budget_exhausted:waiting_approval"

	t.Run("approved", func(t *testing.T) {
		t.Parallel()
		h, w, id := start(t)
		a := waitingBudget(t, h, bob(h), id)
		if !strings.HasPrefix(a.Reason, "used 1 of 1 tool calls") || a.Budget == nil || a.Budget.Limit != "max_tool_calls" {
			t.Fatalf("approval %+v", a)
		}
		if w.cases.Load() != 0 {
			t.Fatal("the call past the budget went out before its approval")
		}
		settle(t, h, bob(h), id, a.Step, map[string]any{"decision": "approve"}, "escalated", asked+" budget_exhausted:approved open_case:ok")
		if w.cases.Load() != 1 {
			t.Errorf("%d cases, want 1", w.cases.Load())
		}
		var detail struct {
			OnExhausted string `json:"on_exhausted"`
		}
		r := h.do("GET", "/v1/workflows/"+id, w.admin, nil)
		conform(t, "GET", "/v1/workflows/"+id, "GET /v1/workflows/{id}", r)
		r.json(t, &detail)
		if detail.OnExhausted != "ask" {
			t.Errorf("on_exhausted %q, want ask", detail.OnExhausted)
		}
	})

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		h, w, id := start(t)
		a := waitingBudget(t, h, bob(h), id)
		// Over A2A the task asks for input, saying what was spent.
		var task a2aTaskJSON
		h.do("GET", "/a2a/fraud-triage/tasks/"+id, w.admin, nil).json(t, &task)
		if task.Status.State != "TASK_STATE_INPUT_REQUIRED" || task.Status.Message == nil ||
			!strings.HasPrefix(task.Status.Message.Parts[0].Text, "used 1 of 1 tool calls") {
			t.Errorf("the A2A task at a budget: %+v", task)
		}
		settle(t, h, bob(h), id, a.Step, map[string]any{"decision": "deny", "comment": "enough"}, "limit_exceeded", asked+" budget_exhausted:denied")
		if w.cases.Load() != 0 {
			t.Errorf("a denied call reached the tool %d times", w.cases.Load())
		}
		h.do("GET", "/a2a/fraud-triage/tasks/"+id, w.admin, nil).json(t, &task)
		if task.Status.State != "TASK_STATE_FAILED" {
			t.Errorf("the A2A task after the denial: %+v", task.Status)
		}
	})

	t.Run("a budget on another approval", func(t *testing.T) {
		t.Parallel()
		h, w, _ := budgetWorld(t, llmtest.Sequence(), 10*time.Second)
		deployRefunds(t, w)
		w.amounts.Store("tx-9", 900.0)
		r := h.do("POST", "/v1/agents/refunds/invoke", w.admin, map[string]any{"goal": "refund", "context": map[string]any{"transaction_id": "tx-9"}})
		var wf externalWorkflow
		r.json(t, &wf)
		a := waitingBudget(t, h, bob(h), wf.ID)
		if a.Kind != "approval" || a.Budget != nil {
			t.Errorf("an approve step's approval: %+v", a)
		}
		r = decide(h, wf.ID, a.Step, bob(h), map[string]any{"decision": "approve", "budget": 100})
		if r.Status != 422 || !strings.Contains(string(r.Body), `"field":"budget"`) {
			t.Errorf("budget on an approve step: %d %s", r.Status, r.Body)
		}
	})
}

// TestBudgetLimitsAreChecked: on_exhausted other than fail|ask, and an
// ask block without it, are refused naming the field.
func TestBudgetLimitsAreChecked(t *testing.T) {
	t.Parallel()
	h, w, _ := budgetWorld(t, llmtest.Sequence(), time.Second)
	for _, c := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"definition", map[string]any{"name": "bad-1", "definition": json.RawMessage(`{"model": "gpt", "tools": ["payments"],
			"limits": {"max_llm_tokens": 10, "on_exhausted": "pause"}, "steps": [{"action": "solve", "plan": {"prompt": "goal"}}]}`)}, "definition.limits.on_exhausted"},
		{"ask without on_exhausted ask", map[string]any{"name": "bad-2", "definition": json.RawMessage(`{"model": "gpt", "tools": ["payments"],
			"limits": {"max_llm_tokens": 10, "ask": {"approver_scope": "approve:spend"}}, "steps": [{"action": "solve", "plan": {"prompt": "goal"}}]}`)}, "definition.limits.ask"},
		{"ask timeout", map[string]any{"name": "bad-3", "definition": json.RawMessage(`{"model": "gpt", "tools": ["payments"],
			"limits": {"max_llm_tokens": 10, "on_exhausted": "ask", "ask": {"timeout": "soon"}}, "steps": [{"action": "solve", "plan": {"prompt": "goal"}}]}`)}, "definition.limits.ask.timeout"},
		{"external", map[string]any{"name": "bad-4", "external": map[string]any{"url": "http://127.0.0.1:9/agent", "tools": []string{"payments"},
			"models": []string{"gpt"}, "limits": map[string]any{"max_llm_tokens": 10, "on_exhausted": "later"}}}, "external.limits.on_exhausted"},
	} {
		r := h.do("POST", "/v1/agents", w.admin, c.body)
		if r.Status != 422 || !strings.Contains(string(r.Body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s, want 422 naming %s", c.name, r.Status, r.Body, c.field)
		}
	}
	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "triage",
		"context": map[string]any{"transaction_id": "tx-1"}, "on_exhausted": "wait"})
	if r.Status != 422 || !strings.Contains(string(r.Body), `"field":"on_exhausted"`) {
		t.Errorf("invoke on_exhausted: %d %s", r.Status, r.Body)
	}
}

// TestExternalAgentTokenBudgetAsks: the Go agent's second completion would
// pass its version's max_llm_tokens; the gateway holds it at a
// budget_exhausted approval. Approved in time it is relayed and the run
// completes; denied the agent is refused limit_exceeded and the run ends
// so; approved an hour later, the attempt was set aside and the next one
// replays the journal to the completion, which goes on with the grant.
func TestExternalAgentTokenBudgetAsks(t *testing.T) {
	t.Parallel()
	bob := func(h *harness) string { return h.tokenFor("bob", "workflows:approve workflows:read approve:budget") }
	start := func(t *testing.T, hold time.Duration, answered chan struct{}) (*harness, *fraudWorld, *llmtest.Server, string) {
		h, w, ms := budgetWorld(t, spendingScript(), hold)
		agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			goagent.Handler("gpt", 5).ServeHTTP(rw, r)
			if answered != nil {
				answered <- struct{}{}
			}
		}))
		t.Cleanup(agentSrv.Close)
		deployExternal(t, h, w.admin, "ext-spender", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"},
			"limits": map[string]any{"max_llm_tokens": 4000, "on_exhausted": "ask"}})
		r := h.do("POST", "/v1/agents/ext-spender/invoke", w.admin, map[string]any{"goal": "How much is tx-1?"}, "Prefer", "respond-async")
		var wf externalWorkflow
		r.json(t, &wf)
		if r.Status != 202 {
			t.Fatalf("invoke: %d %s", r.Status, r.Body)
		}
		return h, w, ms, wf.ID
	}

	t.Run("approved", func(t *testing.T) {
		t.Parallel()
		h, w, ms, id := start(t, 10*time.Second, nil)
		a := waitingBudget(t, h, bob(h), id)
		if a.Kind != "budget_exhausted" || !strings.HasPrefix(a.Reason, "used 4,210 of 4,000 LLM tokens") || *a.ApproverScope != "approve:budget" {
			t.Fatalf("approval %+v", a)
		}
		if r := decide(h, id, a.Step, h.tokenFor("alice", "workflows:approve approve:budget"), map[string]any{"decision": "approve"}); r.Status != 403 {
			t.Errorf("the invoker's own decision: %d %s", r.Status, r.Body)
		}
		if r := decide(h, id, a.Step, bob(h), map[string]any{"decision": "approve"}); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		done := waitStatus(t, h, w.admin, id, "completed")
		if done.Outcome != "answered" || ms.Count() != 2 || w.payments.Load() != 1 {
			t.Fatalf("workflow %+v, %d model requests, %d tool calls", done, ms.Count(), w.payments.Load())
		}
		if got, want := stepList(done), "1:completion:ok 1:call:ok 1:approve:waiting_approval 1:approve:approved 1:completion:ok 1:attempt:ok"; got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		// A dry run has the budget the decision granted: the recorded second
		// completion is served, not refused over the limit.
		res := doExtReplay(t, h, h.token("acme", replayScopes+" tool:*"), id, map[string]any{"target_agent_version": "ext-spender@1"})
		if res.Outcome != "answered" || ms.Count() != 2 || w.payments.Load() != 1 {
			t.Errorf("dry replay: outcome %s (%s), %d model requests, %d tool calls", res.Outcome, res.ReplayError, ms.Count(), w.payments.Load())
		}
	})

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		h, w, ms, id := start(t, 10*time.Second, nil)
		a := waitingBudget(t, h, bob(h), id)
		if r := decide(h, id, a.Step, bob(h), map[string]any{"decision": "deny"}); r.Status != 200 {
			t.Fatalf("deny: %d %s", r.Status, r.Body)
		}
		done := waitStatus(t, h, w.admin, id, "completed")
		if done.Outcome != "limit_exceeded" || ms.Count() != 1 {
			t.Fatalf("workflow %+v after %d model requests", done, ms.Count())
		}
		if got, want := stepList(done), "1:completion:ok 1:call:ok 1:approve:waiting_approval 1:approve:denied 1:completion:limit_exceeded 1:attempt:error"; got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
	})

	t.Run("an hour later", func(t *testing.T) {
		t.Parallel()
		answered := make(chan struct{}, 4)
		h, w, ms, id := start(t, 50*time.Millisecond, answered)
		a := waitingBudget(t, h, bob(h), id)
		<-answered // the set-aside attempt is over: the agent holds nothing
		if r := decide(h, id, a.Step, bob(h), map[string]any{"decision": "approve", "budget": 1000}); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		done := waitStatus(t, h, w.admin, id, "completed")
		want := "1:completion:ok 1:call:ok 1:approve:waiting_approval 1:attempt:set_aside 2:approve:approved 2:completion:ok 2:attempt:ok"
		if got := stepList(done); got != want {
			t.Errorf("steps %s, want %s", got, want)
		}
		if done.Outcome != "answered" || ms.Count() != 2 || w.payments.Load() != 1 {
			t.Errorf("workflow %+v, %d model requests, %d tool calls", done, ms.Count(), w.payments.Load())
		}
	})
}

// TestConsoleGrantsABudget: the console's approvals page shows a spent
// budget and takes the grant with the decision, as the API does.
func TestConsoleGrantsABudget(t *testing.T) {
	t.Parallel()
	h, w, id := spendingTriage(t)
	bob := h.tokenFor("bob", "workflows:approve workflows:read approve:budget")
	a := waitingBudget(t, h, bob, id)

	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, bob))
	_, body := consoletest.Get(t, c, h.URL+"/console/approvals")
	if !strings.Contains(body, "<code>max_tool_calls</code>: used 1 of 1; approving grants 1 more") || !strings.Contains(body, `name="budget"`) {
		t.Fatalf("the approvals page does not show the budget:\n%s", body)
	}
	action := "/console/workflows/" + id + "/approvals/" + strconv.Itoa(a.Step)
	form := url.Values{"csrf": {between(body, `name="csrf" value="`, `"`)}, "return": {"/console/approvals"},
		"decision": {"approve"}, "budget": {"3"}, "comment": {"three more"}}
	resp, err := c.PostForm(h.URL+action, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide in the console: %d", resp.StatusCode)
	}
	done := waitStatus(t, h, w.admin, id, "completed")
	if done.Outcome != "escalated" || w.cases.Load() != 1 {
		t.Fatalf("workflow %+v, %d cases", done, w.cases.Load())
	}
	var page struct {
		Approvals []budgetApprovalJSON `json:"approvals"`
	}
	h.do("GET", "/v1/approvals?status=decided", bob, nil).json(t, &page)
	if len(page.Approvals) != 1 || page.Approvals[0].Budget == nil || page.Approvals[0].Budget.Grant != 3 {
		t.Errorf("decided in the console: %+v", page.Approvals)
	}
}

// twoCallsWorld deploys the Go recipe's agent as name, with limits, its
// model asking for two calls of payments, one at a time, then answering.
func twoCallsWorld(t *testing.T, name string, limits map[string]any) (*harness, *fraudWorld, *llmtest.Server) {
	h, w, ms := budgetWorld(t, llmtest.Sequence(
		llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-1"}`)),
		llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-2"}`)),
		llmtest.Text("both are 20 USD."),
	), 10*time.Second)
	agentSrv := httptest.NewServer(goagent.Handler("gpt", 5))
	t.Cleanup(agentSrv.Close)
	ext := map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}}
	if limits != nil {
		ext["limits"] = limits
	}
	deployExternal(t, h, w.admin, name, ext)
	return h, w, ms
}

// TestExternalAgentToolCallBudgetAsks: the Go agent's second call would
// pass the invocation's max_tool_calls 1 under on_exhausted ask; the
// gateway holds it, and approved it is made in the same attempt.
func TestExternalAgentToolCallBudgetAsks(t *testing.T) {
	t.Parallel()
	h, w, ms := twoCallsWorld(t, "ext-caller", nil)
	r := h.do("POST", "/v1/agents/ext-caller/invoke", w.admin, map[string]any{"goal": "How much are tx-1 and tx-2?",
		"max_tool_calls": 1, "on_exhausted": "ask"}, "Prefer", "respond-async")
	var wf externalWorkflow
	r.json(t, &wf)
	bob := h.tokenFor("bob", "workflows:approve workflows:read approve:budget")
	a := waitingBudget(t, h, bob, wf.ID)
	if !strings.HasPrefix(a.Reason, "used 1 of 1 tool calls") || a.Budget == nil || a.Budget.Limit != "max_tool_calls" {
		t.Fatalf("approval %+v", a)
	}
	if w.payments.Load() != 1 {
		t.Fatalf("the call past the budget went out before its approval: %d calls", w.payments.Load())
	}
	if r := decide(h, wf.ID, a.Step, bob, map[string]any{"decision": "approve"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	done := waitStatus(t, h, w.admin, wf.ID, "completed")
	if done.Outcome != "answered" || w.payments.Load() != 2 || ms.Count() != 3 {
		t.Fatalf("workflow %+v, %d calls, %d model requests", done, w.payments.Load(), ms.Count())
	}
	want := "1:completion:ok 1:call:ok 1:completion:ok 1:approve:waiting_approval 1:approve:approved 1:call:ok 1:completion:ok 1:attempt:ok"
	if got := stepList(done); got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
}

// TestExternalInvocationBoundOverridesTheVersions: an invocation's
// max_tool_calls replaces the version's limits.max_tool_calls, the
// server's default among its values.
func TestExternalInvocationBoundOverridesTheVersions(t *testing.T) {
	t.Parallel()
	h, w, _ := twoCallsWorld(t, "ext-bounded", map[string]any{"max_tool_calls": 1})
	r := h.do("POST", "/v1/agents/ext-bounded/invoke", w.admin, map[string]any{"goal": "How much are tx-1 and tx-2?", "max_tool_calls": 20})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "answered" || w.payments.Load() != 2 {
		t.Errorf("max_tool_calls 20 over the version's 1: %d, %d calls, steps %s", r.Status, w.payments.Load(), stepList(wf))
	}
}

// withDailyBudget gives the scripted model a daily token budget of n.
func withDailyBudget(n int64) func(*workflow.Options) {
	return func(o *workflow.Options) {
		models := o.Models
		o.Models = model.LookupFunc(func(ctx context.Context, tenant, name string) (*model.Model, error) {
			m, err := models.Model(ctx, tenant, name)
			if err != nil {
				return nil, err
			}
			c := *m
			c.DailyTokenBudget = n
			return &c, nil
		})
	}
}

// slowCompletionWrites is a workflow store whose writes of a completion's
// step take a while, as a busy database's do.
type slowCompletionWrites struct{ workflow.Store }

func (s slowCompletionWrites) AppendSteps(ctx context.Context, owner string, steps ...workflow.StepWrite) error {
	for _, sw := range steps {
		if sw.Completion != nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return s.Store.AppendSteps(ctx, owner, steps...)
}

// TestExternalDailyBudgetCountsTheCompletionBefore: an external agent's
// completion right after another is refused when the one before it spent
// the model's daily budget, even while that one's step is still being
// written: the budget is read once it is stored.
func TestExternalDailyBudgetCountsTheCompletionBefore(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("first"), llmtest.Text("second")))
	slow := func(o *workflow.Options) { o.Store = slowCompletionWrites{o.Store} }
	h := newHarness(t, withExternal(t, ms, withDailyBudget(8), slow))
	w := newFraudWorld(t, h)
	second := make(chan error, 1)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		client := openai.NewClient(openaiopt.WithBaseURL(in.Gateway.OpenAIBaseURL), openaiopt.WithAPIKey(in.Gateway.Token), openaiopt.WithMaxRetries(0))
		ask := func() error {
			_, err := client.Chat.Completions.New(r.Context(), openai.ChatCompletionNewParams{
				Model: "gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(in.Goal)}})
			return err
		}
		if err := ask(); err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		second <- ask()
		fmt.Fprint(rw, `{"output": "done"}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-daily", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-daily/invoke", w.admin, map[string]any{"goal": "say something"})
	var wf externalWorkflow
	r.json(t, &wf)
	var oe *openai.Error
	if err := <-second; !errors.As(err, &oe) || oe.StatusCode != 403 || !strings.Contains(oe.Message, "daily budget of 8 tokens") {
		t.Errorf("the second request got %v, want a 403 refusal for the daily budget", err)
	}
	if ms.Count() != 1 || wf.Outcome != "limit_exceeded" {
		t.Errorf("model asked %d times, outcome %q; want once, limit_exceeded", ms.Count(), wf.Outcome)
	}
}

// TestDefinedAgentDailyBudgetCountsTheCompletionBefore: a defined agent's
// completion right after another (the repair turn of an answer failing
// output_schema) is refused when the one before it spent the model's daily
// budget: the budget is read once that one's step is stored.
func TestDefinedAgentDailyBudgetCountsTheCompletionBefore(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("It is fraud."), llmtest.JSON(`{"verdict":"fraud"}`)))
	h := newHarness(t, withExternal(t, ms, withDailyBudget(8)))
	w := newFraudWorld(t, h)
	const def = `{"model": "gpt", "tools": ["payments"],
 "steps": [{"action": "judge", "plan": {"prompt": "goal", "save_as": "verdict",
   "output_schema": {"type": "object", "required": ["verdict"], "properties": {"verdict": {"enum": ["fraud", "ok"]}}}}}],
 "output": "verdict", "outcome": "'answered'"}`
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "judge", "definition": json.RawMessage(def)}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	r := h.do("POST", "/v1/agents/judge/invoke", w.admin, map[string]any{"goal": "Is tx-1 fraud?"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if got, want := stepsOf(t, h, w.admin, wf.ID), "judge:ok token_limit_reached:limit_exceeded"; got != want || ms.Count() != 1 || wf.Outcome != "limit_exceeded" {
		t.Errorf("steps %s, model asked %d times, outcome %q; want %s, once, limit_exceeded", got, ms.Count(), wf.Outcome, want)
	}
}
