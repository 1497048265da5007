package llm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/secrets"
)

// testSecret is the model's API key in these tests.
const testSecret = "sk-test-7f3a9c1e5b"

// providers are the wire formats every behaviour is checked in.
var providers = []struct {
	name      string
	newServer func(testing.TB, llmtest.Script, ...llmtest.Option) *llmtest.Server
}{
	{model.OpenAI, llmtest.NewOpenAIServer},
	{model.Anthropic, llmtest.NewAnthropicServer},
}

// testOptions are a pool's options for servers on loopback, with a secret
// under env://LLM_KEY and short backoffs.
func testOptions(t *testing.T) Options {
	t.Helper()
	policy, err := secrets.NewPolicy([]string{"env://LLM_KEY"}, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := secrets.NewResolver(secrets.Options{Policy: policy, Getenv: func(k string) (string, bool) {
		return testSecret, k == "LLM_KEY"
	}})
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Outbound: outbound.New(outbound.Options{AllowPrivate: true}),
		Secrets:  res,
		backoff:  10 * time.Millisecond,
	}
}

// testModel is a model of provider at srv.
func testModel(provider string, srv *llmtest.Server) *model.Model {
	return &model.Model{
		ID: "mdl_test", Tenant: "acme", Name: "helper", Provider: provider, BaseURL: srv.URL,
		Model: "test-model-1", Auth: model.Auth{Type: model.AuthAPIKey, SecretsRef: "env://LLM_KEY"},
		Headers: map[string]string{"X-Team": "payments"}, Timeout: 5 * time.Second, Revision: 1,
	}
}

// newClient is a client of m from a pool with opts.
func newClient(t *testing.T, opts Options, m *model.Model) Client {
	t.Helper()
	c, err := NewClients(opts).Client(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// conversation is a goal, a tool call and its answer.
func conversation() agent.ChatRequest {
	temp := 0.2
	return agent.ChatRequest{
		Model: "helper",
		Messages: []agent.ChatMessage{
			{Role: agent.RoleSystem, Content: "You help the payments team."},
			{Role: agent.RoleUser, Content: "Is payment p1 settled?"},
		},
		Tools: []agent.ChatTool{{Name: "payments__get", Description: "Get a payment",
			Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}},
		Temperature:     &temp,
		MaxOutputTokens: 300,
	}
}

// llmError returns err as an *agent.LLMError, failing the test otherwise.
func llmError(t *testing.T, err error) *agent.LLMError {
	t.Helper()
	var le *agent.LLMError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not an *agent.LLMError", err, err)
	}
	if strings.Contains(le.Error(), testSecret) {
		t.Fatalf("error %q carries the secret", le.Error())
	}
	return le
}

func TestToolCallThenFinalAnswer(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := p.newServer(t, llmtest.Sequence(
				llmtest.Calls(llmtest.Call("payments__get", `{"id":"p1"}`)),
				llmtest.Answer{Text: "Yes, p1 is settled.", InputTokens: 120, OutputTokens: 9},
			))
			c := newClient(t, testOptions(t), testModel(p.name, srv))
			req := conversation()

			first, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := agent.ChatResponse{
				Message: agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{
					{ID: "call_1_1", Name: "payments__get", Arguments: `{"id":"p1"}`}}},
				Usage:        &agent.Usage{InputTokens: 10, OutputTokens: 5},
				FinishReason: "tool_calls",
				ID:           map[string]string{model.OpenAI: "chatcmpl-1", model.Anthropic: "msg_1"}[p.name],
				Model:        "test-model-1",
			}
			if diff := cmp.Diff(want, first); diff != "" {
				t.Fatalf("first answer (-want +got):\n%s", diff)
			}

			req.Messages = append(req.Messages, first.Message,
				agent.ChatMessage{Role: agent.RoleTool, ToolCallID: "call_1_1", Content: `{"status":"settled"}`})
			second, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if second.Message.Content != "Yes, p1 is settled." || second.FinishReason != "stop" ||
				*second.Usage != (agent.Usage{InputTokens: 120, OutputTokens: 9}) {
				t.Fatalf("second answer: %+v", second)
			}

			got := srv.Requests()[1]
			if last := got.Last(); last.Role != agent.RoleTool || last.ToolCallID != "call_1_1" {
				t.Errorf("last message %+v, want the tool's answer", last)
			}
			if diff := cmp.Diff(req.Messages, got.Messages); diff != "" {
				t.Errorf("messages the model received (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(req.Tools[0].Name, got.Tools[0].Name); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if got.Model != "test-model-1" || *got.Temperature != 0.2 || got.MaxTokens != 300 {
				t.Errorf("model %q, temperature %v, max tokens %d", got.Model, *got.Temperature, got.MaxTokens)
			}
			if got.Header.Get("X-Team") != "payments" {
				t.Errorf("X-Team header %q", got.Header.Get("X-Team"))
			}
			keyHeader := map[string]string{model.OpenAI: "Authorization", model.Anthropic: "X-Api-Key"}[p.name]
			wantKey := map[string]string{model.OpenAI: "Bearer " + testSecret, model.Anthropic: testSecret}[p.name]
			if got.Header.Get(keyHeader) != wantKey {
				t.Errorf("%s header %q, want %q", keyHeader, got.Header.Get(keyHeader), wantKey)
			}
		})
	}
}

func TestNoUsageReported(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := p.newServer(t, llmtest.Sequence(llmtest.Answer{Text: "ok", NoUsage: true}))
			resp, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(context.Background(), conversation())
			if err != nil || resp.Usage != nil || resp.Message.Content != "ok" {
				t.Fatalf("answer %+v (usage %v), error %v", resp, resp.Usage, err)
			}
		})
	}
}

func TestAnthropicWireFormat(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text("ok")))
	c := newClient(t, testOptions(t), testModel(model.Anthropic, srv))
	req := agent.ChatRequest{Messages: []agent.ChatMessage{
		{Role: agent.RoleSystem, Content: "Be brief."},
		{Role: agent.RoleUser, Content: "Refund p1 and p2."},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{
			{ID: "t1", Name: "refund", Arguments: `{"id":"p1"}`}, {ID: "t2", Name: "refund", Arguments: `{"id":"p2"}`}}},
		{Role: agent.RoleTool, ToolCallID: "t1", Content: "refunded"},
		{Role: agent.RoleTool, ToolCallID: "t2", Content: "refunded"},
		{Role: agent.RoleUser, Content: "Thanks."},
	}}
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		System    []map[string]any `json:"system"`
		MaxTokens int64            `json:"max_tokens"`
		Messages  []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.System) != 1 || body.System[0]["text"] != "Be brief." {
		t.Errorf("system %v", body.System)
	}
	if body.MaxTokens != DefaultAnthropicMaxTokens {
		t.Errorf("max_tokens %d, want the default %d", body.MaxTokens, DefaultAnthropicMaxTokens)
	}
	var shape []string
	for _, m := range body.Messages {
		var types []string
		for _, b := range m.Content {
			types = append(types, b["type"].(string))
		}
		shape = append(shape, m.Role+":"+strings.Join(types, ","))
	}
	// The tool results and the next user text are one user message.
	want := []string{"user:text", "assistant:tool_use,tool_use", "user:tool_result,tool_result,text"}
	if diff := cmp.Diff(want, shape); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"settled":{"type":"boolean"}},"required":["settled"],"additionalProperties":false}`)
	for _, p := range providers {
		for _, withTools := range []bool{false, true} {
			t.Run(p.name+map[bool]string{false: "/alone", true: "/beside tools"}[withTools], func(t *testing.T) {
				srv := p.newServer(t, llmtest.Sequence(llmtest.JSON(`{"settled":true}`)))
				c := newClient(t, testOptions(t), testModel(p.name, srv))
				req := conversation()
				if !withTools {
					req.Tools = nil
				}
				req.OutputSchema = schema
				resp, err := c.Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Content != `{"settled":true}` || len(resp.Message.ToolCalls) != 0 || resp.FinishReason != "stop" {
					t.Fatalf("answer %+v", resp)
				}
				got := srv.Requests()[0]
				if diff := cmp.Diff(mustMap(t, schema), mustMap(t, got.OutputSchema)); diff != "" {
					t.Errorf("schema sent (-want +got):\n%s", diff)
				}
				var body map[string]any
				_ = json.Unmarshal(got.Body, &body)
				switch p.name {
				case model.OpenAI:
					want := map[string]any{"type": "json_schema", "json_schema": map[string]any{
						"name": "final_answer", "strict": true, "schema": mustMap(t, schema)}}
					if diff := cmp.Diff(want, body["response_format"]); diff != "" {
						t.Errorf("response_format (-want +got):\n%s", diff)
					}
				case model.Anthropic:
					want := `{"type":"tool","name":"final_answer"}`
					if withTools {
						want = `{"type":"any"}`
					}
					if diff := cmp.Diff(mustMap(t, json.RawMessage(want)), mustMap(t, got.ToolChoice)); diff != "" {
						t.Errorf("tool_choice (-want +got):\n%s", diff)
					}
				}
			})
		}
	}
}

func mustMap(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func TestStrictCompatible(t *testing.T) {
	cases := []struct {
		schema string
		want   bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`, true},
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, false},
		{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{}}}},"required":["a"],"additionalProperties":false}`, false},
	}
	for _, tc := range cases {
		var s any
		_ = json.Unmarshal([]byte(tc.schema), &s)
		if got := strictCompatible(s); got != tc.want {
			t.Errorf("strictCompatible(%s) = %v, want %v", tc.schema, got, tc.want)
		}
	}
}

func TestSecretThatCannotBeResolvedSendsNothing(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	m := testModel(model.OpenAI, srv)
	m.Auth.SecretsRef = "env://OTHER_KEY"
	_, err := newClient(t, testOptions(t), m).Complete(context.Background(), conversation())
	le := llmError(t, err)
	if !strings.Contains(le.Message, "env://OTHER_KEY") || srv.Count() != 0 {
		t.Errorf("error %+v after %d requests", le, srv.Count())
	}
}

func TestAuthHeaders(t *testing.T) {
	cases := []struct {
		provider string
		auth     model.Auth
		want     map[string]string
	}{
		{model.OpenAI, model.Auth{Type: model.AuthAPIKey, SecretsRef: "env://LLM_KEY", Header: "api-key"},
			map[string]string{"Api-Key": testSecret, "Authorization": "", "X-Api-Key": ""}},
		{model.Anthropic, model.Auth{Type: model.AuthBearer, SecretsRef: "env://LLM_KEY"},
			map[string]string{"Authorization": "Bearer " + testSecret, "X-Api-Key": ""}},
		{model.Anthropic, model.Auth{Type: model.AuthNone},
			map[string]string{"Authorization": "", "X-Api-Key": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.provider+"/"+tc.auth.Type, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
			t.Setenv("ANTHROPIC_API_KEY", "sk-from-the-environment")
			var srv *llmtest.Server
			if tc.provider == model.OpenAI {
				srv = llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
			} else {
				srv = llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text("ok")))
			}
			m := testModel(tc.provider, srv)
			m.Auth = tc.auth
			if _, err := newClient(t, testOptions(t), m).Complete(context.Background(), conversation()); err != nil {
				t.Fatal(err)
			}
			h := srv.Requests()[0].Header
			for k, v := range tc.want {
				if h.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, h.Get(k), v)
				}
			}
		})
	}
}

func TestDefaultModelSecretHasItsOwnResolver(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	opts := testOptions(t)
	policy, _ := secrets.NewPolicy([]string{"env://SERVER_LLM_KEY"}, false)
	opts.DefaultSecrets, _ = secrets.NewResolver(secrets.Options{Policy: policy, Getenv: func(k string) (string, bool) {
		return "sk-server", k == "SERVER_LLM_KEY"
	}})
	m := testModel(model.OpenAI, srv)
	m.ID, m.Name, m.Auth = model.DefaultID, model.DefaultName, model.Auth{Type: model.AuthBearer, SecretsRef: "env://SERVER_LLM_KEY"}
	if _, err := newClient(t, opts, m).Complete(context.Background(), conversation()); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer sk-server" {
		t.Errorf("Authorization %q", got)
	}
}

func TestPoolKeepsOneClientPerRevision(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	pool := NewClients(testOptions(t))
	m := testModel(model.OpenAI, srv)
	a, _ := pool.Client(m)
	b, _ := pool.Client(m)
	if a != b {
		t.Error("the same revision got a second client")
	}
	m2 := *m
	m2.Revision = 2
	if c, _ := pool.Client(&m2); c == a {
		t.Error("a new revision kept the old client")
	}
	bad := *m
	bad.ID, bad.Provider = "mdl_bad", "cohere"
	if _, err := pool.Client(&bad); err == nil {
		t.Error("an unknown provider got a client")
	}
}

// TestCompleteCountsTheInputOfARequestLeftUnanswered: a completion the
// provider read, whose caller went before its answer came, returns the
// context's error with its input tokens estimated from the request's 164
// characters and no output; one whose caller went before it was sent
// costs nothing.
func TestCompleteCountsTheInputOfARequestLeftUnanswered(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			ctx, leave := context.WithCancel(context.Background())
			defer leave()
			srv := p.newServer(t, func(llmtest.Request) llmtest.Answer {
				// The caller goes once the provider has the request.
				time.AfterFunc(20*time.Millisecond, leave)
				return llmtest.Answer{Text: "settled", Delay: time.Minute}
			})
			resp, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(ctx, conversation())
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want the context's", err)
			}
			want := agent.ChatResponse{Usage: &agent.Usage{InputTokens: 41}}
			if diff := cmp.Diff(want, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("never sent", func(t *testing.T) {
		srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("settled")))
		ctx, leave := context.WithCancel(context.Background())
		leave()
		resp, err := newClient(t, testOptions(t), testModel(model.OpenAI, srv)).Complete(ctx, conversation())
		if !errors.Is(err, context.Canceled) || resp.Usage != nil || srv.Count() != 0 {
			t.Errorf("response %+v, error %v, %d requests; want none, and nothing to count", resp, err, srv.Count())
		}
	})
}
