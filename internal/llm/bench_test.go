package llm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
)

// benchAnswers are the answers of the benchmark's loopback servers: a
// completion asking for a tool call, with its usage, as each provider
// sends it.
var benchAnswers = map[string]struct{ path, body string }{
	model.OpenAI: {"/v1/chat/completions", `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,` +
		`"model":"test-model-1","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"payments__get","arguments":"{\"id\":\"p2\"}"}}]},` +
		`"finish_reason":"tool_calls","logprobs":null}],"usage":{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129}}`},
	model.Anthropic: {"/v1/messages", `{"id":"msg_1","type":"message","role":"assistant","model":"test-model-1",` +
		`"content":[{"type":"tool_use","id":"toolu_1","name":"payments__get","input":{"id":"p2"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":9}}`},
}

// benchModel is a model of provider served by a loopback server that
// answers every request with the provider's benchAnswers body.
func benchModel(b *testing.B, provider string) *model.Model {
	ans := benchAnswers[provider]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(ans.body)))
		_, _ = io.WriteString(w, ans.body)
	}))
	b.Cleanup(srv.Close)
	base := srv.URL
	if provider == model.OpenAI {
		base += "/v1"
	}
	return &model.Model{ID: "mdl_bench", Name: "helper", Provider: provider, BaseURL: base,
		Model: "test-model-1", Auth: model.Auth{Type: model.AuthNone}, Revision: 1}
}

// BenchmarkComplete is one completion of the second turn of a run (a
// goal, one tool call and its result, one tool offered) against a
// loopback server answering a fixed body, so that what is measured is the
// client's: building and encoding the request, the HTTP exchange, reading
// the answer.
func BenchmarkComplete(b *testing.B) {
	for _, provider := range []string{model.OpenAI, model.Anthropic} {
		b.Run(provider, func(b *testing.B) {
			m := benchModel(b, provider)
			c, err := NewClients(Options{Outbound: outbound.New(outbound.Options{AllowPrivate: true})}).Client(m)
			if err != nil {
				b.Fatal(err)
			}
			req := conversation()
			req.Messages = append(req.Messages,
				agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{
					{ID: "call_0", Name: "payments__get", Arguments: `{"id":"p1"}`}}},
				agent.ChatMessage{Role: agent.RoleTool, ToolCallID: "call_0", Content: `{"id":"p1","status":"settled","amount":1200}`})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Complete(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if len(resp.Message.ToolCalls) != 1 || resp.Usage == nil {
					b.Fatalf("answer %+v", resp)
				}
			}
		})
	}
}

// BenchmarkRelay is one chat completion of the second turn of an external
// agent's run relayed to a loopback server answering a fixed body, and
// read for its record as the gateway does (Normalize): the agent's request
// as a framework sends it (a goal, one tool call and its result, one tool
// offered), so that what is measured is the relay's reading and rewriting
// of the body, the HTTP exchange, and reading the answer.
func BenchmarkRelay(b *testing.B) {
	m := benchModel(b, model.OpenAI)
	pool := NewClients(Options{Outbound: outbound.New(outbound.Options{AllowPrivate: true})})
	body := []byte(`{"model":"helper","temperature":0,"stream":false,"messages":[` +
		`{"role":"system","content":"You answer questions about payments. Use the tools to look them up."},` +
		`{"role":"user","content":"Is payment p1 settled, and for how much?"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"call_0","type":"function",` +
		`"function":{"name":"payments__get","arguments":"{\"id\":\"p1\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_0","content":"{\"id\":\"p1\",\"status\":\"settled\",\"amount\":1200,\"currency\":\"EUR\"}"}],` +
		`"tools":[{"type":"function","function":{"name":"payments__get","description":"Get a payment by its id.",` +
		`"parameters":{"type":"object","properties":{"id":{"type":"string","description":"The payment's id."}},"required":["id"]}}}]}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out, err := pool.Relay(ctx, m, RelayRequest{API: ChatCompletions, Body: body}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if out.Status != http.StatusOK || out.Usage.InputTokens != 120 {
			b.Fatalf("answer %d %+v", out.Status, out.Usage)
		}
		asked, answer, err := Normalize(ChatCompletions, body, out)
		if err != nil || len(asked.Messages) != 4 || len(answer.Message.ToolCalls) != 1 {
			b.Fatalf("read as %+v, %+v, %v", asked, answer, err)
		}
	}
}
