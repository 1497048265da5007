package llmtest

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/model"
)

// NewAnthropicServer starts a scripted model speaking the Messages API at
// POST /v1/messages; its URL is the server's root, as Anthropic documents
// its base URL.
func NewAnthropicServer(t testing.TB, script Script, opts ...Option) *Server {
	s := newServer(t, model.Anthropic, script, opts, wireFormat{path: "/v1/messages", decode: decodeAnthropic,
		errorBody: anthropicError, answer: anthropicMessage, stream: anthropicEvents})
	s.URL = s.Server.URL
	return s
}

// anthropicError is Anthropic's error body.
func anthropicError(status int, message string) any {
	typ := errorType(status, "api_error")
	if status == 529 {
		typ = "overloaded_error"
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}}
}

// decodeAnthropic reads a messages request: max_tokens is required, and
// the final_answer tool's schema is its OutputSchema.
func decodeAnthropic(body json.RawMessage) (Request, string) {
	req, refusal := decode(wire.Messages, body, "the body is not a messages request")
	if refusal != "" {
		return req, refusal
	}
	if req.MaxTokens <= 0 {
		return Request{}, "max_tokens: Field required"
	}
	var in struct {
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	_ = json.Unmarshal(body, &in)
	req.ToolChoice = in.ToolChoice
	tools := req.Tools[:0]
	for _, t := range req.Tools {
		if t.Name == FinalAnswerTool {
			req.OutputSchema = t.Parameters
			continue
		}
		tools = append(tools, t)
	}
	req.Tools = tools
	return req, ""
}

// anthropicContent is the content blocks answering req with a (text,
// then tool_use blocks, with the final_answer call of a JSON answer) and
// the stop_reason.
func anthropicContent(req Request, a Answer) (content []map[string]any, stop string) {
	content = []map[string]any{}
	stop = "end_turn"
	if a.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.Text})
	}
	for _, tc := range a.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": json.RawMessage(tc.Arguments)})
		stop = "tool_use"
	}
	if a.JSON != nil {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_answer_" + strconv.Itoa(req.N),
			"name": FinalAnswerTool, "input": a.JSON})
		stop = "tool_use"
	}
	if a.FinishReason != "" {
		stop = a.FinishReason
	}
	return content, stop
}

// anthropicHead is a message object with no content nor stop_reason yet,
// as message_start sends it.
func anthropicHead(req Request, a Answer) map[string]any {
	id := a.ID
	if id == "" {
		id = "msg_" + strconv.Itoa(req.N)
	}
	return map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": a.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
	}
}

// anthropicUsage is a message's usage object, its output tokens out.
func anthropicUsage(a Answer, out int64) map[string]any {
	return map[string]any{"input_tokens": a.InputTokens, "output_tokens": out,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

// anthropicMessage is a message object answering req with a.
func anthropicMessage(req Request, a Answer) any {
	out := anthropicHead(req, a)
	out["content"], out["stop_reason"] = anthropicContent(req, a)
	if !a.NoUsage {
		out["usage"] = anthropicUsage(a, a.OutputTokens)
	}
	return out
}

// anthropicEvents are the events of a streamed message answering req with
// a: message_start (input tokens), a ping, each block's start, deltas
// (text_delta, input_json_delta) and stop, message_delta (stop_reason and
// output tokens), message_stop.
func anthropicEvents(req Request, a Answer) []event {
	head := anthropicHead(req, a)
	head["usage"] = anthropicUsage(a, 1)
	events := []event{
		{"message_start", map[string]any{"type": "message_start", "message": head}},
		{"ping", map[string]any{"type": "ping"}},
	}
	add := func(name string, data map[string]any) {
		data["type"] = name
		events = append(events, event{name, data})
	}
	content, stop := anthropicContent(req, a)
	for i, b := range content {
		if b["type"] == "text" {
			add("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, p := range pieces(b["text"].(string)) {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": p}})
			}
		} else {
			add("content_block_start", map[string]any{"index": i, "content_block": map[string]any{
				"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			parts := append([]string{""}, pieces(string(b["input"].(json.RawMessage)))...)
			for _, p := range parts {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
			}
		}
		add("content_block_stop", map[string]any{"index": i})
	}
	add("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.OutputTokens}})
	add("message_stop", map[string]any{})
	return events
}
