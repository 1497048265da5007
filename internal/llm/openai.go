package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/memo"
)

// outputSchemaName names the structured output of a completion: the
// response format's schema for openai, the forced tool for anthropic.
const outputSchemaName = "final_answer"

// openAIProvider speaks Chat Completions: the body is encoded and the
// answer read here, with only the fields used, and the request is one POST
// through the model's HTTP client, as the relay sends an agent's.
// openai-go's plumbing (its request config, middleware chain and origin
// checks, rebuilt for every request) cost 3.5 % of the server's CPU in a
// burst of defined runs; the outbound client already checks addresses and
// redirects, and applies the credentials.
type openAIProvider struct {
	model string
	// endpoint is <base_url>/chat/completions.
	endpoint string
	// header is every request's: the model's headers over the body's
	// media type, the answer's, and the outbound client's User-Agent.
	header http.Header
	http   *http.Client
}

func newOpenAI(c *client) *openAIProvider {
	h := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json"},
		"User-Agent":   {c.pool.opts.Outbound.Options().UserAgent},
	}
	for k, v := range c.model.Headers {
		h.Set(k, v)
	}
	return &openAIProvider{
		model:    c.model.Model,
		endpoint: c.base.ResolveReference(&url.URL{Path: "chat/completions"}).String(),
		header:   h,
		http:     c.http,
	}
}

func (p *openAIProvider) name() string { return "openai" }

func (p *openAIProvider) attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
	body, err := p.body(req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return agent.ChatResponse{}, &agent.LLMError{Message: "the request could not be made: " + err.Error()}
	}
	hr.Header = p.header.Clone()
	res, err := rec.capture(hr, p.http.Do)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode >= 400 {
		// failure reads the status and the body capture kept.
		return agent.ChatResponse{}, errErrorStatus
	}
	raw, err := io.ReadAll(res.Body)
	if err != nil {
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

// errErrorStatus ends an attempt answered with an error status; failure
// classifies it by the status and the body the exchange kept.
var errErrorStatus = errors.New("the model answered with an error status")

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
