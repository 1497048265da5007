package demo

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"
)

// The demo model's other wires: OpenAI's Responses API (the OpenAI Agents
// SDK's default) and Anthropic's Messages API (the AI SDK's and Anthropic's
// SDKs'), each read into the rules' conversation and answered as the
// provider answers, streamed when the request asks.

// responsesRequest is the part of a Responses API request the rules read.
type responsesRequest struct {
	Instructions string          `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// responsesItem is an item of a Responses API input.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
}

func (req responsesRequest) conversation() (conversation, error) {
	var c conversation
	c.say("system", req.Instructions)
	for _, t := range req.Tools {
		c.offer(t.Name)
	}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		c.say("user", s)
		return c, nil
	}
	var items []responsesItem
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return c, fmt.Errorf("input is neither a string nor a list of items: %w", err)
	}
	for _, it := range items {
		switch it.Type {
		case "function_call":
			c.called(it.CallID, it.Name)
		case "function_call_output":
			c.result(it.CallID, text(it.Output))
		case "", "message":
			c.say(it.Role, text(it.Content))
		}
	}
	return c, nil
}

func (m *demoModel) responses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if !decode(w, r, &req, "a Responses API", "openai") {
		return
	}
	conv, err := req.conversation()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	rep := answer(conv)
	var item map[string]any
	if rep.call != nil {
		n := m.next()
		item = map[string]any{"type": "function_call", "id": "fc_demo_" + n, "call_id": "call_" + n,
			"name": rep.call.name, "arguments": rep.arguments(), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": "msg_demo_" + m.next(), "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": rep.text, "annotations": []any{}}}}
	}
	in, out := conv.inputTokens(), rep.outputTokens()
	resp := map[string]any{
		"id": "resp_demo_" + m.next(), "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"model": ModelID, "output": []any{item}, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
			"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}},
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	// Streamed: the response created, its one item added, its text or
	// arguments, the item done, the response completed.
	sse := newSSE(w)
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		sse.event(typ, fields)
	}
	created := maps.Clone(resp)
	created["status"], created["output"], created["usage"] = "in_progress", []any{}, nil
	event("response.created", map[string]any{"response": created})
	started := maps.Clone(item)
	started["status"] = "in_progress"
	id := item["id"]
	if rep.call != nil {
		started["arguments"] = ""
		event("response.output_item.added", map[string]any{"output_index": 0, "item": started})
		event("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": 0, "delta": item["arguments"]})
		event("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": 0, "arguments": item["arguments"]})
	} else {
		started["content"] = []any{}
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		event("response.output_item.added", map[string]any{"output_index": 0, "item": started})
		event("response.content_part.added", map[string]any{"item_id": id, "output_index": 0, "content_index": 0, "part": part})
		event("response.output_text.delta", map[string]any{"item_id": id, "output_index": 0, "content_index": 0, "delta": rep.text})
		event("response.output_text.done", map[string]any{"item_id": id, "output_index": 0, "content_index": 0, "text": rep.text})
		event("response.content_part.done", map[string]any{"item_id": id, "output_index": 0, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": rep.text, "annotations": []any{}}})
	}
	event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	event("response.completed", map[string]any{"response": resp})
}

// messagesRequest is the part of an Anthropic Messages request the rules
// read.
type messagesRequest struct {
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// messagesBlock is a content block of a Messages request.
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func (req messagesRequest) conversation() conversation {
	var c conversation
	if len(req.System) > 0 {
		c.say("system", text(req.System))
	}
	for _, t := range req.Tools {
		c.offer(t.Name)
	}
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			c.say(m.Role, s)
			continue
		}
		var blocks []messagesBlock
		json.Unmarshal(m.Content, &blocks) //nolint:errcheck // no blocks, nothing said
		said := ""
		for _, b := range blocks {
			switch b.Type {
			case "text":
				said += b.Text
			case "tool_use":
				c.called(b.ID, b.Name)
			case "tool_result":
				c.result(b.ToolUseID, text(b.Content))
			}
		}
		c.say(m.Role, said)
	}
	return c
}

func (m *demoModel) messages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if !decode(w, r, &req, "a Messages API", "anthropic") {
		return
	}
	conv := req.conversation()
	rep := answer(conv)
	block := map[string]any{"type": "text", "text": rep.text}
	stop := "end_turn"
	if rep.call != nil {
		block = map[string]any{"type": "tool_use", "id": "toolu_demo_" + m.next(), "name": rep.call.name, "input": rep.call.args}
		stop = "tool_use"
	}
	in, out := conv.inputTokens(), rep.outputTokens()
	msg := map[string]any{"id": "msg_demo_" + m.next(), "type": "message", "role": "assistant", "model": ModelID,
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": in, "output_tokens": out}}
	if !req.Stream {
		writeJSON(w, http.StatusOK, msg)
		return
	}
	// Streamed: the message started, its one block started, its text or
	// input as one delta, the block stopped, the stop reason, the end.
	sse := newSSE(w)
	started := maps.Clone(msg)
	started["content"], started["stop_reason"] = []any{}, nil
	started["usage"] = map[string]int{"input_tokens": in, "output_tokens": 1}
	sse.event("message_start", map[string]any{"type": "message_start", "message": started})
	var empty map[string]any
	var delta map[string]any
	if rep.call != nil {
		empty = map[string]any{"type": "tool_use", "id": block["id"], "name": rep.call.name, "input": map[string]any{}}
		delta = map[string]any{"type": "input_json_delta", "partial_json": rep.arguments()}
	} else {
		empty = map[string]any{"type": "text", "text": ""}
		delta = map[string]any{"type": "text_delta", "text": rep.text}
	}
	sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": empty})
	sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": out}})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

// sse writes server-sent events, each flushed as it is written.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	return sse{w}
}

// event writes an event with a name (the Responses and Messages APIs').
func (s sse) event(name string, v any) {
	data, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data)
	http.NewResponseController(s.w).Flush() //nolint:errcheck // the client went away
}

// data writes an unnamed event (Chat Completions').
func (s sse) data(v any) {
	data, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	http.NewResponseController(s.w).Flush() //nolint:errcheck // the client went away
}

// done ends a Chat Completions stream.
func (s sse) done() {
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	http.NewResponseController(s.w).Flush() //nolint:errcheck // the client went away
}
