package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/memo"
)

// outputSchemaName names the structured output of a completion: the
// response format's schema for openai, the forced tool for anthropic.
const outputSchemaName = "final_answer"

// openAIProvider speaks Chat Completions: openai-go sends the request
// (base URL, headers, middleware) and hands back the answer's bytes; the
// body is encoded and the answer read here, with only the fields used.
type openAIProvider struct {
	model  string
	client openai.Client
}

// newOpenAI builds the client from openAIOptions alone, not through
// openai.NewClient, so nothing is read from the environment
// (OPENAI_API_KEY, OPENAI_BASE_URL): the model's record is all there is.
func newOpenAI(c *client) *openAIProvider {
	// The service's options are the client's, layered as the SDK layers a
	// service's own.
	svc := openai.NewChatCompletionService(openAIOptions(c)...)
	return &openAIProvider{model: c.model.Model, client: openai.Client{Options: svc.Options}}
}

// openAIOptions are the requests' options: the model's base URL and
// headers, c's HTTP client. The SDK neither retries nor authenticates;
// Complete does both.
func openAIOptions(c *client) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithBaseURL(c.base.String()),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
	}
	for k, v := range c.model.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return opts
}

func (p *openAIProvider) name() string { return "openai" }

func (p *openAIProvider) attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
	body, err := p.body(req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	capture := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		return rec.capture(r, next)
	})
	var raw []byte
	if err := p.client.Post(ctx, "chat/completions", body, &raw, capture); err != nil {
		return agent.ChatResponse{}, err
	}
	return openAIAnswer(raw, rec.header)
}

// chatBody is a Chat Completions request.
type chatBody struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []chatTool      `json:"tools,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	MaxCompletionTokens int64           `json:"max_completion_tokens,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
}

// chatMessage is a message of a Chat Completions request; its fields point
// into the ChatRequest's.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID *string        `json:"tool_call_id,omitempty"`
}

// chatToolCall is an assistant message's function call.
type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatTool is a function offered to the model.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// responseFormat asks for a structured answer.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	} `json:"json_schema"`
}

// body encodes a ChatRequest as a Chat Completions request. The schemas
// are sent as they are, once checked to be JSON objects.
func (p *openAIProvider) body(req agent.ChatRequest) ([]byte, error) {
	b := chatBody{Model: p.model, Messages: make([]chatMessage, len(req.Messages))}
	for i := range req.Messages {
		m := &req.Messages[i]
		out := &b.Messages[i]
		switch m.Role {
		case agent.RoleSystem, agent.RoleUser:
			out.Role, out.Content = m.Role, &m.Content
		case agent.RoleTool:
			out.Role, out.Content, out.ToolCallID = m.Role, &m.Content, &m.ToolCallID
		case agent.RoleAssistant:
			out.Role = m.Role
			if m.Content != "" || len(m.ToolCalls) == 0 {
				out.Content = &m.Content
			}
			if len(m.ToolCalls) > 0 {
				out.ToolCalls = make([]chatToolCall, len(m.ToolCalls))
			}
			for j, tc := range m.ToolCalls {
				c := &out.ToolCalls[j]
				c.ID, c.Type = tc.ID, "function"
				c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments
			}
		default:
			return nil, &agent.LLMError{Message: fmt.Sprintf("chat message role %q is not system, user, assistant or tool", m.Role)}
		}
	}
	if len(req.Tools) > 0 {
		b.Tools = make([]chatTool, len(req.Tools))
	}
	for i, t := range req.Tools {
		schema, err := schemaObject(t.Parameters, "parameters of function "+t.Name)
		if err != nil {
			return nil, err
		}
		tool := &b.Tools[i]
		tool.Type = "function"
		tool.Function.Name, tool.Function.Description, tool.Function.Parameters = t.Name, t.Description, schema
	}
	b.Temperature = req.Temperature
	if req.MaxOutputTokens > 0 {
		b.MaxCompletionTokens = req.MaxOutputTokens
	}
	if len(req.OutputSchema) > 0 {
		schema, err := schemaObject(req.OutputSchema, "output_schema")
		if err != nil {
			return nil, err
		}
		f := &responseFormat{Type: "json_schema"}
		f.JSONSchema.Name, f.JSONSchema.Schema, f.JSONSchema.Strict = outputSchemaName, schema, strictSchemas.Get(schema, strictSchema)
		b.ResponseFormat = f
	}
	return json.Marshal(b)
}

// openAIAnswer reads a chat.completion, sent with header, as a
// ChatResponse. A body that is not JSON, by its type or its bytes, is an
// error that is not an *agent.LLMError: the attempt's failure says what it
// was.
func openAIAnswer(raw []byte, header http.Header) (agent.ChatResponse, error) {
	if !jsonMedia(header) {
		return agent.ChatResponse{}, errNotJSON
	}
	resp, choices, err := wire.ChatCompletion(raw)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	if choices == 0 {
		return agent.ChatResponse{}, &agent.LLMError{Message: "its answer has no choices"}
	}
	return resp, nil
}

// errNotJSON is the error of an answer whose type is not JSON.
var errNotJSON = errors.New("the answer's type is not JSON")

// jsonMedia reports whether a response's Content-Type is JSON
// (application/json or a +json type), as the SDKs decode it.
func jsonMedia(h http.Header) bool {
	ct := h.Get("Content-Type")
	if ct == "application/json" {
		return true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return strings.Contains(mt, "application/json") || strings.HasSuffix(mt, "+json")
}

// emptySchema is the schema of a function that names none.
var emptySchema = json.RawMessage(`{"type":"object"}`)

// schemaObject checks that raw is a JSON object: a JSON Schema to send as
// it is ({"type":"object"} when empty).
func schemaObject(raw json.RawMessage, what string) (json.RawMessage, error) {
	if len(raw) == 0 {
		return emptySchema, nil
	}
	if !objects.Get(raw, isObject) {
		return nil, &agent.LLMError{Message: what + " is not a JSON Schema object"}
	}
	return raw, nil
}

// objects remembers isObject of the schemas seen.
var objects memo.ByBytes[bool]

// isObject reports whether b is one JSON object.
func isObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b)
}

// strictSchemas remembers strictSchema of the output schemas seen.
var strictSchemas memo.ByBytes[bool]

// strictSchema is strictCompatible of a JSON object schema.
func strictSchema(schema []byte) bool {
	var v any
	_ = json.Unmarshal(schema, &v)
	return strictCompatible(v)
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
