package wire

import (
	"encoding/json"
	"fmt"

	"github.com/agentplane/agentplane/internal/agent"
)

// chatRequest reads a Chat Completions request.
func chatRequest(body []byte) (agent.ChatRequest, error) {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Arguments   string          `json:"arguments"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	var in struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Name       string          `json:"name"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string   `json:"id"`
				Type     string   `json:"type"`
				Function function `json:"function"`
			} `json:"tool_calls"`
			FunctionCall *function `json:"function_call"`
		} `json:"messages"`
		Tools []struct {
			Type     string   `json:"type"`
			Function function `json:"function"`
		} `json:"tools"`
		Functions           []function `json:"functions"`
		Temperature         *float64   `json:"temperature"`
		MaxTokens           int64      `json:"max_tokens"`
		MaxCompletionTokens int64      `json:"max_completion_tokens"`
		ResponseFormat      struct {
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return agent.ChatRequest{}, err
	}
	req := agent.ChatRequest{Model: in.Model, Temperature: in.Temperature, MaxOutputTokens: in.MaxCompletionTokens,
		OutputSchema: in.ResponseFormat.JSONSchema.Schema}
	if req.MaxOutputTokens == 0 {
		req.MaxOutputTokens = in.MaxTokens
	}
	for _, m := range in.Messages {
		cm := agent.ChatMessage{Role: role(m.Role), Content: textOf(m.Content), ToolCallID: m.ToolCallID}
		if m.Role == "function" { // the legacy answer of a function_call
			cm.Role, cm.ToolCallID = agent.RoleTool, m.Name
		}
		for _, tc := range m.ToolCalls {
			if tc.Type == "" || tc.Type == "function" {
				cm.ToolCalls = append(cm.ToolCalls, agent.ChatToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
		}
		if fc := m.FunctionCall; fc != nil {
			cm.ToolCalls = append(cm.ToolCalls, agent.ChatToolCall{ID: fc.Name, Name: fc.Name, Arguments: fc.Arguments})
		}
		req.Messages = append(req.Messages, cm)
	}
	for _, t := range in.Tools {
		if t.Type == "" || t.Type == "function" {
			req.Tools = append(req.Tools, agent.ChatTool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		}
	}
	for _, f := range in.Functions {
		req.Tools = append(req.Tools, agent.ChatTool{Name: f.Name, Description: f.Description, Parameters: f.Parameters})
	}
	return req, nil
}

// responsesItem is an input or output item of the Responses API.
type responsesItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesMessages maps items to chat messages: messages by role, a
// function_call to an assistant's tool call, a function_call_output to a
// tool message; other items (reasoning, built-in tools' calls) are left
// out.
func responsesMessages(msgs []agent.ChatMessage, items []responsesItem) []agent.ChatMessage {
	for _, it := range items {
		switch it.Type {
		case "", "message":
			msgs = append(msgs, agent.ChatMessage{Role: role(it.Role), Content: textOf(it.Content)})
		case "function_call":
			msgs = addCall(msgs, agent.ChatToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case "function_call_output":
			msgs = append(msgs, agent.ChatMessage{Role: agent.RoleTool, ToolCallID: it.CallID, Content: textOf(it.Output)})
		}
	}
	return msgs
}

// responsesRequest reads a Responses request.
func responsesRequest(body []byte) (agent.ChatRequest, error) {
	var in struct {
		Model        string          `json:"model"`
		Instructions json.RawMessage `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
		Temperature     *float64 `json:"temperature"`
		MaxOutputTokens int64    `json:"max_output_tokens"`
		Text            struct {
			Format struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"text"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return agent.ChatRequest{}, err
	}
	req := agent.ChatRequest{Model: in.Model, Temperature: in.Temperature, MaxOutputTokens: in.MaxOutputTokens,
		OutputSchema: in.Text.Format.Schema}
	if s := textOf(in.Instructions); s != "" {
		req.Messages = append(req.Messages, agent.ChatMessage{Role: agent.RoleSystem, Content: s})
	}
	var s string
	var items []responsesItem
	switch {
	case json.Unmarshal(in.Input, &s) == nil:
		req.Messages = append(req.Messages, agent.ChatMessage{Role: agent.RoleUser, Content: s})
	case json.Unmarshal(in.Input, &items) == nil:
		req.Messages = responsesMessages(req.Messages, items)
	case len(in.Input) > 0:
		return agent.ChatRequest{}, fmt.Errorf("input is neither a string nor a list of items")
	}
	for _, t := range in.Tools {
		if t.Type == "function" {
			req.Tools = append(req.Tools, agent.ChatTool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	return req, nil
}

// AnthropicBlock is a content block of a request or an answer.
type AnthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// anthropicBlocks reads a content that is a string or an array of blocks.
func anthropicBlocks(raw json.RawMessage) []AnthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []AnthropicBlock{{Type: "text", Text: s}}
	}
	var bs []AnthropicBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// anthropicMessages maps a message's blocks to chat messages: text and
// tool_use blocks make one message of role, each tool_result a tool
// message, in their order.
func anthropicMessages(msgs []agent.ChatMessage, role string, blocks []AnthropicBlock) []agent.ChatMessage {
	cm := agent.ChatMessage{Role: role}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			cm.Content += b.Text
		case "tool_use":
			cm.ToolCalls = append(cm.ToolCalls, agent.ChatToolCall{ID: b.ID, Name: b.Name, Arguments: arguments(string(b.Input))})
		case "tool_result":
			msgs = append(msgs, agent.ChatMessage{Role: agent.RoleTool, ToolCallID: b.ToolUseID, Content: textOf(b.Content)})
		}
	}
	if cm.Content != "" || len(cm.ToolCalls) > 0 {
		msgs = append(msgs, cm)
	}
	return msgs
}

// messagesRequest reads a Messages request.
func messagesRequest(body []byte) (agent.ChatRequest, error) {
	var in struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Temperature *float64 `json:"temperature"`
		MaxTokens   int64    `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return agent.ChatRequest{}, err
	}
	req := agent.ChatRequest{Model: in.Model, Temperature: in.Temperature, MaxOutputTokens: in.MaxTokens}
	if s := textOf(in.System); s != "" {
		req.Messages = append(req.Messages, agent.ChatMessage{Role: agent.RoleSystem, Content: s})
	}
	for _, m := range in.Messages {
		req.Messages = anthropicMessages(req.Messages, m.Role, anthropicBlocks(m.Content))
	}
	for _, t := range in.Tools {
		if len(t.InputSchema) > 0 { // server tools (web search, …) have none
			req.Tools = append(req.Tools, agent.ChatTool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
		}
	}
	return req, nil
}
