package httpapi_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/workflow"
)

// judgeDefinition is a defined agent of one plan step through the model
// gpt.
const judgeDefinition = `{"model": "gpt", "tools": ["payments"],
 "steps": [{"action": "judge", "plan": {"prompt": "goal", "save_as": "verdict"}}],
 "output": "verdict", "outcome": "'answered'"}`

// holdingModel is a model whose first answer is held until the client
// goes, began closed once it has that request; later ones answer at once.
func holdingModel(began chan struct{}) llmtest.Script {
	return func(r llmtest.Request) llmtest.Answer {
		if r.N == 1 {
			close(began)
			return llmtest.Answer{Text: "a verdict the model never gives", Delay: time.Minute}
		}
		return llmtest.Text("again")
	}
}

// startJudge deploys the agent judge and starts a run of it, returning
// once the model has its request (began closed).
func startJudge(t *testing.T, h *harness, token string, began <-chan struct{}) externalWorkflow {
	t.Helper()
	if r := h.do("POST", "/v1/agents", token, map[string]any{"name": "judge", "definition": json.RawMessage(judgeDefinition)}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	return invokeUntil(t, h, token, "judge", "Is tx-1 fraud?", began)
}

// invokeUntil invokes agent asynchronously and returns its workflow once
// began is closed (the model has the run's request).
func invokeUntil(t *testing.T, h *harness, token, agent, goal string, began <-chan struct{}) externalWorkflow {
	t.Helper()
	r := h.do("POST", "/v1/agents/"+agent+"/invoke", token, map[string]any{"goal": goal}, "Prefer", "respond-async")
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 202 {
		t.Fatalf("invoke %s: %d %s", agent, r.Status, r.Body)
	}
	select {
	case <-began:
	case <-time.After(30 * time.Second):
		t.Fatalf("the model never had %s's request", agent)
	}
	return wf
}

// TestDefinedAgentCutByTheRunsStopCountsItsTokens: a defined agent's run
// that stops while the model holds its answer to a plan step (cancelled,
// or past its time limit) still counts the input the provider read,
// estimated from the request: the completion's step, cancelled, has them,
// and so do its completion, the workflow's usage and cost and the
// tenant's usage; they count toward the model's daily budget, so the next
// run is refused without asking the model.
func TestDefinedAgentCutByTheRunsStopCountsItsTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stop, status, outcome, says string
	}{
		{"cancel", "cancelled", "cancelled", "the workflow was cancelled while the model answered"},
		{"time limit", "failed", "timed_out", "the workflow ran past its time limit while the model answered"},
	} {
		t.Run(tc.stop, func(t *testing.T) {
			t.Parallel()
			began := make(chan struct{})
			ms := llmtest.NewOpenAIServer(t, holdingModel(began))
			tune := []func(*workflow.Options){withDailyBudget(8)}
			if tc.stop == "time limit" {
				tune = append(tune, func(o *workflow.Options) { o.Timeout = 2 * time.Second })
			}
			h := newHarness(t, withExternal(t, ms, tune...))
			w := newFraudWorld(t, h)
			wf := startJudge(t, h, w.admin, began)
			if tc.stop == "cancel" {
				if r := h.do("POST", "/v1/workflows/"+wf.ID+"/cancel", w.admin, nil); r.Status != 200 {
					t.Fatalf("cancel: %d %s", r.Status, r.Body)
				}
			}
			full := waitStatus(t, h, w.admin, wf.ID, tc.status)
			if got := stepsOf(t, h, w.admin, wf.ID); got != "judge:cancelled" || full.Outcome != tc.outcome {
				t.Fatalf("steps %s, outcome %q; want the cut completion's, %s", got, full.Outcome, tc.outcome)
			}
			cut := full.Steps[0]
			if cut.Kind != "completion" || cut.InputTokens < 8 || cut.OutputTokens != 0 {
				t.Errorf("the cut completion's step %s counts %d input and %d output tokens, want its input, no output",
					cut.Kind, cut.InputTokens, cut.OutputTokens)
			}
			if !strings.Contains(cut.Error, tc.says) || !strings.Contains(cut.Error, "input tokens estimated from the request") {
				t.Errorf("the cut completion's step says %q, want %q and its tokens", cut.Error, tc.says)
			}
			var got struct {
				cutUsage
				Completions []struct {
					N, Step int
					Usage   usageNumbers `json:"usage"`
				} `json:"completions"`
			}
			h.do("GET", "/v1/workflows/"+wf.ID, w.admin, nil).json(t, &got)
			if len(got.Completions) != 1 || got.Completions[0].Step != 1 || got.Completions[0].Usage.InputTokens != cut.InputTokens {
				t.Errorf("completions %+v, want the cut one's, of step 1 with %d input tokens", got.Completions, cut.InputTokens)
			}
			if u := got.Usage; u == nil || u.InputTokens != cut.InputTokens || u.OutputTokens != 0 ||
				u.Completions != 1 || u.Cost == nil || u.Cost.Amount <= 0 {
				t.Errorf("workflow usage %+v, want the cut completion's %d input tokens, priced", u, cut.InputTokens)
			}
			var tenant struct {
				Total usageNumbers `json:"total"`
			}
			h.do("GET", "/v1/usage?group_by=model", h.token("acme", "usage:read"), nil).json(t, &tenant)
			if want := (usageNumbers{InputTokens: cut.InputTokens, Completions: 1}); tenant.Total != want {
				t.Errorf("the tenant's usage %+v, want %+v", tenant.Total, want)
			}

			r := h.do("POST", "/v1/agents/judge/invoke", w.admin, map[string]any{"goal": "Is tx-2 fraud?"})
			var next externalWorkflow
			r.json(t, &next)
			if r.Status != 200 {
				t.Fatalf("invoke the next run: %d %s", r.Status, r.Body)
			}
			if got := stepsOf(t, h, w.admin, next.ID); got != "token_limit_reached:limit_exceeded" || next.Outcome != "limit_exceeded" || ms.Count() != 1 {
				t.Errorf("the next run's steps %s, outcome %q, model asked %d times; want refused by the daily budget, limit_exceeded, once",
					got, next.Outcome, ms.Count())
			}
		})
	}
}

// TestDefinedAgentCutByALostLeaseCountsItsTokens: a replica that loses a
// defined agent's workflow while the model holds its answer may store no
// step of it, but counts the input the provider read in the tenant's
// usage, which the model's daily budget reads.
func TestDefinedAgentCutByALostLeaseCountsItsTokens(t *testing.T) {
	t.Parallel()
	// Every answer is held: the run resumed after the lease was lost
	// counts nothing while the test looks.
	began := make(chan struct{})
	first := sync.OnceFunc(func() { close(began) })
	ms := llmtest.NewOpenAIServer(t, func(llmtest.Request) llmtest.Answer {
		first()
		return llmtest.Answer{Text: "a verdict the model never gives", Delay: time.Minute}
	})
	lose := make(chan string, 1)
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) { o.Store = leaseLosingStore{o.Store, lose} }))
	w := newFraudWorld(t, h)
	wf := startJudge(t, h, w.admin, began)
	lose <- wf.ID
	var tenant struct {
		Total usageNumbers `json:"total"`
	}
	for range 400 {
		h.do("GET", "/v1/usage?group_by=model", h.token("acme", "usage:read"), nil).json(t, &tenant)
		if tenant.Total.Completions > 0 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if tenant.Total.InputTokens < 8 || tenant.Total.OutputTokens != 0 || tenant.Total.Completions != 1 {
		t.Errorf("the tenant's usage %+v after %d model requests, want the cut completion's input tokens", tenant.Total, ms.Count())
	}
	for _, s := range externalRunOf(t, h, w.admin, wf.ID).Steps {
		if s.Kind == "completion" && s.Status == "cancelled" {
			t.Errorf("the replica that lost the lease stored the completion's step %+v", s)
		}
	}
}
