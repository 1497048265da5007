package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
)

// DefaultAnthropicMaxTokens is max_tokens when a request sets none: the
// Messages API requires it.
const DefaultAnthropicMaxTokens = 4096

// anthropicProvider speaks the Messages API through anthropic-sdk-go.
type anthropicProvider struct {
	model string
	svc   anthropic.MessageService
}

// newAnthropic builds the service directly, not through
// anthropic.NewClient, so no credential is read from the environment or a
// profile. The SDK neither retries, authenticates nor makes spans of its
// own: Complete does.
func newAnthropic(c *client) *anthropicProvider {
	opts := []option.RequestOption{
		option.WithBaseURL(c.base.String()),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
		option.WithoutOpenTelemetry(),
	}
	for k, v := range c.model.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &anthropicProvider{model: c.model.Model, svc: anthropic.NewMessageService(opts...)}
}

func (p *anthropicProvider) name() string { return "anthropic" }

func (p *anthropicProvider) attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
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
	return anthropicResponse(resp, len(req.OutputSchema) > 0)
}

// params converts a ChatRequest to a Messages request: system messages go
// to system, tool results are tool_result blocks of a user message, and
// consecutive messages of one role are merged, as the API requires.
func (p *anthropicProvider) params(req agent.ChatRequest) (anthropic.MessageNewParams, error) {
	params := anthropic.MessageNewParams{Model: anthropic.Model(p.model), MaxTokens: DefaultAnthropicMaxTokens}
	if req.MaxOutputTokens > 0 {
		params.MaxTokens = req.MaxOutputTokens
	}
	if req.Temperature != nil {
		params.Temperature = param.NewOpt(*req.Temperature)
	}
	for _, m := range req.Messages {
		var role anthropic.MessageParamRole
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case agent.RoleSystem:
			if m.Content != "" {
				params.System = append(params.System, anthropic.TextBlockParam{Text: m.Content})
			}
			continue
		case agent.RoleUser:
			role = anthropic.MessageParamRoleUser
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
		case agent.RoleTool:
			role = anthropic.MessageParamRoleUser
			blocks = append(blocks, anthropic.NewToolResultBlock(m.ToolCallID, m.Content, false))
		case agent.RoleAssistant:
			role = anthropic.MessageParamRoleAssistant
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
			}
		default:
			return params, &agent.LLMError{Message: fmt.Sprintf("chat message role %q is not system, user, assistant or tool", m.Role)}
		}
		if len(blocks) == 0 {
			continue // the API refuses empty messages and empty text blocks
		}
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == role {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, blocks...)
			continue
		}
		params.Messages = append(params.Messages, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for _, t := range req.Tools {
		tool, err := anthropicTool(t.Name, t.Description, t.Parameters)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	if len(req.OutputSchema) > 0 {
		tool, err := anthropicTool(outputSchemaName, "Give your final answer: call this with the answer as its input.", req.OutputSchema)
		if err != nil {
			return params, err
		}
		if len(req.Tools) == 0 {
			params.ToolChoice = anthropic.ToolChoiceParamOfTool(outputSchemaName)
		} else {
			params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
		}
		params.Tools = append(params.Tools, tool)
	}
	return params, nil
}

// toolInput is a tool call's arguments as the input object of a tool_use
// block; arguments that are not a JSON object become an empty one.
func toolInput(arguments string) any {
	var obj map[string]any
	if json.Unmarshal([]byte(arguments), &obj) != nil || obj == nil {
		return map[string]any{}
	}
	return json.RawMessage(arguments)
}

// anthropicTool is a function offered to the model, its JSON Schema as the
// tool's input_schema.
func anthropicTool(name, description string, parameters json.RawMessage) (anthropic.ToolUnionParam, error) {
	raw, err := schemaObject(parameters, "parameters of function "+name)
	if err != nil {
		return anthropic.ToolUnionParam{}, err
	}
	var schema map[string]any
	_ = json.Unmarshal(raw, &schema)
	in := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			in.Properties = v
		case "required":
			if list, ok := v.([]any); ok {
				for _, r := range list {
					if s, ok := r.(string); ok {
						in.Required = append(in.Required, s)
					}
				}
			}
		default:
			in.ExtraFields[k] = v
		}
	}
	tool := anthropic.ToolParam{Name: name, InputSchema: in}
	if description != "" {
		tool.Description = param.NewOpt(description)
	}
	return anthropic.ToolUnionParam{OfTool: &tool}, nil
}

// anthropicResponse maps a message to a ChatResponse. With an output schema,
// a final_answer call alone is the answer: its input is the content.
func anthropicResponse(resp *anthropic.Message, structured bool) (agent.ChatResponse, error) {
	out := agent.ChatResponse{
		Message:      agent.ChatMessage{Role: agent.RoleAssistant},
		FinishReason: wire.AnthropicFinish(string(resp.StopReason)),
		ID:           resp.ID,
		Model:        string(resp.Model),
		Usage: &agent.Usage{
			InputTokens:  resp.Usage.InputTokens + resp.Usage.CacheCreationInputTokens + resp.Usage.CacheReadInputTokens,
			OutputTokens: resp.Usage.OutputTokens,
		},
	}
	if !resp.JSON.Usage.Valid() {
		out.Usage = nil
	}
	var text []string
	var answer json.RawMessage
	for _, b := range resp.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			if structured && b.Name == outputSchemaName {
				answer = b.Input
				continue
			}
			args := string(b.Input)
			if len(b.Input) == 0 {
				args = "{}"
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, agent.ChatToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Message.Content = strings.Join(text, "")
	if answer != nil && len(out.Message.ToolCalls) == 0 {
		out.Message.Content = string(answer)
		out.FinishReason = "stop"
	}
	if len(resp.Content) == 0 && resp.StopReason == "" {
		return agent.ChatResponse{}, &agent.LLMError{Message: "its answer has no content and no stop_reason"}
	}
	return out, nil
}
