package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/memo"
)

// DefaultAnthropicMaxTokens is max_tokens when a request sets none: the
// Messages API requires it.
const DefaultAnthropicMaxTokens = 4096

// anthropicProvider speaks the Messages API: anthropic-sdk-go sends the
// request (base URL, headers, middleware) and hands back the answer's
// bytes; the body is encoded and the answer read here.
type anthropicProvider struct {
	model  string
	client anthropic.Client
}

// newAnthropic builds the client from anthropicOptions alone, not through
// anthropic.NewClient, so no credential is read from the environment or a
// profile.
func newAnthropic(c *client) *anthropicProvider {
	return &anthropicProvider{model: c.model.Model, client: anthropic.Client{Options: anthropicOptions(c)}}
}

// anthropicOptions are the requests' options: the model's base URL and
// headers, c's HTTP client. The SDK neither retries, authenticates nor
// makes spans of its own: Complete does.
func anthropicOptions(c *client) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithBaseURL(c.base.String()),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
		option.WithoutOpenTelemetry(),
	}
	for k, v := range c.model.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return opts
}

func (p *anthropicProvider) name() string { return "anthropic" }

func (p *anthropicProvider) attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
	body, maxTokens, err := p.body(req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	// The SDK's own bound of a request that is not streamed: 10 minutes,
	// or an error before sending when max_tokens may take longer.
	timeout, err := anthropic.CalculateNonStreamingTimeout(int(maxTokens), anthropic.Model(p.model), nil)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	capture := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		return rec.capture(r, next)
	})
	var raw []byte
	if err := p.client.Post(ctx, "v1/messages", body, &raw, option.WithRequestTimeout(timeout), capture); err != nil {
		return agent.ChatResponse{}, err
	}
	if !jsonMedia(rec.header) {
		return agent.ChatResponse{}, errNotJSON
	}
	var msg wire.AnthropicMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return agent.ChatResponse{}, err
	}
	return anthropicResponse(msg, len(req.OutputSchema) > 0)
}

// messagesBody is a Messages request.
type messagesBody struct {
	Model       string         `json:"model"`
	MaxTokens   int64          `json:"max_tokens"`
	Temperature *float64       `json:"temperature,omitempty"`
	System      []contentBlock `json:"system,omitempty"`
	Messages    []messageParam `json:"messages,omitempty"`
	Tools       []messagesTool `json:"tools,omitempty"`
	ToolChoice  *toolChoice    `json:"tool_choice,omitempty"`
}

// messageParam is a message of a Messages request.
type messageParam struct {
	Role    string         `json:"role"`
	Content []contentBlock `json:"content"`
}

// contentBlock is a content block: text, tool_use or tool_result, the
// fields of its type alone set.
type contentBlock struct {
	Type string `json:"type"`
	*textPart
	*toolUsePart
	*toolResultPart
}

type textPart struct {
	Text string `json:"text"`
}

type toolUsePart struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultPart struct {
	ToolUseID string         `json:"tool_use_id"`
	Content   []contentBlock `json:"content"`
	IsError   bool           `json:"is_error"`
}

// textBlock is a text block of s.
func textBlock(s string) contentBlock {
	return contentBlock{Type: "text", textPart: &textPart{Text: s}}
}

// messagesTool is a tool offered to the model.
type messagesTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// toolChoice is how the model is to use the tools.
type toolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// emptyObject is the input of a tool call whose arguments are not an object.
var emptyObject = json.RawMessage(`{}`)

// body encodes a ChatRequest as a Messages request, and its max_tokens:
// system messages go to system, tool results are tool_result blocks of a
// user message, and consecutive messages of one role are merged, as the
// API requires.
func (p *anthropicProvider) body(req agent.ChatRequest) ([]byte, int64, error) {
	b := messagesBody{Model: p.model, MaxTokens: DefaultAnthropicMaxTokens, Temperature: req.Temperature}
	if req.MaxOutputTokens > 0 {
		b.MaxTokens = req.MaxOutputTokens
	}
	for _, m := range req.Messages {
		var role string
		var blocks []contentBlock
		switch m.Role {
		case agent.RoleSystem:
			if m.Content != "" {
				b.System = append(b.System, textBlock(m.Content))
			}
			continue
		case agent.RoleUser:
			role = "user"
			if m.Content != "" {
				blocks = append(blocks, textBlock(m.Content))
			}
		case agent.RoleTool:
			role = "user"
			blocks = append(blocks, contentBlock{Type: "tool_result", toolResultPart: &toolResultPart{
				ToolUseID: m.ToolCallID, Content: []contentBlock{textBlock(m.Content)}}})
		case agent.RoleAssistant:
			role = "assistant"
			if m.Content != "" {
				blocks = append(blocks, textBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				input := emptyObject
				if isObject([]byte(tc.Arguments)) {
					input = json.RawMessage(tc.Arguments)
				}
				blocks = append(blocks, contentBlock{Type: "tool_use", toolUsePart: &toolUsePart{ID: tc.ID, Name: tc.Name, Input: input}})
			}
		default:
			return nil, 0, &agent.LLMError{Message: fmt.Sprintf("chat message role %q is not system, user, assistant or tool", m.Role)}
		}
		if len(blocks) == 0 {
			continue // the API refuses empty messages and empty text blocks
		}
		if n := len(b.Messages); n > 0 && b.Messages[n-1].Role == role {
			b.Messages[n-1].Content = append(b.Messages[n-1].Content, blocks...)
			continue
		}
		b.Messages = append(b.Messages, messageParam{Role: role, Content: blocks})
	}
	for _, t := range req.Tools {
		tool, err := anthropicTool(t.Name, t.Description, t.Parameters)
		if err != nil {
			return nil, 0, err
		}
		b.Tools = append(b.Tools, tool)
	}
	if len(req.OutputSchema) > 0 {
		tool, err := anthropicTool(outputSchemaName, "Give your final answer: call this with the answer as its input.", req.OutputSchema)
		if err != nil {
			return nil, 0, err
		}
		b.ToolChoice = &toolChoice{Type: "tool", Name: outputSchemaName}
		if len(req.Tools) > 0 {
			b.ToolChoice = &toolChoice{Type: "any"}
		}
		b.Tools = append(b.Tools, tool)
	}
	body, err := json.Marshal(b)
	return body, b.MaxTokens, err
}

// anthropicTool is a function offered to the model, its JSON Schema as the
// tool's input_schema.
func anthropicTool(name, description string, parameters json.RawMessage) (messagesTool, error) {
	schema, err := schemaObject(parameters, "parameters of function "+name)
	if err != nil {
		return messagesTool{}, err
	}
	return messagesTool{Name: name, Description: description, InputSchema: inputSchemas.Get(schema, inputSchema)}, nil
}

// inputSchemas remembers inputSchema of the schemas seen.
var inputSchemas memo.ByBytes[json.RawMessage]

// inputSchema is a JSON Schema object as an input_schema.
func inputSchema(raw []byte) json.RawMessage {
	var schema map[string]any
	_ = json.Unmarshal(raw, &schema)
	out, err := json.Marshal(toolInputSchema(schema))
	if err != nil {
		return raw
	}
	return out
}

// toolInputSchema is a JSON Schema object as the SDK's input_schema: its
// type object, its required the names among its required, its other
// members as they are.
func toolInputSchema(schema map[string]any) anthropic.ToolInputSchemaParam {
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
	return in
}

// anthropicResponse maps a message to a ChatResponse. With an output schema,
// a final_answer call alone is the answer: its input is the content.
func anthropicResponse(msg wire.AnthropicMessage, structured bool) (agent.ChatResponse, error) {
	out := agent.ChatResponse{
		Message:      agent.ChatMessage{Role: agent.RoleAssistant},
		FinishReason: wire.AnthropicFinish(msg.StopReason),
		ID:           msg.ID,
		Model:        msg.Model,
	}
	if u := msg.Usage; u != nil {
		out.Usage = &agent.Usage{InputTokens: u.Input(), OutputTokens: u.OutputTokens}
	}
	var text strings.Builder
	var answer json.RawMessage
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if string(b.Input) == "null" {
				b.Input = nil // as the SDK read it
			}
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
	out.Message.Content = text.String()
	if answer != nil && len(out.Message.ToolCalls) == 0 {
		out.Message.Content = string(answer)
		out.FinishReason = "stop"
	}
	if len(msg.Content) == 0 && msg.StopReason == "" {
		return agent.ChatResponse{}, &agent.LLMError{Message: "its answer has no content and no stop_reason"}
	}
	return out, nil
}
