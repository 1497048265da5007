package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
)

// sdkOpenAI is the Chat Completions provider as it was through openai-go's
// ChatCompletionNewParams and ChatCompletion.
type sdkOpenAI struct {
	model string
	svc   openai.ChatCompletionService
}

// newSDKOpenAI builds the service from the model's options alone, not
// through openai.NewClient, so nothing is read from the environment.
func newSDKOpenAI(c *client) provider {
	opts := []option.RequestOption{
		option.WithBaseURL(c.base.String()),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
	}
	for k, v := range c.model.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &sdkOpenAI{model: c.model.Model, svc: openai.NewChatCompletionService(opts...)}
}

func (p *sdkOpenAI) name() string { return "openai" }

func (p *sdkOpenAI) attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
	params, err := p.params(req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	capture := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		return rec.capture(r, next)
	})
	resp, err := p.svc.New(ctx, params, capture)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	return sdkOpenAIResponse(resp)
}

func (p *sdkOpenAI) params(req agent.ChatRequest) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(p.model)}
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleSystem:
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case agent.RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		case agent.RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case agent.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name: tc.Name, Arguments: tc.Arguments,
						},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return params, &agent.LLMError{Message: fmt.Sprintf("chat message role %q is not system, user, assistant or tool", m.Role)}
		}
	}
	for _, t := range req.Tools {
		schema, err := sdkSchemaObject(t.Parameters, "parameters of function "+t.Name)
		if err != nil {
			return params, err
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if req.Temperature != nil {
		params.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.MaxOutputTokens > 0 {
		params.MaxCompletionTokens = param.NewOpt(req.MaxOutputTokens)
	}
	if len(req.OutputSchema) > 0 {
		schema, err := sdkSchemaObject(req.OutputSchema, "output_schema")
		if err != nil {
			return params, err
		}
		params.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:   outputSchemaName,
				Schema: schema,
				Strict: param.NewOpt(strictCompatible(schema)),
			},
		}
	}
	return params, nil
}

func sdkOpenAIResponse(resp *openai.ChatCompletion) (agent.ChatResponse, error) {
	if len(resp.Choices) == 0 {
		return agent.ChatResponse{}, &agent.LLMError{Message: "its answer has no choices"}
	}
	ch := resp.Choices[0]
	out := agent.ChatResponse{
		Message:      agent.ChatMessage{Role: agent.RoleAssistant, Content: ch.Message.Content},
		FinishReason: wire.OpenAIFinish(ch.FinishReason),
		ID:           resp.ID,
		Model:        resp.Model,
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		out.Message.ToolCalls = append(out.Message.ToolCalls, agent.ChatToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if resp.JSON.Usage.Valid() {
		out.Usage = &agent.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
	}
	return out, nil
}

// sdkSchemaObject decodes a JSON Schema object, as the SDK paths did.
func sdkSchemaObject(raw json.RawMessage, what string) (map[string]any, error) {
	var schema map[string]any
	if len(raw) == 0 {
		return map[string]any{"type": "object"}, nil
	}
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return nil, &agent.LLMError{Message: what + " is not a JSON Schema object"}
	}
	return schema, nil
}

// richRequest is a conversation of every kind of message, tools with and
// without descriptions and parameters, a temperature of zero, an output
// token limit and a strict output schema.
func richRequest() agent.ChatRequest {
	zero := 0.0
	return agent.ChatRequest{
		Model: "helper",
		Messages: []agent.ChatMessage{
			{Role: agent.RoleSystem, Content: "You help the payments team. <b>Never</b> guess & say so."},
			{Role: agent.RoleUser, Content: "Refund p1 and p2, then say \"done\" ✓."},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{
				{ID: "call_1", Name: "payments__refund", Arguments: `{"id":"p1"}`},
				{ID: "call_2", Name: "payments__refund", Arguments: `{"id": "p2", "note": "a\nb"}`}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Content: `{"refunded":true}`},
			{Role: agent.RoleTool, ToolCallID: "call_2", Content: "refunded"},
			{Role: agent.RoleAssistant, Content: "One more check.", ToolCalls: []agent.ChatToolCall{
				{ID: "call_3", Name: "payments__get", Arguments: ""}}},
			{Role: agent.RoleTool, ToolCallID: "call_3", Content: ""},
			{Role: agent.RoleAssistant, Content: "Both are refunded."},
			{Role: agent.RoleAssistant},
			{Role: agent.RoleUser, Content: ""},
		},
		Tools: []agent.ChatTool{
			{Name: "payments__refund", Description: "Refund a payment",
				Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","pattern":"^p[0-9]+$"},"note":{"type":"string","maxLength":200}},"required":["id"]}`)},
			{Name: "payments__get", Parameters: json.RawMessage(` {"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": false} `)},
			{Name: "payments__ping"},
		},
		Temperature:     &zero,
		MaxOutputTokens: 300,
		OutputSchema:    json.RawMessage(`{"type":"object","properties":{"refunded":{"type":"array","items":{"type":"string"}}},"required":["refunded"],"additionalProperties":false}`),
	}
}

// completion is a chat.completion answer.
const completion = `{"id":"chatcmpl-9","object":"chat.completion","created":1767225600,"model":"test-model-1-2026",` +
	`"system_fingerprint":"fp_1","service_tier":"default","choices":[{"index":0,"message":{"role":"assistant",` +
	`"content":"{\"refunded\":[\"p1\",\"p2\"]}","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":321,"completion_tokens":12,"total_tokens":333,"prompt_tokens_details":{"cached_tokens":0}}}`

func TestOpenAIRequestsAsTheSDKSentThem(t *testing.T) {
	plain := richRequest()
	plain.Temperature, plain.MaxOutputTokens, plain.Tools = nil, 0, nil
	plain.OutputSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"n":{"type":"integer","maximum":1e3}}}`)
	bad := func(f func(*agent.ChatRequest)) agent.ChatRequest {
		r := richRequest()
		f(&r)
		return r
	}
	cases := map[string]agent.ChatRequest{
		"rich":                      richRequest(),
		"not strict, no tools":      plain,
		"without an output schema":  bad(func(r *agent.ChatRequest) { r.OutputSchema = nil }),
		"parameters an array":       bad(func(r *agent.ChatRequest) { r.Tools[0].Parameters = json.RawMessage(`[{"type":"object"}]`) }),
		"parameters null":           bad(func(r *agent.ChatRequest) { r.Tools[1].Parameters = json.RawMessage(`null`) }),
		"parameters not JSON":       bad(func(r *agent.ChatRequest) { r.Tools[1].Parameters = json.RawMessage(`{"type":`) }),
		"output schema a string":    bad(func(r *agent.ChatRequest) { r.OutputSchema = json.RawMessage(`"object"`) }),
		"output schema two objects": bad(func(r *agent.ChatRequest) { r.OutputSchema = json.RawMessage(`{} {}`) }),
		"a role of no provider":     bad(func(r *agent.ChatRequest) { r.Messages[1].Role = "critic" }),
		"one message":               {Messages: []agent.ChatMessage{{Role: agent.RoleUser, Content: "hi"}}},
		"an empty object as schema": bad(func(r *agent.ChatRequest) { r.OutputSchema = json.RawMessage(`{}`) }),
		"a large integer in schemas": bad(func(r *agent.ChatRequest) {
			r.Tools[2].Parameters = json.RawMessage(`{"type":"object","maximum":12345}`)
		}),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			own, viaSDK := bothWays(t, model.OpenAI, newSDKOpenAI, req, rawAnswer{200, "application/json", completion})
			compareOutcomes(t, own, viaSDK)
			for _, h := range own.headers {
				if ua := h.Get("User-Agent"); ua != outbound.DefaultUserAgent {
					t.Errorf("User-Agent %q, want %q", ua, outbound.DefaultUserAgent)
				}
			}
		})
	}
}

// TestOpenAIURLsAsTheSDKBuiltThem: a completion goes to the URL openai-go
// made of the model's base_url, whatever its shape.
func TestOpenAIURLsAsTheSDKBuiltThem(t *testing.T) {
	for _, root := range []string{"/v1", "/v1/", "/v1//", "", "/openai/deployments/d1", "/v1?api-version=2025-01-01"} {
		t.Run(root, func(t *testing.T) {
			own, viaSDK := bothWaysAt(t, root, model.OpenAI, newSDKOpenAI, richRequest(), rawAnswer{200, "application/json", completion})
			compareOutcomes(t, own, viaSDK)
			if len(own.uris) == 0 || !strings.HasSuffix(strings.SplitN(own.uris[0], "?", 2)[0], "/chat/completions") {
				t.Errorf("requests went to %v, want <base_url>/chat/completions", own.uris)
			}
		})
	}
}

func TestOpenAIAnswersReadAsTheSDKReadThem(t *testing.T) {
	js := "application/json"
	cases := map[string]rawAnswer{
		"a full completion": {200, "application/json; charset=utf-8", completion},
		"tool calls, one not a function": {200, js, `{"id":"chatcmpl-2","object":"chat.completion","model":"m","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"payments__refund","arguments":"{\"id\":\"p1\"}"}},` +
			`{"id":"call_b","type":"custom","custom":{"name":"grep","input":"p1"}},{"id":"call_c","function":{"name":"payments__get","arguments":""}}]},` +
			`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`},
		"without usage": {200, js, `{"id":"c","model":"m","choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`},
		"usage null":    {200, js, `{"id":"c","model":"m","choices":[{"message":{"content":"ok"},"finish_reason":"stop"}],"usage":null}`},
		"usage empty":   {200, js, `{"id":"c","model":"m","choices":[{"message":{"content":"ok"},"finish_reason":"stop"}],"usage":{}}`},
		"legacy function_call, cut by length": {200, js, `{"id":"c","model":"m","choices":[{"message":{"content":null,` +
			`"function_call":{"name":"f","arguments":"{}"}},"finish_reason":"function_call"},{"message":{"content":"second"},"finish_reason":"length"}]}`},
		"two choices":                  {200, js, `{"choices":[{"message":{"content":"first"},"finish_reason":"length"},{"message":{"content":"second"}}]}`},
		"no choices":                   {200, js, `{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}`},
		"choices null":                 {200, js, `{"id":"c","choices":null}`},
		"a +json type":                 {200, "application/vnd.example+json", `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`},
		"JSON sent as text/plain":      {200, "text/plain", `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`},
		"JSON sent untyped":            {200, "", `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`},
		"not JSON":                     {200, js, `{"choices":[}`},
		"an HTML page":                 {200, "text/html", `<html>gateway</html>`},
		"400 in OpenAI's words":        {400, js, `{"error":{"message":"Invalid schema for response_format 'final_answer'.","type":"invalid_request_error","param":"response_format","code":null}}`},
		"401 with a top-level message": {401, js, `{"message":"bad key"}`},
		"404":                          {404, js, `{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`},
		"429 retried":                  {429, js, `{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}`},
		"500 as HTML, retried":         {500, "text/html", `<html>oops</html>`},
		"503 with an empty body":       {503, "", ``},
	}
	for name, ans := range cases {
		t.Run(name, func(t *testing.T) {
			own, viaSDK := bothWays(t, model.OpenAI, newSDKOpenAI, richRequest(), ans)
			compareOutcomes(t, own, viaSDK)
		})
	}
}

// A whole body of JSON that ends early is not a chat completion, not an
// answer cut short: the SDK's decoder took its unexpected EOF for the
// connection's and retried.
func TestOpenAIIncompleteJSONIsNotRetried(t *testing.T) {
	own, viaSDK := bothWays(t, model.OpenAI, newSDKOpenAI, richRequest(), rawAnswer{200, "application/json", `{"choices":[{"message"`})
	le := llmError(t, own.err)
	if le.Status != 200 || le.Message != "its answer is not a chat completion in JSON (a application/json body)" || len(own.bodies) != 1 {
		t.Errorf("error %+v after %d requests", le, len(own.bodies))
	}
	if le := llmError(t, viaSDK.err); !strings.Contains(le.Message, "cut short") || len(viaSDK.bodies) != 1+MaxRetries {
		t.Errorf("through the SDK: error %+v after %d requests", le, len(viaSDK.bodies))
	}
}
