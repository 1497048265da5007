package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaiopt "github.com/openai/openai-go/v3/option"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/workflow"
)

// flakyAgent runs the Go recipe's loop and then answers the attempts
// before last with a 503: a crash after its work, so the next attempt
// repeats every request. goal, when set, changes the goal an attempt
// works on.
func flakyAgent(t *testing.T, failFirst int, goal func(attempt int, g string) string) (*httptest.Server, *atomic.Int32) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := attempts.Add(1)
		var in goagent.Invocation
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(rw, err.Error(), 400)
			return
		}
		if goal != nil {
			in.Goal = goal(in.Run.Attempt, in.Goal)
		}
		answer, err := goagent.Run(r.Context(), in, "gpt", 5)
		if err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		if int(n) <= failFirst {
			http.Error(rw, "crashed after its work", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(rw).Encode(map[string]any{"output": map[string]any{"answer": answer}})
	}))
	t.Cleanup(srv.Close)
	return srv, &attempts
}

func externalRunOf(t *testing.T, h *harness, token, id string) externalWorkflow {
	t.Helper()
	var wf externalWorkflow
	h.do("GET", "/v1/workflows/"+id, token, nil).json(t, &wf)
	return wf
}

func stepList(wf externalWorkflow) string {
	var out []string
	for _, s := range wf.Steps {
		e := fmt.Sprintf("%d:%s:%s", s.Attempt, s.Kind, s.Status)
		if s.Journal != "" {
			e += ":" + s.Journal
		}
		out = append(out, e)
	}
	return strings.Join(out, " ")
}

// TestExternalJournalServesARetriedAttempt: an agent that made its write
// and then failed is retried; the new attempt repeats every request and
// gets each from the record, so the model is not asked again and the
// write is sent once.
func TestExternalJournalServesARetriedAttempt(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(
		llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud"}`)),
		llmtest.Text("case opened"),
	))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	srv, attempts := flakyAgent(t, 1, nil)
	deployExternal(t, h, w.admin, "ext-journal", map[string]any{"url": srv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-journal/invoke", w.admin, map[string]any{"goal": "open a case for tx-1"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if w.cases.Load() != 1 || ms.Count() != 2 || attempts.Load() != 2 {
		t.Errorf("cases %d, model requests %d, attempts %d; want 1, 2, 2", w.cases.Load(), ms.Count(), attempts.Load())
	}
	full := externalRunOf(t, h, w.admin, wf.ID)
	if got, want := stepList(full), "1:completion:ok 1:call:ok 1:completion:ok 1:attempt:error 2:attempt:ok"; got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	if a := full.Steps[3]; a.ErrorCode != workflow.ErrorCodeAgentError {
		t.Errorf("attempt 1: %+v", a)
	}
	if a := full.Steps[4]; !strings.Contains(string(a.Result), `"journal_served":3`) {
		t.Errorf("attempt 2 does not say it was served its 3 exchanges from the journal: %s", a.Result)
	}
}

// TestExternalJournalDiverges: a new attempt that asks something else
// goes live from there (its step says so), while a write identical to one
// already made is still answered from the record, never sent twice.
func TestExternalJournalDiverges(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(
		llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud"}`)),
		llmtest.Text("case opened"),
		llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud"}`)),
		llmtest.Text("case opened again"),
	))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	srv, _ := flakyAgent(t, 1, func(attempt int, g string) string {
		if attempt > 1 {
			return g + " (at " + fmt.Sprint(attempt) + ")"
		}
		return g
	})
	deployExternal(t, h, w.admin, "ext-diverge", map[string]any{"url": srv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-diverge/invoke", w.admin, map[string]any{"goal": "open a case for tx-1"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if w.cases.Load() != 1 || ms.Count() != 4 {
		t.Errorf("cases %d, model requests %d; want 1, 4", w.cases.Load(), ms.Count())
	}
	full := externalRunOf(t, h, w.admin, wf.ID)
	want := "1:completion:ok 1:call:ok 1:completion:ok 1:attempt:error 2:completion:ok:diverged 2:completion:ok 2:attempt:ok"
	if got := stepList(full); got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
}

// TestExternalGovernance: the invoker's scopes and the version's policies
// refuse calls (the agent sees an isError result and goes on), and
// limits.max_llm_tokens refuses a completion in the provider's error
// shape, ending the run limit_exceeded.
func TestExternalGovernance(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		if strings.Contains(r.Last().Content, "denied") || r.Last().Role == "tool" {
			return llmtest.Text("I could not: " + r.Last().Content)
		}
		return llmtest.Calls(llmtest.Call("cases__createCase", `{"transaction":"tx-1","queue":"fraud"}`))
	})
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	agentSrv := httptest.NewServer(goagent.Handler("gpt", 5))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-policy", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"},
		"policies": map[string]any{"financial": map[string]any{"allow": "args.queue != 'fraud'"}}})
	r := h.do("POST", "/v1/agents/ext-policy/invoke", w.admin, map[string]any{"goal": "open a case"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "answered" || !strings.Contains(string(wf.Output), "policy financial denied") || w.cases.Load() != 0 {
		t.Fatalf("policy: %d %s (cases %d)", r.Status, r.Body, w.cases.Load())
	}
	if got := stepList(externalRunOf(t, h, w.admin, wf.ID)); got != "1:completion:ok 1:call:denied 1:completion:ok 1:attempt:ok" {
		t.Errorf("policy steps %s", got)
	}

	narrow := h.token("acme", "agents:invoke workflows:read tool:payments")
	deployExternal(t, h, w.admin, "ext-scope", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"}})
	r = h.do("POST", "/v1/agents/ext-scope/invoke", narrow, map[string]any{"goal": "open a case"})
	r.json(t, &wf)
	if r.Status != 200 || !strings.Contains(string(wf.Output), "lacks scope tool:cases") || w.cases.Load() != 0 {
		t.Fatalf("scope: %d %s", r.Status, r.Body)
	}

	deployExternal(t, h, w.admin, "ext-tokens", map[string]any{"url": agentSrv.URL, "tools": []string{"cases"}, "models": []string{"gpt"},
		"limits": map[string]any{"max_llm_tokens": 10}})
	r = h.do("POST", "/v1/agents/ext-tokens/invoke", w.admin, map[string]any{"goal": "open a case"})
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "limit_exceeded" {
		t.Fatalf("tokens: %d %s", r.Status, r.Body)
	}
	full := externalRunOf(t, h, w.admin, wf.ID)
	var limited *externalStep
	for i := range full.Steps {
		if full.Steps[i].Status == "limit_exceeded" {
			limited = &full.Steps[i]
		}
	}
	if limited == nil || !strings.Contains(limited.Error, "max_llm_tokens (10)") {
		t.Errorf("tokens steps %s", stepList(full))
	}
}

// streamingAgent serves an external agent that streams one Chat Completion
// of its goal (openai-go) and answers with its text; chunk, when set, is
// called at each chunk as it arrives.
func streamingAgent(t *testing.T, chunk func()) string {
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		client := openai.NewClient(openaiopt.WithBaseURL(in.Gateway.OpenAIBaseURL), openaiopt.WithAPIKey(in.Gateway.Token))
		stream := client.Chat.Completions.NewStreaming(r.Context(), openai.ChatCompletionNewParams{
			Model: "gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(in.Goal)}})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
			if chunk != nil {
				chunk()
			}
		}
		if err := stream.Err(); err != nil || len(acc.Choices) == 0 {
			http.Error(rw, fmt.Sprint("stream: ", err), 500)
			return
		}
		json.NewEncoder(rw).Encode(map[string]any{"output": map[string]any{"answer": acc.Choices[0].Message.Content}})
	}))
	t.Cleanup(agentSrv.Close)
	return agentSrv.URL
}

// TestExternalStreamsAndAnthropic: a streamed completion reaches the agent
// as it arrives (its first chunk before the model has finished), and an
// Anthropic Messages request goes through the Anthropic-compatible
// endpoint; both are recorded with their tokens.
func TestExternalStreamsAndAnthropic(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Answer{Text: "streamed words arrive one by one", HoldLast: hold}))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	var once sync.Once
	deployExternal(t, h, w.admin, "ext-stream", map[string]any{"url": streamingAgent(t, func() {
		once.Do(func() { close(hold) }) // the first chunk came while the model held its last
	}), "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-stream/invoke", w.admin, map[string]any{"goal": "say something"})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || !strings.Contains(string(wf.Output), "one by one") {
		t.Fatalf("stream: %d %s", r.Status, r.Body)
	}
	if s := externalRunOf(t, h, w.admin, wf.ID).Steps[0]; s.Kind != "completion" || s.InputTokens == 0 {
		t.Errorf("streamed completion step %+v", s)
	}

	as := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text("bonjour")))
	h2 := newHarness(t, withExternal(t, as))
	w2 := newFraudWorld(t, h2)
	claude := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in struct {
			Goal    string `json:"goal"`
			Gateway struct {
				Token            string `json:"token"`
				AnthropicBaseURL string `json:"anthropic_base_url"`
			} `json:"gateway"`
		}
		json.NewDecoder(r.Body).Decode(&in)
		client := anthropic.NewClient(anthropicopt.WithBaseURL(in.Gateway.AnthropicBaseURL), anthropicopt.WithAPIKey(in.Gateway.Token))
		msg, err := client.Messages.New(context.WithoutCancel(r.Context()), anthropic.MessageNewParams{Model: "gpt", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(in.Goal))}})
		if err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		json.NewEncoder(rw).Encode(map[string]any{"output": map[string]any{"answer": msg.Content[0].Text}})
	}))
	t.Cleanup(claude.Close)
	deployExternal(t, h2, w2.admin, "ext-claude", map[string]any{"url": claude.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r = h2.do("POST", "/v1/agents/ext-claude/invoke", w2.admin, map[string]any{"goal": "say hello in French"})
	r.json(t, &wf)
	if r.Status != 200 || !strings.Contains(string(wf.Output), "bonjour") {
		t.Fatalf("anthropic: %d %s", r.Status, r.Body)
	}
	if s := externalRunOf(t, h2, w2.admin, wf.ID).Steps[0]; s.Kind != "completion" || s.OutputTokens == 0 {
		t.Errorf("anthropic completion step %+v", s)
	}
}

// TestExternalCutStreamEndsWithAnError: a streamed answer the model cuts
// short reaches the agent ending with an error event in the provider's
// shape, so that its SDK fails the stream instead of taking the part it
// got for the whole answer; the completion's step says it was cut short.
func TestExternalCutStreamEndsWithAnError(t *testing.T) {
	t.Parallel()
	cut := llmtest.Sequence(llmtest.Answer{Text: "a long answer the model never finishes", Truncate: true})
	for _, tc := range []struct {
		name   string
		server func(testing.TB, llmtest.Script, ...llmtest.Option) *llmtest.Server
		stream func(ctx context.Context, in goagent.Invocation, anthropicURL string) error
	}{
		{"openai", llmtest.NewOpenAIServer, func(ctx context.Context, in goagent.Invocation, _ string) error {
			client := openai.NewClient(openaiopt.WithBaseURL(in.Gateway.OpenAIBaseURL), openaiopt.WithAPIKey(in.Gateway.Token))
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: "gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(in.Goal)}})
			for stream.Next() {
			}
			return stream.Err()
		}},
		{"anthropic", llmtest.NewAnthropicServer, func(ctx context.Context, in goagent.Invocation, anthropicURL string) error {
			client := anthropic.NewClient(anthropicopt.WithBaseURL(anthropicURL), anthropicopt.WithAPIKey(in.Gateway.Token))
			stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "gpt", MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(in.Goal))}})
			for stream.Next() {
			}
			return stream.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, withExternal(t, tc.server(t, cut)))
			w := newFraudWorld(t, h)
			errs := make(chan error, 1)
			agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				var in struct {
					goagent.Invocation
					Gateway struct {
						AnthropicBaseURL string `json:"anthropic_base_url"`
					} `json:"gateway"`
				}
				raw, _ := io.ReadAll(r.Body)
				json.Unmarshal(raw, &in.Invocation)
				json.Unmarshal(raw, &in)
				errs <- tc.stream(r.Context(), in.Invocation, in.Gateway.AnthropicBaseURL)
				fmt.Fprint(rw, `{"output": "done"}`)
			}))
			t.Cleanup(agentSrv.Close)
			deployExternal(t, h, w.admin, "ext-cut", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
			r := h.do("POST", "/v1/agents/ext-cut/invoke", w.admin, map[string]any{"goal": "say a lot"})
			var wf externalWorkflow
			r.json(t, &wf)
			if err := <-errs; err == nil || !strings.Contains(err.Error(), "cut short") {
				t.Errorf("the agent's stream ended with %v, want an error saying it was cut short", err)
			}
			if s := externalRunOf(t, h, w.admin, wf.ID).Steps[0]; s.Kind != "completion" || s.Status != "error" || !strings.Contains(s.Error, "cut short") {
				t.Errorf("completion step %+v", s)
			}
		})
	}
}

// TestExternalAgentGoneCancelsItsCompletion: an agent that gives up on a
// streamed answer (its client's time-out) ends the request to the model,
// whose step says so, and its next request is made at once rather than
// after the model's own time-out.
func TestExternalAgentGoneCancelsItsCompletion(t *testing.T) {
	t.Parallel()
	never := make(chan struct{})
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Answer{Text: "a stream that stalls", HoldLast: never}, llmtest.Text("again")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	answers := make(chan string, 1)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		client := openai.NewClient(openaiopt.WithBaseURL(in.Gateway.OpenAIBaseURL), openaiopt.WithAPIKey(in.Gateway.Token), openaiopt.WithMaxRetries(0))
		ctx, giveUp := context.WithCancel(r.Context())
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(in.Goal)}})
		stream.Next()
		giveUp()
		stream.Close()
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")}})
		if err != nil {
			answers <- err.Error()
		} else {
			answers <- resp.Choices[0].Message.Content
		}
		fmt.Fprint(rw, `{"output": "done"}`)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-gone", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-gone/invoke", w.admin, map[string]any{"goal": "say a lot"})
	var wf externalWorkflow
	r.json(t, &wf)
	if a := <-answers; a != "again" {
		t.Errorf("the agent's next request got %q, want the model's answer", a)
	}
	steps := externalRunOf(t, h, w.admin, wf.ID).Steps
	if got := stepList(externalWorkflow{Steps: steps}); got != "1:completion:error 1:completion:ok 1:attempt:ok" {
		t.Fatalf("steps %s", got)
	}
	if !strings.Contains(steps[0].Error, "the agent closed its request") {
		t.Errorf("the given-up completion's step %+v", steps[0])
	}
}

// TestExternalCancelReachesTheAgent: cancelling the workflow cancels the
// request to the agent, and the run's token no longer opens the gateway.
func TestExternalCancelReachesTheAgent(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	started, cancelled := make(chan string, 1), make(chan struct{})
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		started <- in.Gateway.Token
		<-r.Context().Done()
		close(cancelled)
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-cancel", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-cancel/invoke", w.admin, map[string]any{"goal": "wait"}, "Prefer", "respond-async")
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 202 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	token := <-started
	if r := h.do("POST", "/v1/workflows/"+wf.ID+"/cancel", w.admin, nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	<-cancelled
	done := externalRunOf(t, h, w.admin, wf.ID)
	if done.Status != "cancelled" {
		t.Errorf("after cancel: %s %s", done.Status, stepList(done))
	}
	r = h.do("POST", "/gateway/openai/v1/chat/completions", token, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != 401 {
		t.Errorf("a gateway call after the cancel: %d %s", r.Status, r.Body)
	}
}

// TestExternalBadInput: a model not in the version's models, the model's
// own 4xx, a call over max_tool_calls, an answer of 20 MB and an agent
// that never answers each end as a clear step or workflow error.
func TestExternalBadInput(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		switch {
		case strings.Contains(r.Last().Content, "refuse"):
			return llmtest.Error(400, "This model's maximum context length is 8 tokens")
		case strings.Contains(r.Last().Content, "max_tool_calls"):
			return llmtest.Text("I may make no more calls.")
		case r.Last().Role == "tool":
			return llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-2"}`))
		}
		return llmtest.Calls(llmtest.Call("payments__getTransaction", `{"id":"tx-1"}`))
	})
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	errs := make(chan string, 4)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		model := "gpt"
		if strings.Contains(in.Goal, "other model") {
			model = "gpt-5-secret"
		}
		answer, err := goagent.Run(r.Context(), in, model, 4)
		if err != nil {
			errs <- err.Error()
			json.NewEncoder(rw).Encode(map[string]any{"output": map[string]any{"error": err.Error()}, "outcome": "gave_up"})
			return
		}
		json.NewEncoder(rw).Encode(map[string]any{"output": map[string]any{"answer": answer}})
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-bad", map[string]any{"url": agentSrv.URL, "tools": []string{"payments"}, "models": []string{"gpt"},
		"limits": map[string]any{"max_tool_calls": 1}})

	r := h.do("POST", "/v1/agents/ext-bad/invoke", w.admin, map[string]any{"goal": "use the other model"})
	var wf externalWorkflow
	r.json(t, &wf)
	if e := <-errs; !strings.Contains(e, "400") || !strings.Contains(e, "not one of this agent version's models") {
		t.Errorf("another model: the agent got %q", e)
	}
	if s := externalRunOf(t, h, w.admin, wf.ID).Steps[0]; s.ErrorCode != workflow.GatewayModelNotAllowed {
		t.Errorf("another model: step %+v", s)
	}

	h.do("POST", "/v1/agents/ext-bad/invoke", w.admin, map[string]any{"goal": "refuse this"}).json(t, &wf)
	if e := <-errs; !strings.Contains(e, "maximum context length") {
		t.Errorf("the model's 400: the agent got %q", e)
	}
	if s := externalRunOf(t, h, w.admin, wf.ID).Steps[0]; s.Status != "error" || s.ErrorCode != "llm_error" || !strings.Contains(s.Error, "maximum context length") {
		t.Errorf("the model's 400: step %+v", s)
	}

	r = h.do("POST", "/v1/agents/ext-bad/invoke", w.admin, map[string]any{"goal": "look twice"})
	r.json(t, &wf)
	if wf.Outcome != "limit_exceeded" || w.payments.Load() != 1 {
		t.Errorf("max_tool_calls: %s (payments %d)", r.Body, w.payments.Load())
	}
	select {
	case e := <-errs:
		t.Errorf("max_tool_calls: the agent failed: %s", e)
	default:
	}

	huge := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Write([]byte(`{"output": "`))
		rw.Write([]byte(strings.Repeat("x", 20<<20)))
		rw.Write([]byte(`"}`))
	}))
	t.Cleanup(huge.Close)
	deployExternal(t, h, w.admin, "ext-huge", map[string]any{"url": huge.URL, "tools": []string{"payments"}, "models": []string{"gpt"}})
	h.do("POST", "/v1/agents/ext-huge/invoke", w.admin, map[string]any{"goal": "go"}).json(t, &wf)
	if wf.Status != "failed" || wf.Error == nil || wf.Error.ErrorCode != workflow.ErrorCodeAgentError || !strings.Contains(wf.Error.Detail, "MiB") {
		t.Errorf("20 MB: %+v", wf)
	}

	silent := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read, so that the server notices the request cancelled
		<-r.Context().Done()
	}))
	t.Cleanup(silent.Close)
	deployExternal(t, h, w.admin, "ext-silent", map[string]any{"url": silent.URL, "tools": []string{"payments"}, "models": []string{"gpt"}, "timeout": "1s"})
	h.do("POST", "/v1/agents/ext-silent/invoke", w.admin, map[string]any{"goal": "go"}).json(t, &wf)
	if wf.Status != "failed" || wf.Outcome != "timed_out" || wf.Error == nil || wf.Error.ErrorCode != "timeout" {
		t.Errorf("never answers: %+v", wf)
	}
}

// TestExternalJournalSendsWhatWasNotSent: a call the tool never received
// (its circuit was open) is not in the run's record, and a new attempt's
// repeat of it is made, as after a restart, rather than served the old
// refusal: once the circuit lets a probe through, the run gets past it.
func TestExternalJournalSendsWhatWasNotSent(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		if last := r.Last(); last.Role == "tool" {
			return llmtest.Text("result: " + last.Content)
		}
		if strings.Contains(r.Messages[0].Content, "trip") {
			return llmtest.Calls(llmtest.Call("ledger__getEntry", `{"id":"trip"}`))
		}
		return llmtest.Calls(llmtest.Call("ledger__getEntry", `{"id":"e-1"}`))
	})
	h := newHarness(t, withExternal(t, ms))
	w := newFraudWorld(t, h)
	var sent atomic.Int32
	ledger := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(rw, `{"openapi": "3.0.3", "info": {"title": "ledger", "version": "1"}, "servers": [{"url": "http://%s"}],
 "paths": {"/entries/{id}": {"get": {"operationId": "getEntry",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}}}}`, r.Host)
			return
		}
		sent.Add(1)
		if strings.HasSuffix(r.URL.Path, "/trip") {
			http.Error(rw, `{"error": "down"}`, http.StatusInternalServerError)
			return
		}
		fmt.Fprint(rw, `{"amount": 5}`)
	}))
	t.Cleanup(ledger.Close)
	if r := h.do("POST", "/v1/tools", w.admin, map[string]any{"name": "ledger", "type": "openapi", "spec_url": ledger.URL + "/openapi.json",
		"limits": map[string]any{"circuit": map[string]any{"failures": 1, "window": "1m", "open_for": "300ms"}}}); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in goagent.Invocation
		json.NewDecoder(r.Body).Decode(&in)
		answer, err := goagent.Run(r.Context(), in, "gpt", 5)
		if err != nil || strings.Contains(answer, "circuit") {
			http.Error(rw, fmt.Sprint("the ledger is unavailable: ", answer, err), http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(rw).Encode(map[string]any{"output": map[string]any{"answer": answer}})
	}))
	t.Cleanup(agentSrv.Close)
	deployExternal(t, h, w.admin, "ext-circuit", map[string]any{"url": agentSrv.URL, "tools": []string{"ledger"}, "models": []string{"gpt"}, "max_attempts": 10})
	var wf externalWorkflow
	h.do("POST", "/v1/agents/ext-circuit/invoke", w.admin, map[string]any{"goal": "trip the circuit"}).json(t, &wf)
	if wf.Status != "completed" || sent.Load() != 1 {
		t.Fatalf("the run that trips the circuit: %s/%s, %d sent", wf.Status, wf.Outcome, sent.Load())
	}
	h.do("POST", "/v1/agents/ext-circuit/invoke", w.admin, map[string]any{"goal": "read entry e-1"}).json(t, &wf)
	full := externalRunOf(t, h, w.admin, wf.ID)
	if wf.Status != "completed" || !strings.Contains(string(wf.Output), "amount") || sent.Load() != 2 {
		t.Errorf("run %s/%s %s (%d sent): %s", wf.Status, wf.Outcome, wf.Output, sent.Load(), stepList(full))
	}
}
