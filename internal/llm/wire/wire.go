// Package wire reads the providers' wire formats (OpenAI Chat Completions
// and Responses, Anthropic Messages; answers whole or streamed) in the
// provider-neutral chat shape of agent.ChatRequest and agent.ChatResponse.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
)

// Wire APIs.
const (
	ChatCompletions = "openai.chat_completions"
	Responses       = "openai.responses"
	Messages        = "anthropic.messages"
)

// EventData is the data of a server-sent event, its data lines joined.
func EventData(ev []byte) []byte {
	var data []byte
	n := 0
	for line := range bytes.Lines(ev) {
		line = bytes.TrimRight(line, "\r\n")
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		if n > 0 {
			data = append(data, '\n')
		}
		data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		n++
	}
	return data
}

// OpenAIFinish normalises a finish_reason (the legacy function_call is a
// tool call).
func OpenAIFinish(r string) string {
	if r == "function_call" {
		return "tool_calls"
	}
	return r
}

// AnthropicFinish normalises a stop_reason to the OpenAI vocabulary.
func AnthropicFinish(r string) string {
	switch r {
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	case "":
		return ""
	default:
		return "stop"
	}
}

// Request reads a request body of api in the chat shape: its model the
// name the agent gave; messages (system and developer, user, assistant with
// tool calls, tool results), offered functions, temperature, output token
// limit and output schema. What has no place in the shape (images,
// built-in tools, reasoning items) is left out.
func Request(api string, body []byte) (agent.ChatRequest, error) {
	var req agent.ChatRequest
	var err error
	switch api {
	case ChatCompletions:
		req, err = chatRequest(body)
	case Responses:
		req, err = responsesRequest(body)
	case Messages:
		req, err = messagesRequest(body)
	default:
		return req, &agent.LLMError{Message: fmt.Sprintf("wire API %q is not %s, %s or %s", api, ChatCompletions, Responses, Messages)}
	}
	if err != nil {
		return agent.ChatRequest{}, &agent.LLMError{Message: "the request body is not a " + api + " request: " + err.Error()}
	}
	return req, nil
}

// Answer reads an answer of api in the chat shape: a stream reassembled
// from its events when there are any, else the body. Its finish reason is
// in the OpenAI vocabulary (stop, tool_calls, length, content_filter).
func Answer(api string, body []byte, events [][]byte) (agent.ChatResponse, error) {
	var resp agent.ChatResponse
	var err error
	switch {
	case api == ChatCompletions && events != nil:
		resp, err = chatStream(events)
	case api == ChatCompletions:
		resp, err = chatAnswer(body)
	case api == Responses && events != nil:
		resp, err = responsesStream(events)
	case api == Responses:
		resp, err = responsesAnswer(body)
	case api == Messages && events != nil:
		resp, err = messagesStream(events)
	case api == Messages:
		resp, err = messagesAnswer(body)
	default:
		return resp, &agent.LLMError{Message: fmt.Sprintf("wire API %q is not %s, %s or %s", api, ChatCompletions, Responses, Messages)}
	}
	if err != nil {
		return agent.ChatResponse{}, &agent.LLMError{Message: "the answer is not a " + api + " answer: " + err.Error()}
	}
	return resp, nil
}

// textOf reads a content that is a string or an array of parts, joining
// the text of its text parts (text, input_text, output_text).
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text", "":
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// role maps a provider's role to a chat role: developer is system.
func role(r string) string {
	if r == "developer" {
		return agent.RoleSystem
	}
	return r
}

// arguments is a tool call's arguments as JSON text: "{}" when empty.
func arguments(raw string) string {
	if strings.TrimSpace(raw) == "" {
		return "{}"
	}
	return raw
}

// addCall adds a tool call to the last message when it is the assistant's,
// else as a new assistant message.
func addCall(msgs []agent.ChatMessage, tc agent.ChatToolCall) []agent.ChatMessage {
	if n := len(msgs); n > 0 && msgs[n-1].Role == agent.RoleAssistant {
		msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, tc)
		return msgs
	}
	return append(msgs, agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{tc}})
}
