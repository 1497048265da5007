package llmtest

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
)

// NewOpenAIServer starts a scripted model speaking Chat Completions at
// POST /v1/chat/completions; its URL ends in /v1.
func NewOpenAIServer(t testing.TB, script Script) *Server {
	s := newServer(t, model.OpenAI, script, wireFormat{path: "/v1/chat/completions", decode: decodeOpenAI,
		errorBody: openAIError, answer: openAICompletion})
	s.URL = s.Server.URL + "/v1"
	return s
}

// openAIError is OpenAI's error body.
func openAIError(status int, message string) any {
	typ := errorType(status, "server_error")
	return map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil}}
}

type openAIRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           int64    `json:"max_tokens"`
	MaxCompletionTokens int64    `json:"max_completion_tokens"`
	ResponseFormat      struct {
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// text reads a content that is a string or an array of text parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	for _, p := range parts {
		s += p.Text
	}
	return s
}

// decodeOpenAI reads a chat completion request.
func decodeOpenAI(body json.RawMessage) (Request, string) {
	var in openAIRequest
	if json.Unmarshal(body, &in) != nil {
		return Request{}, "the body is not a chat completion request"
	}
	req := Request{Model: in.Model, Temperature: in.Temperature, MaxTokens: in.MaxCompletionTokens,
		OutputSchema: in.ResponseFormat.JSONSchema.Schema}
	if req.MaxTokens == 0 {
		req.MaxTokens = in.MaxTokens
	}
	for _, m := range in.Messages {
		cm := agent.ChatMessage{Role: m.Role, Content: text(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, agent.ChatToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, cm)
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, agent.ChatTool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req, ""
}

// openAICompletion is a chat.completion object answering req with a.
func openAICompletion(req Request, a Answer) any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "stop"
	switch {
	case len(a.ToolCalls) > 0:
		var calls []any
		for _, tc := range a.ToolCalls {
			calls = append(calls, map[string]any{"id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
		if a.Text != "" {
			msg["content"] = a.Text
		}
	case a.JSON != nil:
		msg["content"] = string(a.JSON)
	default:
		msg["content"] = a.Text
	}
	if a.FinishReason != "" {
		finish = a.FinishReason
	}
	id := a.ID
	if id == "" {
		id = "chatcmpl-" + strconv.Itoa(req.N)
	}
	out := map[string]any{
		"id": id, "object": "chat.completion", "created": 1767225600, "model": a.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
	}
	if a.Choiceless {
		out["choices"] = []any{}
	}
	if !a.NoUsage {
		out["usage"] = map[string]any{"prompt_tokens": a.InputTokens, "completion_tokens": a.OutputTokens,
			"total_tokens": a.InputTokens + a.OutputTokens}
	}
	return out
}
