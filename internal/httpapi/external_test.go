package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/secrets"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// withExternal gives the server a runner that runs external agents, whose
// gateway relays to the model "gpt" served by ms (at a price); with ms nil,
// to the models registered in the store, as cmd/agentplane's runner does.
func withExternal(t *testing.T, ms *llmtest.Server, tune ...func(*workflow.Options)) option {
	return func(cfg *httpapi.Config, d *httpapi.Deps) {
		policy, _ := secrets.NewPolicy([]string{"env://TOOL_*", "env://AGENT_*"}, false)
		resolver, err := secrets.NewResolver(secrets.Options{Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		models := model.NewLookup(d.Models.Store, nil)
		if ms != nil {
			m := ms.Model("gpt")
			m.Price = &model.Price{InputPerMTok: 1, OutputPerMTok: 2, Currency: "USD"}
			models = model.LookupFunc(func(_ context.Context, _, name string) (*model.Model, error) {
				if name != "gpt" {
					return nil, problem.New(problem.NotFound, "no model named %q", name)
				}
				return m, nil
			})
		}
		out := outbound.New(outbound.Options{AllowPrivate: true})
		pool := llm.NewClients(llm.Options{Outbound: out})
		agents := out.HTTPClient()
		agents.Timeout = 0
		opts := workflow.Options{
			Store: d.Workflows, Versions: d.Agents, Tools: d.ToolStore, Models: models, LLM: pool, Lease: 10 * time.Second,
			Caller: toolcall.New(toolcall.Options{Client: out, Secrets: resolver}),
			External: workflow.ExternalOptions{PublicURL: cfg.PublicURL, HTTP: agents, Secrets: resolver, Relay: pool,
				Backoff: 10 * time.Millisecond},
		}
		for _, f := range tune {
			f(&opts)
		}
		r := workflow.New(opts)
		ctx, stop := context.WithCancel(context.Background())
		go r.Run(ctx)
		t.Cleanup(func() {
			stop()
			r.Close(context.Background())
		})
		d.Runner = r
	}
}

// deployExternal deploys an external version of name at url.
func deployExternal(t *testing.T, h *harness, token, name string, external map[string]any) {
	t.Helper()
	if r := h.do("POST", "/v1/agents", token, map[string]any{"name": name, "external": external}); r.Status != 201 {
		t.Fatalf("deploy %s: %d %s", name, r.Status, r.Body)
	}
}

type externalStep struct {
	Step         int             `json:"step"`
	Action       string          `json:"action"`
	Kind         string          `json:"kind"`
	Status       string          `json:"status"`
	Tool         string          `json:"tool"`
	Operation    string          `json:"operation"`
	Result       json.RawMessage `json:"result"`
	Error        string          `json:"error"`
	ErrorCode    string          `json:"error_code"`
	Model        string          `json:"model"`
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	Attempt      int             `json:"attempt"`
	Journal      string          `json:"journal"`
}

type externalWorkflow struct {
	ID      string          `json:"workflow_id"`
	Status  string          `json:"status"`
	Outcome string          `json:"outcome"`
	Output  json.RawMessage `json:"output"`
	Error   *struct {
		Detail    string `json:"detail"`
		ErrorCode string `json:"error_code"`
	} `json:"error"`
	Steps []externalStep `json:"steps"`
}

// TestExternalAgentRunsThroughTheGateway runs the Go recipe's agent
// (openai-go and the MCP Go SDK, unmodified) as an external version: its
// completions and its call go through the gateway to the scripted model
// and the real tool, each recorded as a step with its tokens, audited.
func TestExternalAgentRunsThroughTheGateway(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(
		llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-1"}`)),
		llmtest.Text("tx-1 is 20 USD."),
	))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	var posts atomic.Int32
	var idemKey, traceparent atomic.Value
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		idemKey.Store(r.Header.Get("Idempotency-Key"))
		traceparent.Store(r.Header.Get("traceparent"))
		goagent.Handler("gpt", 5).ServeHTTP(rw, r)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-triage", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})

	r := h.do("POST", "/v1/agents/ext-triage/invoke", w.admin, map[string]any{"goal": "How much is tx-1?"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" || wf.Outcome != "answered" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(string(wf.Output), "20 USD") {
		t.Errorf("output %s, want the model's answer", wf.Output)
	}
	if w.payments.Load() != 1 {
		t.Errorf("the tool got %d requests, want 1", w.payments.Load())
	}
	if posts.Load() != 1 || idemKey.Load() != wf.ID+".1" || traceparent.Load() == "" {
		t.Errorf("agent: %d posts, Idempotency-Key %v, traceparent %q", posts.Load(), idemKey.Load(), traceparent.Load())
	}
	got := h.do("GET", "/v1/workflows/"+wf.ID, w.admin, nil)
	var full externalWorkflow
	got.json(t, &full)
	var kinds []string
	for _, s := range full.Steps {
		kinds = append(kinds, s.Kind+":"+s.Status)
	}
	if want := "completion:ok call:ok completion:ok attempt:ok"; strings.Join(kinds, " ") != want {
		t.Fatalf("steps %v, want %s\n%s", kinds, want, got.Body)
	}
	c, call := full.Steps[0], full.Steps[1]
	if c.Model != "gpt" || c.InputTokens == 0 || c.OutputTokens == 0 || c.Attempt != 1 {
		t.Errorf("completion step %+v", c)
	}
	if call.Tool != "payments" || call.Operation != "getTransaction" || !strings.Contains(string(call.Result), "tx-1") {
		t.Errorf("call step %+v", call)
	}
	var conv struct {
		Completions []struct {
			Model string `json:"model"`
		} `json:"completions"`
	}
	got.json(t, &conv)
	if len(conv.Completions) != 2 {
		t.Errorf("completions %s", got.Body)
	}
	q := h.do("GET", "/v1/audit/query?workflow_id="+wf.ID+"&limit=200", h.token("acme", "audit:read"), nil)
	var recs struct {
		Records []struct {
			Action  string `json:"action"`
			TraceID string `json:"trace_id"`
		} `json:"records"`
	}
	q.json(t, &recs)
	actions := map[string]int{}
	for _, rec := range recs.Records {
		actions[rec.Action]++
		// The agent's own spans join the invocation's trace.
		if tp, _ := traceparent.Load().(string); rec.Action == "workflow.step" && !strings.Contains(tp, "-"+rec.TraceID+"-") {
			t.Errorf("traceparent %q sent to the agent is not in the workflow's trace %q", tp, rec.TraceID)
		}
	}
	if actions["gateway.chat"] != 2 || actions["gateway.mcp"] == 0 || actions["tool.call"] != 1 {
		t.Errorf("audit actions %v", actions)
	}
}

// TestExternalAgentFailures covers an agent's bad answers: each fails the
// workflow with a stable error code, never a 500.
func TestExternalAgentFailures(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	var calls atomic.Int32
	cases := []struct {
		name, code string
		handler    http.HandlerFunc
		attempts   int32
	}{
		{"refuses", workflow.ErrorCodeAgentError, func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "no such customer", http.StatusUnprocessableEntity)
		}, 1},
		{"not-json", workflow.ErrorCodeAgentError, func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprint(rw, "done!")
		}, 1},
		{"empty", workflow.ErrorCodeAgentError, func(rw http.ResponseWriter, r *http.Request) {}, 1},
		{"broken", workflow.ErrorCodeAgentError, func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "boom", http.StatusBadGateway)
		}, 2},
	}
	for _, tc := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			io.Copy(io.Discard, r.Body)
			tc.handler(rw, r)
		}))
		t.Cleanup(srv.Close)
		calls.Store(0)
		deployExternal(t, h, w.admin, "ext-"+tc.name, map[string]any{"url": srv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}, "max_attempts": 2})
		r := h.do("POST", "/v1/agents/ext-"+tc.name+"/invoke", w.admin, map[string]any{"goal": "go"})
		var wf externalWorkflow
		r.json(t, &wf)
		if r.Status != 200 || wf.Status != "failed" || wf.Error == nil || wf.Error.ErrorCode != tc.code || calls.Load() != tc.attempts {
			t.Errorf("%s: %d attempts, %d %s", tc.name, calls.Load(), r.Status, r.Body)
		}
	}
}

// TestExternalGatewayRefusesTokens: the gateway answers a request without
// a run token, with an unknown one, or after the run ended with 401 in the
// provider's shape.
func TestExternalGatewayRefusesTokens(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	tokens := make(chan string, 1)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		tokens <- in.Gateway.Token
		fmt.Fprint(rw, `{"output": {"ok": true}}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-token", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	if r := h.do("POST", "/v1/agents/ext-token/invoke", w.admin, map[string]any{"goal": "go"}); r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	ended := <-tokens
	body := `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`
	for name, tok := range map[string]string{"none": "", "unknown": "apr_nope", "ended": ended} {
		r := h.do("POST", "/gateway/openai/v1/chat/completions", tok, body)
		if msg, _ := openAIError(r.Body); r.Status != 401 || msg == "" {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
}

// openAIError reads an error answer in the shape OpenAI's SDKs parse:
// its message and type, empty when the body is not such an answer.
func openAIError(body []byte) (message, typ string) {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	json.Unmarshal(body, &e)
	return e.Error.Message, e.Error.Type
}

// TestExternalGatewayRefusesMalformedBodies: a model request that is not
// JSON, names no model, or repeats a member (it has no canonical form,
// which the journal keys completions by) is refused 400, and one over the
// gateway's 32 MiB 413, in the provider's error shape, without reaching
// the model, and the run goes on.
func TestExternalGatewayRefusesMalformedBodies(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	bodies := map[string]string{
		"not JSON":          `{"model":`,
		"no model":          `{"messages":[{"role":"user","content":"hi"}]}`,
		"a repeated member": `{"model":"gpt","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"a":1,"a":2}}}]}`,
		"over 32 MiB":       `{"model":"gpt","messages":[{"role":"user","content":"` + strings.Repeat("a", 32<<20) + `"}]}`,
	}
	answers, url := rawAgent(t, "/chat/completions", bodies)
	deployExternal(t, h, w.admin, "ext-malformed", map[string]any{"url": url, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-malformed/invoke", w.admin, map[string]any{"goal": "go"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	for name, a := range <-answers {
		want := http.StatusBadRequest
		if name == "over 32 MiB" {
			want = http.StatusRequestEntityTooLarge
		}
		if msg, typ := openAIError([]byte(a.body)); a.status != want || msg == "" || typ == "" {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
	if n := ms.Count(); n != 0 {
		t.Errorf("the model got %d requests", n)
	}
}

// rawAnswer is the gateway's answer to a body a rawAgent sent.
type rawAnswer struct {
	status int
	body   string
}

// postGateway POSTs body, as it is, to the gateway's OpenAI path with
// the run's token, and returns the answer (status 0 and the error's words
// when there is none).
func postGateway(ctx context.Context, in goagent.Invocation, path, body string) rawAnswer {
	req, _ := http.NewRequestWithContext(ctx, "POST", in.Gateway.OpenAIBaseURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+in.Gateway.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rawAnswer{0, err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, string(b)}
}

// rawAgent serves an external agent that POSTs each of bodies, as it is,
// to the gateway's OpenAI path and answers its run once all are answered;
// the answers arrive on the channel, by the bodies' names.
func rawAgent(t *testing.T, path string, bodies map[string]string) (<-chan map[string]rawAnswer, string) {
	answers := make(chan map[string]rawAnswer, 1)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		got := map[string]rawAnswer{}
		for name, body := range bodies {
			got[name] = postGateway(r.Context(), in, path, body)
		}
		answers <- got
		fmt.Fprint(rw, `{"output": {"ok": true}}`)
	}))
	t.Cleanup(agentSrv.Close)
	return answers, agentSrv.URL
}

// TestExternalResponsesAPINotServed: a provider that serves no Responses
// API answers an agent's Responses request 404; the agent gets that answer
// as it is, and the completion's step says what to do about it.
func TestExternalResponsesAPINotServed(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Error(http.StatusNotFound, "404 page not found")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	answers, url := rawAgent(t, "/responses", map[string]string{"responses": `{"model":"gpt","input":"hi"}`})
	deployExternal(t, h, w.admin, "ext-responses", map[string]any{"url": url, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-responses/invoke", w.admin, map[string]any{"goal": "go"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if a := (<-answers)["responses"]; a.status != http.StatusNotFound || !strings.Contains(a.body, "404 page not found") {
		t.Errorf("the agent got %d %s, want the provider's 404", a.status, a.body)
	}
	if len(wf.Steps) == 0 || wf.Steps[0].ErrorCode != "llm_error" ||
		!strings.Contains(wf.Steps[0].Error, "the model answered 404") || !strings.Contains(wf.Steps[0].Error, "setOpenAIAPI('chat_completions')") {
		t.Errorf("steps %+v, want the completion's 404 with what to do about it", wf.Steps)
	}
}

// TestExternalGatewayRefusesAnotherProvidersModel: a request to the
// OpenAI endpoints for an Anthropic model is the agent's mistake: 400 in
// the provider's shape, which SDKs do not retry (a 5xx they retry, each
// retry another step), without reaching the model.
func TestExternalGatewayRefusesAnotherProvidersModel(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	answers, url := rawAgent(t, "/chat/completions", map[string]string{"chat": `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`})
	deployExternal(t, h, w.admin, "ext-provider", map[string]any{"url": url, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-provider/invoke", w.admin, map[string]any{"goal": "go"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	a := (<-answers)["chat"]
	if msg, typ := openAIError([]byte(a.body)); a.status != http.StatusBadRequest || typ != "invalid_request_error" || !strings.Contains(msg, "anthropic model") {
		t.Errorf("the agent got %d %s, want 400 saying the model is an Anthropic one", a.status, a.body)
	}
	if n := ms.Count(); n != 0 {
		t.Errorf("the model got %d requests", n)
	}
}

// slowCreationWorld is the fraud world on a harness whose store takes
// 300 ms to store a new workflow, its model answering "ok".
func slowCreationWorld(t *testing.T) (*harness, *fraudWorld) {
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms, func(o *workflow.Options) {
		o.Store = slowCreation{Store: o.Store, delay: 300 * time.Millisecond}
	}))
	return h, newFraudWorld(t, h)
}

// slowCreation is a store whose storing of a new workflow takes a while,
// as a loaded database's may: the execution begins meanwhile.
type slowCreation struct {
	workflow.Store
	delay time.Duration
}

func (s slowCreation) CreateWorkflow(ctx context.Context, w *workflow.Workflow, rec *audit.Record) error {
	time.Sleep(s.delay)
	return s.Store.CreateWorkflow(ctx, w, rec)
}

// TestExternalCompletionWaitsForTheWorkflowToBeStored: with the store slow
// to create the workflow, the agent is invoked once it is stored, and its
// first completion is recorded, not refused as a lost lease.
func TestExternalCompletionWaitsForTheWorkflowToBeStored(t *testing.T) {
	t.Parallel()
	h, w := slowCreationWorld(t)
	statuses := make(chan int, 1)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		req, _ := http.NewRequestWithContext(r.Context(), "POST", in.Gateway.OpenAIBaseURL+"/chat/completions",
			strings.NewReader(`{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+in.Gateway.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			statuses <- 0
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses <- resp.StatusCode
		fmt.Fprint(rw, `{"output": {"ok": true}}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-slow", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}, "max_attempts": 1})
	r := h.do("POST", "/v1/agents/ext-slow/invoke", w.admin, map[string]any{"goal": "go"})
	var wf externalWorkflow
	r.json(t, &wf)
	if st := <-statuses; st != http.StatusOK {
		t.Errorf("the gateway answered the completion %d, want 200", st)
	}
	if r.Status != 200 || wf.Status != "completed" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	got := h.do("GET", "/v1/workflows/"+wf.ID, w.admin, nil)
	var full externalWorkflow
	got.json(t, &full)

	if len(full.Steps) != 2 || full.Steps[0].Kind != "completion" || full.Steps[0].Status != "ok" {
		t.Errorf("steps %s, want the completion's and the attempt's", got.Body)
	}
}

// TestExternalGatewayUnservedPaths: a request to an endpoint the gateway
// does not serve (an SDK's embeddings or token count) or with another
// method is refused in its provider's error shape, saying what is served.
func TestExternalGatewayUnservedPaths(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/gateway/openai/v1/embeddings", 404},
		{"GET", "/gateway/openai/v1/chat/completions", 405},
		{"POST", "/gateway/anthropic/v1/messages/count_tokens", 404},
	} {
		r := h.do(c.method, c.path, "apr_any", nil)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		json.Unmarshal(r.Body, &e)
		anthropic := strings.Contains(c.path, "/anthropic/")
		if r.Status != c.status || e.Error.Type == "" || (e.Type == "error") != anthropic ||
			(c.status == 404 && !strings.Contains(e.Error.Message, "the run gateway serves POST …/openai/v1/chat/completions")) {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
}
