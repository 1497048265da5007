package llmtest

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/model"
)

// NewOpenAIServer starts a scripted model speaking Chat Completions at
// POST /v1/chat/completions and the Responses API at POST /v1/responses;
// its URL ends in /v1.
func NewOpenAIServer(t testing.TB, script Script, opts ...Option) *Server {
	s := newServer(t, model.OpenAI, script, opts,
		wireFormat{path: "/v1/chat/completions", decode: decodeOpenAI, errorBody: openAIError,
			answer: openAICompletion, stream: openAIChunks, done: true},
		wireFormat{path: "/v1/responses", decode: decodeResponses, errorBody: openAIError,
			answer: responseObject, stream: responseEvents})
	s.URL = s.Server.URL + "/v1"
	return s
}

// openAIError is OpenAI's error body.
func openAIError(status int, message string) any {
	typ := errorType(status, "server_error")
	return map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil}}
}

// decodeOpenAI reads a chat completion request.
func decodeOpenAI(body json.RawMessage) (Request, string) {
	return decode(wire.ChatCompletions, body, "the body is not a chat completion request")
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
	out := map[string]any{
		"id": completionID(req, a), "object": "chat.completion", "created": 1767225600, "model": a.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
	}
	if a.Choiceless {
		out["choices"] = []any{}
	}
	if !a.NoUsage {
		out["usage"] = openAIUsage(a)
	}
	return out
}

// openAIUsage is a chat completion's usage object.
func openAIUsage(a Answer) map[string]any {
	return map[string]any{"prompt_tokens": a.InputTokens, "completion_tokens": a.OutputTokens,
		"total_tokens": a.InputTokens + a.OutputTokens}
}

// completionID is a chat completion's id: a's, or one numbered by req.
func completionID(req Request, a Answer) string {
	if a.ID != "" {
		return a.ID
	}
	return "chatcmpl-" + strconv.Itoa(req.N)
}

// openAIChunks are the chat.completion.chunk events answering req with a:
// the role, the content in deltas, each tool call (its id and name, then
// its arguments), the finish reason, and with stream_options.include_usage
// a last chunk of no choices carrying the usage (every chunk before it has
// "usage": null).
func openAIChunks(req Request, a Answer) []event {
	var opts struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(req.Body, &opts)
	withUsage := opts.StreamOptions.IncludeUsage && !a.NoUsage
	var events []event
	add := func(choices []any, usage any) {
		c := map[string]any{"id": completionID(req, a), "object": "chat.completion.chunk", "created": 1767225600,
			"model": a.Model, "system_fingerprint": nil, "choices": choices}
		if withUsage {
			c["usage"] = usage
		}
		events = append(events, event{data: c})
	}
	chunk := func(delta map[string]any, finish any) {
		add([]any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}, nil)
	}
	content := a.Text
	if a.JSON != nil && len(a.ToolCalls) == 0 {
		content = string(a.JSON)
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	if content != "" {
		for _, p := range pieces(content) {
			chunk(map[string]any{"content": p}, nil)
		}
	}
	finish := "stop"
	for i, tc := range a.ToolCalls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil)
		for _, p := range pieces(tc.Arguments) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil)
		}
		finish = "tool_calls"
	}
	if a.FinishReason != "" {
		finish = a.FinishReason
	}
	chunk(map[string]any{}, finish)
	if withUsage {
		add([]any{}, openAIUsage(a))
	}
	return events
}
