package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/secrets"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// modelServer speaks the Chat Completions wire format: a conversation's
// first completion asks for a transaction, the next answers.
type modelServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
}

func newModelServer(t *testing.T) *modelServer {
	m := &modelServer{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(rw, r)
			return
		}
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		m.mu.Lock()
		m.requests++
		n := m.requests
		m.mu.Unlock()
		msg, finish := `{"role": "assistant", "content": "the transaction is fine"}`, "stop"
		if len(req.Messages) == 2 {
			msg, finish = `{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
				"function": {"name": "payments__getTransaction", "arguments": "{\"id\": \"tx-1\"}"}}]}`, "tool_calls"
		}
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"id": "chatcmpl-%d", "object": "chat.completion", "created": 1, "model": "gpt-test-2026",
			"choices": [{"index": 0, "message": %s, "finish_reason": %q}],
			"usage": {"prompt_tokens": %d, "completion_tokens": %d, "total_tokens": 0}}`, n, msg, finish, 100+n, 10+n)
	}))
	t.Cleanup(m.Close)
	return m
}

// withModel gives the server a runner whose default model is served by ms.
func withModel(t *testing.T, ms *modelServer) option {
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		policy, _ := secrets.NewPolicy([]string{"env://TOOL_*"}, false)
		resolver, err := secrets.NewResolver(secrets.Options{Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		// The server-wide model, at the test's price, asked through the
		// real provider clients.
		models := model.LookupFunc(func(_ context.Context, _, name string) (*model.Model, error) {
			if name != model.DefaultName {
				return nil, problem.New(problem.NotFound, "no model named %q", name)
			}
			return &model.Model{ID: model.DefaultID, Name: name, Provider: model.OpenAI, BaseURL: ms.URL + "/v1",
				Model: "gpt-test", Timeout: 10 * time.Second, Revision: 1,
				Price: &model.Price{InputPerMTok: 3, OutputPerMTok: 15, Currency: "USD"}}, nil
		})
		pool := llm.NewClients(llm.Options{Outbound: outbound.New(outbound.Options{AllowPrivate: true})})
		r := workflow.New(workflow.Options{
			Store: d.Workflows, Versions: d.Agents, Tools: d.ToolStore, Models: models, LLM: pool,
			Caller: toolcall.New(toolcall.Options{Client: outbound.New(outbound.Options{AllowPrivate: true}), Secrets: resolver}),
		})
		t.Cleanup(func() { r.Close(context.Background()) })
		d.Runner = r
	}
}

type usageNumbers struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Completions  int64 `json:"completions"`
}

// TestCompletionsUsageAndCost checks a workflow's completions and usage,
// who sees their messages, and that GET /v1/usage adds up to the stored
// completions, in total and per group.
func TestCompletionsUsageAndCost(t *testing.T) {
	t.Parallel()
	ms := newModelServer(t)
	h := newHarness(t, withModel(t, ms))
	w := newFraudWorld(t, h)
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "helper", "definition": map[string]any{
		"tools": []string{"payments"}, "steps": []any{map[string]any{"action": "solve", "plan": map[string]any{"prompt": "goal"}}},
		"outcome": "'answered'"}}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	const runs = 3
	var ids []string
	// answered are the usages the invocations answered with, counted by
	// their executions as they ran, by workflow.
	type usageAnswer struct {
		usageNumbers
		cost float64
	}
	answered := map[string]usageAnswer{}
	for range runs {
		r := h.do("POST", "/v1/agents/helper/invoke", w.admin, map[string]any{"goal": "check tx-1", "max_llm_tokens": 100000})
		var wf struct {
			ID      string `json:"workflow_id"`
			Outcome string `json:"outcome"`
			Usage   *struct {
				usageNumbers
				Cost *struct {
					Amount   float64 `json:"amount"`
					Currency string  `json:"currency"`
				} `json:"cost"`
			} `json:"usage"`
		}
		r.json(t, &wf)
		conform(t, "POST", "/v1/agents/helper/invoke", "POST /v1/agents/{id}/invoke", r)
		if r.Status != 200 || wf.Outcome != "answered" || wf.Usage == nil || wf.Usage.Completions != 2 || wf.Usage.Cost == nil ||
			wf.Usage.Cost.Currency != "USD" {
			t.Fatalf("invoke: %d %s", r.Status, r.Body)
		}
		ids = append(ids, wf.ID)
		answered[wf.ID] = usageAnswer{wf.Usage.usageNumbers, wf.Usage.Cost.Amount}
	}

	// Independently: the sums of the stored completions, which each
	// invocation's answer must have given.
	var total usageNumbers
	var cost float64
	for _, id := range ids {
		comps, err := h.DB.WorkflowCompletions(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var stored usageAnswer
		for _, c := range comps {
			stored.InputTokens += c.InputTokens
			stored.OutputTokens += c.OutputTokens
			stored.Completions++
			stored.cost += float64(c.InputTokens)*3/1e6 + float64(c.OutputTokens)*15/1e6
		}
		if a := answered[id]; a.usageNumbers != stored.usageNumbers || math.Abs(a.cost-stored.cost) > 1e-12 {
			t.Errorf("invocation of %s answered usage %+v, its stored completions sum to %+v", id, a, stored)
		}
		total.InputTokens += stored.InputTokens
		total.OutputTokens += stored.OutputTokens
		total.Completions += stored.Completions
		cost += stored.cost
	}
	if total.Completions != 2*runs || ms.requests != 2*runs {
		t.Fatalf("%d completions stored, %d requested; want %d", total.Completions, ms.requests, 2*runs)
	}
	reader := h.token("acme", "usage:read")
	for _, by := range []string{"agent", "model", "day"} {
		r := h.do("GET", "/v1/usage?group_by="+by, reader, nil)
		var rep struct {
			GroupBy string `json:"group_by"`
			Groups  []map[string]any
			Total   struct {
				usageNumbers
				Cost []struct {
					Amount   float64 `json:"amount"`
					Currency string  `json:"currency"`
				} `json:"cost"`
			} `json:"total"`
		}
		r.json(t, &rep)
		conform(t, "GET", "/v1/usage", "GET /v1/usage", r)
		if r.Status != 200 || rep.Total.usageNumbers != total || len(rep.Total.Cost) != 1 ||
			math.Abs(rep.Total.Cost[0].Amount-cost) > 1e-12 || len(rep.Groups) != 1 {
			t.Fatalf("usage by %s: %d %s; want totals %+v, cost %v", by, r.Status, r.Body, total, cost)
		}
		key := map[string]string{"agent": "helper", "model": "default"}[by]
		g := rep.Groups[0]
		if key != "" && g[by] != key || g["input_tokens"] != float64(total.InputTokens) || g["completions"] != float64(total.Completions) {
			t.Errorf("usage by %s: group %v", by, g)
		}
	}

	// The messages after a tool call are for those who may read its answers.
	for _, tc := range []struct {
		scopes string
		hidden []bool
	}{{adminScopes, []bool{false, false}}, {"workflows:read", []bool{false, true}}, {"workflows:read tool:payments", []bool{false, false}}} {
		r := h.do("GET", "/v1/workflows/"+ids[0], h.token("acme", tc.scopes), nil)
		var wf struct {
			MaxLLMTokens int64 `json:"max_llm_tokens"`
			Completions  []struct {
				N             int            `json:"n"`
				Step          int            `json:"step"`
				Model         string         `json:"model"`
				ProviderModel string         `json:"provider_model"`
				Request       map[string]any `json:"request"`
				Response      map[string]any `json:"response"`
				Usage         usageNumbers   `json:"usage"`
				FinishReason  string         `json:"finish_reason"`
				Hidden        bool           `json:"content_hidden"`
			} `json:"completions"`
		}
		r.json(t, &wf)
		conform(t, "GET", "/v1/workflows/"+ids[0], "GET /v1/workflows/{id}", r)
		if r.Status != 200 || len(wf.Completions) != 2 || wf.MaxLLMTokens != 100000 {
			t.Fatalf("GET workflow as %q: %d %s", tc.scopes, r.Status, r.Body)
		}
		for i, c := range wf.Completions {
			_, msgs := c.Request["messages"]
			_, msg := c.Response["message"]
			if c.Hidden != tc.hidden[i] || msgs == c.Hidden || msg == c.Hidden || c.Model != "default" ||
				c.ProviderModel != "gpt-test-2026" || c.Usage.InputTokens == 0 || c.FinishReason == "" || c.Request["tools"] == nil {
				t.Errorf("as %q, completion %d: %+v; want content hidden %v", tc.scopes, c.N, c, tc.hidden[i])
			}
		}
	}
	// completions=false leaves the records out and keeps the usage.
	r := h.do("GET", "/v1/workflows/"+ids[0]+"?completions=false", w.admin, nil)
	var lean map[string]any
	r.json(t, &lean)
	conform(t, "GET", "/v1/workflows/"+ids[0]+"?completions=false", "GET /v1/workflows/{id}", r)
	if _, ok := lean["completions"]; r.Status != 200 || ok || lean["usage"] == nil || len(lean["steps"].([]any)) == 0 {
		t.Errorf("completions=false: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/workflows/"+ids[0]+"?completions=no", w.admin, nil); r.Status != 422 || !strings.Contains(string(r.Body), "completions") {
		t.Errorf("completions=no: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/usage", w.admin, nil); r.Status != 403 {
		t.Errorf("usage without usage:read: %d", r.Status)
	}
}

// TestUsageAndBudgetInputs checks the fields a usage report and an invoke's
// token bound refuse.
func TestUsageAndBudgetInputs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	reader := h.token("acme", "usage:read")
	for q, field := range map[string]string{
		"group_by=week": "group_by", "since=yesterday": "since", "until=2026-13-01": "until",
		"since=2026-03-02&until=2026-03-01": "until", "since=2024-01-01&until=2026-01-01": "since",
	} {
		r := h.do("GET", "/v1/usage?"+q, reader, nil)
		conform(t, "GET", "/v1/usage", "GET /v1/usage", r)
		if p := r.problem(t); r.Status != 422 || p.Code != problem.ValidationFailed || len(p.Errors) != 1 || p.Errors[0].Field != field {
			t.Errorf("usage?%s: %d %s; want 422 naming %s", q, r.Status, r.Body, field)
		}
	}
	r := h.do("GET", "/v1/usage?since=2026-03-01&until=2026-03-02T10:00:00Z&group_by=day", reader, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"since":"2026-03-01","until":"2026-03-02","group_by":"day","groups":[]`) {
		t.Errorf("an empty report: %d %s", r.Status, r.Body)
	}
	for _, n := range []any{0, -1, 100000001} {
		r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "triage", "max_llm_tokens": n})
		if p := r.problem(t); r.Status != 422 || len(p.Errors) == 0 || p.Errors[0].Field != "max_llm_tokens" {
			t.Errorf("max_llm_tokens %v: %d %s", n, r.Status, r.Body)
		}
	}
}
