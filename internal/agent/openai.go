package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIPlanner is a Completer backed by an OpenAI-compatible
// chat-completions endpoint.
type OpenAIPlanner struct {
	client openai.Client
	model  string
}

var _ Completer = (*OpenAIPlanner)(nil)

// NewOpenAIPlanner returns a planner for the endpoint at baseURL (for
// example "https://api.openai.com/v1/"). httpClient may be nil for the
// default client. The API key is sent as a bearer token and never appears
// in errors.
func NewOpenAIPlanner(baseURL, model, apiKey string, httpClient *http.Client) *OpenAIPlanner {
	opts := []option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(apiKey),
		option.WithMaxRetries(2),
	}
	if httpClient != nil {
		opts = append(opts, option.WithHTTPClient(httpClient))
	}
	return &OpenAIPlanner{client: openai.NewClient(opts...), model: model}
}

// Complete implements Completer.
func (p *OpenAIPlanner) Complete(ctx context.Context, _, n int, req ChatRequest) (ChatResponse, error) {
	params, err := p.params(req)
	if err != nil {
		return ChatResponse{}, err
	}
	resp, err := p.client.Chat.Completions.New(ctx, params)
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			// The SDK's message can quote the request; keep only the status.
			return ChatResponse{}, fmt.Errorf("chat completion %d: the endpoint answered %d", n, apiErr.StatusCode)
		}
		return ChatResponse{}, fmt.Errorf("chat completion %d: %w", n, err)
	}
	if len(resp.Choices) == 0 {
		return ChatResponse{}, fmt.Errorf("chat completion %d: the response has no choices", n)
	}
	m := resp.Choices[0].Message
	out := ChatMessage{Role: RoleAssistant, Content: m.Content}
	for _, tc := range m.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		out.ToolCalls = append(out.ToolCalls, ChatToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return ChatResponse{Message: out}, nil
}

// params converts a ChatRequest to the SDK's request.
func (p *OpenAIPlanner) params(req ChatRequest) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(p.model)}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		case RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
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
			return params, fmt.Errorf("chat message role %q is unknown", m.Role)
		}
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return params, fmt.Errorf("parameters of function %s: %w", t.Name, err)
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return params, nil
}
