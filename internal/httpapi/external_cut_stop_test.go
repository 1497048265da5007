package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestExternalCutByTheRunsStopCountsItsTokens: a run that stops while the
// model streams its answer (its last event held), cancelled or past its
// time limit, still counts the tokens the model produced: the completion's
// step, cancelled, has them, and so do the workflow's usage and cost and
// the tenant's usage; they count toward the model's daily budget, so
// another agent's run through that model is refused.
func TestExternalCutByTheRunsStopCountsItsTokens(t *testing.T) {
	t.Parallel()
	for _, p := range cutProviders {
		for _, tc := range []struct {
			stop, status, says string
		}{
			{"cancel", "cancelled", "the workflow was cancelled while the model answered"},
			{"time limit", "failed", "the workflow ran past its time limit while the model answered"},
		} {
			t.Run(p.name+"/"+tc.stop, func(t *testing.T) {
				t.Parallel()
				ms := p.server(t, llmtest.Sequence(
					llmtest.Answer{Text: "a long answer the model never finishes", HoldLast: make(chan struct{})},
					llmtest.Text("again")))
				h := newHarness(t, withExternal(t, ms, withDailyBudget(8)))
				w := newFraudWorld(t, h)
				began, asked := make(chan struct{}), make(chan string, 1)
				agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					var in cutInvocation
					json.NewDecoder(r.Body).Decode(&in)
					if in.Goal == "again" {
						status, words := p.ask(r.Context(), in)
						asked <- fmt.Sprintf("%d %s", status, words)
						fmt.Fprint(rw, `{"output": "done"}`)
						return
					}
					p.stream(r.Context(), in, false, func() { close(began) })
				}))
				t.Cleanup(agentSrv.Close)
				stopped := map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}}
				if tc.stop == "time limit" {
					stopped["timeout"] = "3s"
				}
				deployExternal(t, h, w.admin, "ext-stopped", stopped)
				deployExternal(t, h, w.admin, "ext-next", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})

				wf := invokeUntil(t, h, w.admin, "ext-stopped", "say a lot", began)
				if tc.stop == "cancel" {
					if r := h.do("POST", "/v1/workflows/"+wf.ID+"/cancel", w.admin, nil); r.Status != 200 {
						t.Fatalf("cancel: %d %s", r.Status, r.Body)
					}
				}
				full := waitStatus(t, h, w.admin, wf.ID, tc.status)
				if got := stepList(full); got != "1:completion:cancelled" {
					t.Fatalf("steps %s, want the cut completion's", got)
				}
				cut := full.Steps[0]
				if cut.InputTokens <= 0 || cut.OutputTokens <= 0 || cut.InputTokens+cut.OutputTokens < 8 {
					t.Errorf("the cut completion's step counts %d input and %d output tokens, want both counted", cut.InputTokens, cut.OutputTokens)
				}
				if !strings.Contains(cut.Error, tc.says) || !strings.Contains(cut.Error, "counted: ") {
					t.Errorf("the cut completion's step says %q, want %q and its tokens", cut.Error, tc.says)
				}
				var u cutUsage
				h.do("GET", "/v1/workflows/"+wf.ID, w.admin, nil).json(t, &u)
				if u.Usage == nil || u.Usage.InputTokens != cut.InputTokens || u.Usage.OutputTokens != cut.OutputTokens ||
					u.Usage.Completions != 1 || u.Usage.Cost == nil || u.Usage.Cost.Amount <= 0 {
					t.Errorf("workflow usage %+v, want the cut completion's %d and %d tokens, priced", u.Usage, cut.InputTokens, cut.OutputTokens)
				}
				var tenant struct {
					Total usageNumbers `json:"total"`
				}
				h.do("GET", "/v1/usage?group_by=model", h.token("acme", "usage:read"), nil).json(t, &tenant)
				if want := (usageNumbers{InputTokens: cut.InputTokens, OutputTokens: cut.OutputTokens, Completions: 1}); tenant.Total != want {
					t.Errorf("the tenant's usage %+v, want %+v", tenant.Total, want)
				}

				r := h.do("POST", "/v1/agents/ext-next/invoke", w.admin, map[string]any{"goal": "again"})
				var next externalWorkflow
				r.json(t, &next)
				if r.Status != 200 {
					t.Fatalf("invoke the next run: %d %s", r.Status, r.Body)
				}
				if got := <-asked; !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "daily budget of 8 tokens") {
					t.Errorf("the next run's request got %q, want a 403 refusal for the daily budget", got)
				}
				if ms.Count() != 1 || next.Outcome != "limit_exceeded" {
					t.Errorf("model asked %d times, the next run's outcome %q; want once, limit_exceeded", ms.Count(), next.Outcome)
				}
			})
		}
	}
}

// TestExternalDryRunCutByItsTimeLimitCountsItsTokens: a dry run with llm
// live that runs past its time limit while the model streams its answer
// still counts the tokens the model produced: its completion's step,
// cancelled, has them, and so does the tenant's usage.
func TestExternalDryRunCutByItsTimeLimitCountsItsTokens(t *testing.T) {
	t.Parallel()
	p := cutProviders[0]
	ms := p.server(t, func(r llmtest.Request) llmtest.Answer {
		if r.N == 1 {
			return llmtest.Text("the original's answer")
		}
		return llmtest.Answer{Text: "a long answer the model never finishes", HoldLast: make(chan struct{})}
	})
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in cutInvocation
		json.NewDecoder(r.Body).Decode(&in)
		p.stream(r.Context(), in, false, nil)
		fmt.Fprint(rw, `{"output": "done"}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-dry-cut", map[string]any{"url": agentSrv.URL, "timeout": "3s",
		"tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-dry-cut/invoke", w.admin, map[string]any{"goal": "say a lot"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "answered" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	var u cutUsage
	h.do("GET", "/v1/workflows/"+wf.ID, w.admin, nil).json(t, &u)
	if u.Usage == nil {
		t.Fatal("the original run has no usage")
	}

	res := doExtReplay(t, h, h.token("acme", replayScopes), wf.ID, map[string]any{"target_agent_version": "ext-dry-cut@1", "llm": "live"})
	if got := strings.Join(res.replaySteps(), " "); res.Outcome != "timed_out" || got != "completion:cancelled" {
		t.Fatalf("replay outcome %q, steps %s; want timed_out, the cut completion's", res.Outcome, got)
	}
	cut := res.replayStep("completion")
	if cut.InputTokens <= 0 || cut.OutputTokens <= 0 || !strings.Contains(cut.Error, "counted: ") {
		t.Errorf("the cut completion's step %+v, want its tokens counted", cut)
	}
	var tenant struct {
		Total usageNumbers `json:"total"`
	}
	h.do("GET", "/v1/usage?group_by=model", h.token("acme", "usage:read"), nil).json(t, &tenant)
	want := usageNumbers{InputTokens: u.Usage.InputTokens + cut.InputTokens, OutputTokens: u.Usage.OutputTokens + cut.OutputTokens, Completions: 2}
	if tenant.Total != want {
		t.Errorf("the tenant's usage %+v, want the original's and the cut completion's, %+v", tenant.Total, want)
	}
}

// leaseLosingStore is a workflow store whose next lease renewal after a
// workflow's id is sent on lose reports that workflow's lease lost, as
// when another replica took it over.
type leaseLosingStore struct {
	workflow.Store
	lose chan string
}

func (s leaseLosingStore) RenewLease(ctx context.Context, owner string, ids []string, until time.Time) (workflow.LeaseStatus, error) {
	st, err := s.Store.RenewLease(ctx, owner, ids, until)
	select {
	case id := <-s.lose:
		st.Lost = append(st.Lost, id)
	default:
	}
	return st, err
}

// TestExternalCutByALostLeaseCountsItsTokens: a replica that loses a
// workflow's lease while the model streams its answer may store no step
// of it, but counts the tokens the model produced in the tenant's usage,
// which the model's daily budget reads.
func TestExternalCutByALostLeaseCountsItsTokens(t *testing.T) {
	t.Parallel()
	p := cutProviders[0]
	ms := p.server(t, llmtest.Sequence(llmtest.Answer{Text: "a long answer the model never finishes", HoldLast: make(chan struct{})}))
	lose := make(chan string, 1)
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) { o.Store = leaseLosingStore{o.Store, lose} }))
	w := newFraudWorld(t, h)
	var posts atomic.Int32
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in struct {
			cutInvocation
			Run struct {
				ID string `json:"id"`
			} `json:"run"`
		}
		json.NewDecoder(r.Body).Decode(&in)
		if posts.Add(1) == 1 {
			p.stream(r.Context(), in.cutInvocation, false, func() { lose <- in.Run.ID })
		}
		fmt.Fprint(rw, `{"output": "done"}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-lost", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-lost/invoke", w.admin, map[string]any{"goal": "say a lot"}, "Prefer", "respond-async")
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 202 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
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
	if tenant.Total.InputTokens <= 0 || tenant.Total.OutputTokens <= 0 || tenant.Total.Completions != 1 || ms.Count() != 1 {
		t.Errorf("the tenant's usage %+v after %d model requests, want the cut completion's tokens", tenant.Total, ms.Count())
	}
	for _, s := range externalRunOf(t, h, w.admin, wf.ID).Steps {
		if s.Kind == "completion" {
			t.Errorf("the replica that lost the lease stored the completion's step %+v", s)
		}
	}
}
