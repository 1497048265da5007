package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
)

// outputSchemaName names the structured output of a completion: the
// response format's schema for openai, the forced tool for anthropic.
const outputSchemaName = "final_answer"

// openAIProvider speaks Chat Completions through openai-go.
type openAIProvider struct {
	model string
	svc   openai.ChatCompletionService
}

// newOpenAI builds the service directly, not through openai.NewClient, so
// nothing is read from the environment (OPENAI_API_KEY, OPENAI_BASE_URL):
// the model's record is all there is. The SDK neither retries nor
// authenticates; Complete does both.
func newOpenAI(c *client) *openAIProvider {
	opts := []option.RequestOption{
		option.WithBaseURL(c.base.String()),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
	}
	for k, v := range c.model.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &openAIProvider{model: c.model.Model, svc: openai.NewChatCompletionService(opts...)}
}

func (p *openAIProvider) name() string { return "openai" }

func (p *openAIProvider) attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
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
	return openAIResponse(resp)
}

// params converts a ChatRequest to the SDK's request.
func (p *openAIProvider) params(req agent.ChatRequest) (openai.ChatCompletionNewParams, error) {
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
		schema, err := schemaObject(t.Parameters, "parameters of function "+t.Name)
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
		schema, err := schemaObject(req.OutputSchema, "output_schema")
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

// openAIResponse maps a chat.completion to a ChatResponse.
func openAIResponse(resp *openai.ChatCompletion) (agent.ChatResponse, error) {
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

// schemaObject decodes a JSON Schema object.
func schemaObject(raw json.RawMessage, what string) (map[string]any, error) {
	var schema map[string]any
	if len(raw) == 0 {
		return map[string]any{"type": "object"}, nil
	}
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return nil, &agent.LLMError{Message: what + " is not a JSON Schema object"}
	}
	return schema, nil
}

// strictCompatible reports whether OpenAI's strict structured output accepts
// schema: every object closes its properties (additionalProperties: false)
// and requires all of them. A schema that is not is sent with strict false,
// and the answer is checked against it after.
func strictCompatible(schema any) bool {
	s, ok := schema.(map[string]any)
	if !ok {
		return true
	}
	if props, ok := s["properties"].(map[string]any); ok || s["type"] == "object" {
		if s["additionalProperties"] != false {
			return false
		}
		req, _ := s["required"].([]any)
		if len(req) != len(props) {
			return false
		}
		for _, p := range props {
			if !strictCompatible(p) {
				return false
			}
		}
	}
	for _, k := range []string{"items", "$defs", "definitions", "anyOf"} {
		switch v := s[k].(type) {
		case map[string]any:
			if k == "items" {
				if !strictCompatible(v) {
					return false
				}
				continue
			}
			for _, d := range v {
				if !strictCompatible(d) {
					return false
				}
			}
		case []any:
			for _, d := range v {
				if !strictCompatible(d) {
					return false
				}
			}
		}
	}
	return true
}
