package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaiopt "github.com/openai/openai-go/v3/option"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// cutInvocation is what the cut-stream agents read of an invocation.
type cutInvocation struct {
	Goal    string `json:"goal"`
	Gateway struct {
		Token            string `json:"token"`
		OpenAIBaseURL    string `json:"openai_base_url"`
		AnthropicBaseURL string `json:"anthropic_base_url"`
	} `json:"gateway"`
}

// cutProvider is one provider's agent of the cut-stream tests: stream
// starts a streamed completion and ends it as the agent's own doing (closed
// after some text, when give up is set) or the model's (read to its end),
// calling began (when set) as its first event comes; ask makes a plain
// completion and returns its status (200 when answered).
type cutProvider struct {
	name   string
	server func(testing.TB, llmtest.Script, ...llmtest.Option) *llmtest.Server
	stream func(ctx context.Context, in cutInvocation, giveUp bool, began func())
	ask    func(ctx context.Context, in cutInvocation) (int, string)
}

var cutProviders = []cutProvider{
	{"openai", llmtest.NewOpenAIServer,
		func(ctx context.Context, in cutInvocation, giveUp bool, began func()) {
			client := openai.NewClient(openaiopt.WithBaseURL(in.Gateway.OpenAIBaseURL), openaiopt.WithAPIKey(in.Gateway.Token), openaiopt.WithMaxRetries(0))
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: "gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(in.Goal)}})
			defer stream.Close()
			for stream.Next() {
				if began != nil {
					began()
					began = nil
				}
				if c := stream.Current(); giveUp && len(c.Choices) > 0 && c.Choices[0].FinishReason != "" {
					return // the whole text came; the usage chunk is held
				}
			}
		},
		func(ctx context.Context, in cutInvocation) (int, string) {
			client := openai.NewClient(openaiopt.WithBaseURL(in.Gateway.OpenAIBaseURL), openaiopt.WithAPIKey(in.Gateway.Token), openaiopt.WithMaxRetries(0))
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")}})
			var oe *openai.Error
			if errors.As(err, &oe) {
				return oe.StatusCode, oe.Code + ": " + oe.Message
			}
			if err != nil {
				return 0, err.Error()
			}
			return 200, ""
		}},
	{"anthropic", llmtest.NewAnthropicServer,
		func(ctx context.Context, in cutInvocation, giveUp bool, began func()) {
			client := anthropic.NewClient(anthropicopt.WithBaseURL(in.Gateway.AnthropicBaseURL), anthropicopt.WithAPIKey(in.Gateway.Token), anthropicopt.WithMaxRetries(0))
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "gpt", MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(in.Goal))}})
			defer stream.Close()
			for stream.Next() {
				if began != nil {
					began()
					began = nil
				}
				if giveUp && stream.Current().Type == "message_delta" {
					return // the whole text came; message_stop is held
				}
			}
		},
		func(ctx context.Context, in cutInvocation) (int, string) {
			client := anthropic.NewClient(anthropicopt.WithBaseURL(in.Gateway.AnthropicBaseURL), anthropicopt.WithAPIKey(in.Gateway.Token), anthropicopt.WithMaxRetries(0))
			_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt", MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("again"))}})
			var ae *anthropic.Error
			if errors.As(err, &ae) {
				return ae.StatusCode, string(ae.RawJSON())
			}
			if err != nil {
				return 0, err.Error()
			}
			return 200, ""
		}},
}

// cutAgent serves an agent that streams a completion cut short (by the
// model, or by itself when giveUp), then asks for another; the status and
// words of that second answer go to asked.
func cutAgent(t *testing.T, p cutProvider, giveUp bool, asked chan<- string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in cutInvocation
		raw, _ := io.ReadAll(r.Body)
		json.Unmarshal(raw, &in)
		p.stream(r.Context(), in, giveUp, nil)
		status, words := p.ask(r.Context(), in)
		asked <- fmt.Sprintf("%d %s", status, words)
		fmt.Fprint(rw, `{"output": "done"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// cutUsage is a workflow's usage as GET /v1/workflows/{id} shows it.
type cutUsage struct {
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		Completions  int   `json:"completions"`
		Cost         *struct {
			Amount   float64 `json:"amount"`
			Currency string  `json:"currency"`
		} `json:"cost"`
	} `json:"usage"`
}

// TestExternalCutStreamCountsItsTokens: a streamed completion cut short,
// by the model's connection breaking or by the agent closing its request,
// still counts the tokens the model produced: those the provider reported
// (Anthropic's message_start carries the input tokens, its message_delta
// the output tokens), the others estimated from the request and from the
// text relayed (an OpenAI stream's usage comes in its last chunk). Its
// step records them and their cost, the workflow's usage has them, and
// max_llm_tokens counts them: the agent's next request is refused in its
// provider's error shape.
func TestExternalCutStreamCountsItsTokens(t *testing.T) {
	t.Parallel()
	for _, p := range cutProviders {
		for _, tc := range []struct {
			name   string
			answer llmtest.Answer
			giveUp bool
			// says is what the cut completion's step says of its tokens.
			says []string
		}{
			{"model breaks", llmtest.Answer{Text: "a long answer the model never finishes", Truncate: true}, false, map[string][]string{
				"openai":    {"input tokens estimated", "output tokens estimated"},
				"anthropic": {"input tokens as the model reported", "output tokens estimated"},
			}[p.name]},
			{"agent closes", llmtest.Answer{Text: "a long answer the agent stops reading", HoldLast: make(chan struct{})}, true, map[string][]string{
				"openai":    {"input tokens estimated", "output tokens estimated"},
				"anthropic": {"input tokens as the model reported", "output tokens as the model reported"},
			}[p.name]},
		} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				ms := p.server(t, llmtest.Sequence(tc.answer, llmtest.Text("again")))
				h := newHarness(t, withExternal(t, ms))
				w := newFraudWorld(t, h)
				asked := make(chan string, 1)
				deployExternal(t, h, w.admin, "ext-cut", map[string]any{"url": cutAgent(t, p, tc.giveUp, asked),
					"tools": []string{"payments"}, "models": []string{"gpt"}, "limits": map[string]any{"max_llm_tokens": 8}})
				r := h.do("POST", "/v1/agents/ext-cut/invoke", w.admin, map[string]any{"goal": "say a lot"})
				var wf externalWorkflow
				r.json(t, &wf)
				if r.Status != 200 {
					t.Fatalf("invoke: %d %s", r.Status, r.Body)
				}
				if got := <-asked; !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "max_llm_tokens (8) reached") {
					t.Errorf("the request after the cut stream got %q, want a 403 refusal for max_llm_tokens", got)
				}
				if ms.Count() != 1 {
					t.Errorf("the model was asked %d times, want once", ms.Count())
				}
				if wf.Outcome != "limit_exceeded" {
					t.Errorf("outcome %q, want limit_exceeded", wf.Outcome)
				}
				full := externalRunOf(t, h, w.admin, wf.ID)
				if got, want := stepList(full), "1:completion:error 1:completion:limit_exceeded 1:attempt:ok"; got != want {
					t.Fatalf("steps %s, want %s", got, want)
				}
				cut := full.Steps[0]
				if cut.InputTokens <= 0 || cut.OutputTokens <= 0 || cut.InputTokens+cut.OutputTokens < 8 {
					t.Errorf("the cut completion's step counts %d input and %d output tokens, want both counted", cut.InputTokens, cut.OutputTokens)
				}
				for _, words := range tc.says {
					if !strings.Contains(cut.Error, words) {
						t.Errorf("the cut completion's step says %q, want it to say %q", cut.Error, words)
					}
				}
				var u, answered cutUsage
				h.do("GET", "/v1/workflows/"+wf.ID, w.admin, nil).json(t, &u)
				if u.Usage == nil || u.Usage.InputTokens != cut.InputTokens || u.Usage.OutputTokens != cut.OutputTokens ||
					u.Usage.Completions != 1 || u.Usage.Cost == nil || u.Usage.Cost.Amount <= 0 {
					t.Errorf("workflow usage %+v, want the cut completion's %d and %d tokens, priced", u.Usage, cut.InputTokens, cut.OutputTokens)
				}
				// The invocation's answer has the sums its execution counted:
				// the same as the stored completions'.
				r.json(t, &answered)
				if answered.Usage == nil || u.Usage == nil || answered.Usage.InputTokens != u.Usage.InputTokens ||
					answered.Usage.OutputTokens != u.Usage.OutputTokens || answered.Usage.Completions != u.Usage.Completions ||
					answered.Usage.Cost == nil || u.Usage.Cost == nil || *answered.Usage.Cost != *u.Usage.Cost {
					t.Errorf("the invocation answered usage %+v, the stored completions sum to %+v", answered.Usage, u.Usage)
				}
			})
		}
	}
}

// TestExternalCutStreamCountsTowardTheDailyBudget: the tokens of a stream
// the model cut short count toward the model's daily token budget, so the
// agent's next request, past it, is refused.
func TestExternalCutStreamCountsTowardTheDailyBudget(t *testing.T) {
	t.Parallel()
	for _, p := range cutProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ms := p.server(t, llmtest.Sequence(llmtest.Answer{Text: "a long answer the model never finishes", Truncate: true}, llmtest.Text("again")))
			h := newHarness(t, withExternal(t, ms, withDailyBudget(8)))
			w := newFraudWorld(t, h)
			asked := make(chan string, 1)
			deployExternal(t, h, w.admin, "ext-cut-daily", map[string]any{"url": cutAgent(t, p, false, asked),
				"tools": []string{"payments"}, "models": []string{"gpt"}})
			r := h.do("POST", "/v1/agents/ext-cut-daily/invoke", w.admin, map[string]any{"goal": "say a lot"})
			var wf externalWorkflow
			r.json(t, &wf)
			if r.Status != 200 {
				t.Fatalf("invoke: %d %s", r.Status, r.Body)
			}
			if got := <-asked; !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "daily budget of 8 tokens") {
				t.Errorf("the request after the cut stream got %q, want a 403 refusal for the daily budget", got)
			}
			if ms.Count() != 1 || wf.Outcome != "limit_exceeded" {
				t.Errorf("model asked %d times, outcome %q; want once, limit_exceeded", ms.Count(), wf.Outcome)
			}
		})
	}
}

// TestExternalCutBeforeTheFirstEventCountsItsInput: an agent that closes
// its request once the model has it, before any of the answer came, still
// counts the input tokens the provider read, estimated from the request,
// and no output: the completion's step says so, the workflow's usage and
// cost have them, and max_llm_tokens counts them, so the agent's next
// request is refused.
func TestExternalCutBeforeTheFirstEventCountsItsInput(t *testing.T) {
	t.Parallel()
	// goal is 41 characters: with eight for its message, 13 tokens.
	const goal = "say a lot about the payments of this week"
	for _, p := range cutProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan struct{})
			ms := p.server(t, func(r llmtest.Request) llmtest.Answer {
				if r.N == 1 {
					close(got)
					return llmtest.Answer{Text: "an answer the agent does not wait for", Delay: time.Minute}
				}
				return llmtest.Text("again")
			})
			h := newHarness(t, withExternal(t, ms))
			w := newFraudWorld(t, h)
			asked := make(chan string, 1)
			agentSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				var in cutInvocation
				json.NewDecoder(r.Body).Decode(&in)
				ctx, leave := context.WithCancel(r.Context())
				go func() {
					// The agent goes once the model has its request.
					select {
					case <-got:
					case <-ctx.Done():
					}
					leave()
				}()
				p.stream(ctx, in, false, nil)
				status, words := p.ask(r.Context(), in)
				asked <- fmt.Sprintf("%d %s", status, words)
				fmt.Fprint(rw, `{"output": "done"}`)
			}))
			t.Cleanup(agentSrv.Close)
			deployExternal(t, h, w.admin, "ext-gone", map[string]any{"url": agentSrv.URL,
				"tools": []string{"payments"}, "models": []string{"gpt"}, "limits": map[string]any{"max_llm_tokens": 8}})
			r := h.do("POST", "/v1/agents/ext-gone/invoke", w.admin, map[string]any{"goal": goal})
			var wf externalWorkflow
			r.json(t, &wf)
			if r.Status != 200 {
				t.Fatalf("invoke: %d %s", r.Status, r.Body)
			}
			if got := <-asked; !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "max_llm_tokens (8) reached") {
				t.Errorf("the request after the one the agent left got %q, want a 403 refusal for max_llm_tokens", got)
			}
			if ms.Count() != 1 || wf.Outcome != "limit_exceeded" {
				t.Errorf("model asked %d times, outcome %q; want once, limit_exceeded", ms.Count(), wf.Outcome)
			}
			full := externalRunOf(t, h, w.admin, wf.ID)
			if got, want := stepList(full), "1:completion:error 1:completion:limit_exceeded 1:attempt:ok"; got != want {
				t.Fatalf("steps %s, want %s", got, want)
			}
			left := full.Steps[0]
			if left.InputTokens != 13 || left.OutputTokens != 0 {
				t.Errorf("the left completion's step counts %d input and %d output tokens, want 13 and none", left.InputTokens, left.OutputTokens)
			}
			for _, words := range []string{"the agent closed its request", "13 input tokens estimated from the request", "0 output tokens"} {
				if !strings.Contains(left.Error, words) {
					t.Errorf("the left completion's step says %q, want it to say %q", left.Error, words)
				}
			}
			var u cutUsage
			h.do("GET", "/v1/workflows/"+wf.ID, w.admin, nil).json(t, &u)
			if u.Usage == nil || u.Usage.InputTokens != 13 || u.Usage.OutputTokens != 0 ||
				u.Usage.Completions != 1 || u.Usage.Cost == nil || u.Usage.Cost.Amount <= 0 {
				t.Errorf("workflow usage %+v, want the left completion's 13 input tokens, priced", u.Usage)
			}
		})
	}
}

// TestExternalReplayOfACutStream: a completion cut short is no answer to
// serve again: a dry run with llm recorded finds none for the same
// request (unrecorded); with llm live, a stream the model cuts again
// counts its tokens in the dry run's step as in a workflow's.
func TestExternalReplayOfACutStream(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		if r.Stream {
			return llmtest.Answer{Text: "a long answer the model never finishes", Truncate: true}
		}
		return llmtest.Text("again")
	})
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newFraudWorld(t, h)
	asked := make(chan string, 10)
	deployExternal(t, h, w.admin, "ext-cut-replay", map[string]any{"url": cutAgent(t, cutProviders[0], false, asked),
		"tools": []string{"payments"}, "models": []string{"gpt"}})
	r := h.do("POST", "/v1/agents/ext-cut-replay/invoke", w.admin, map[string]any{"goal": "say a lot"})
	var wf externalWorkflow
	r.json(t, &wf)
	if got, want := stepList(externalRunOf(t, h, w.admin, wf.ID)), "1:completion:error 1:completion:ok 1:attempt:ok"; r.Status != 200 || got != want {
		t.Fatalf("invoke: %d, steps %s, want %s", r.Status, got, want)
	}
	replayer := h.token("acme", replayScopes)
	modelled := ms.Count()

	res := doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-cut-replay@1", "llm": "recorded"})
	if got := strings.Join(res.replaySteps(), " "); got != "completion:unrecorded completion:ok attempt:ok" || ms.Count() != modelled {
		t.Errorf("recorded: replay steps %s, %d model requests; want the cut stream unrecorded and none sent", got, ms.Count()-modelled)
	}

	res = doExtReplay(t, h, replayer, wf.ID, map[string]any{"target_agent_version": "ext-cut-replay@1", "llm": "live"})
	if got := strings.Join(res.replaySteps(), " "); got != "completion:error completion:ok attempt:ok" {
		t.Fatalf("live: replay steps %s", got)
	}
	if s := res.replayStep("completion"); s.InputTokens <= 0 || s.OutputTokens <= 0 || !strings.Contains(s.Error, "output tokens estimated") {
		t.Errorf("live: the cut completion's step %+v, want its tokens counted", s)
	}
}
