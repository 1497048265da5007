package llmtest

import (
	"encoding/json"
	"strconv"

	"github.com/agentplane/agentplane/internal/llm/wire"
)

// decodeResponses reads a Responses request.
func decodeResponses(body json.RawMessage) (Request, string) {
	return decode(wire.Responses, body, "the body is not a responses request")
}

// responseItems are the output items answering req with a: a message of
// the text (or the JSON answer) unless the answer is calls alone, then a
// function_call item of each call.
func responseItems(req Request, a Answer) []map[string]any {
	var items []map[string]any
	content := a.Text
	if a.JSON != nil && len(a.ToolCalls) == 0 {
		content = string(a.JSON)
	}
	if content != "" || len(a.ToolCalls) == 0 {
		items = append(items, map[string]any{
			"id": "msg_" + strconv.Itoa(req.N), "type": "message", "status": "completed", "role": "assistant",
			"content": []any{outputText(content)},
		})
	}
	for i, tc := range a.ToolCalls {
		items = append(items, map[string]any{
			"id": "fc_" + strconv.Itoa(req.N) + "_" + strconv.Itoa(i+1), "type": "function_call", "status": "completed",
			"arguments": tc.Arguments, "call_id": tc.ID, "name": tc.Name,
		})
	}
	return items
}

// outputText is an output_text content part.
func outputText(s string) map[string]any {
	return map[string]any{"type": "output_text", "text": s, "annotations": []any{}, "logprobs": []any{}}
}

// responseObject is a response object answering req with a; a's
// FinishReason "length" makes it incomplete (max_output_tokens).
func responseObject(req Request, a Answer) any {
	out := responseHead(req, a)
	out["status"], out["output"] = "completed", responseItems(req, a)
	if a.FinishReason == "length" {
		out["status"], out["incomplete_details"] = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	if !a.NoUsage {
		out["usage"] = map[string]any{
			"input_tokens": a.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": a.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": a.InputTokens + a.OutputTokens,
		}
	}
	return out
}

// responseHead is a response object in progress: no output, no usage.
func responseHead(req Request, a Answer) map[string]any {
	id := a.ID
	if id == "" {
		id = "resp_" + strconv.Itoa(req.N)
	}
	var temperature any = 1.0
	if req.Temperature != nil {
		temperature = *req.Temperature
	}
	var maxTokens any
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	return map[string]any{
		"id": id, "object": "response", "created_at": 1767225600, "status": "in_progress", "background": false,
		"error": nil, "incomplete_details": nil, "instructions": nil, "max_output_tokens": maxTokens, "model": a.Model,
		"output": []any{}, "parallel_tool_calls": true, "previous_response_id": nil,
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": false, "temperature": temperature,
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": []any{},
		"top_p": 1.0, "truncation": "disabled", "usage": nil, "user": nil, "metadata": map[string]any{},
	}
}

// responseEvents are the events of a streamed response answering req with
// a: response.created and response.in_progress; for each output item
// response.output_item.added, its content (content_part.added,
// output_text.delta and .done, content_part.done; or
// function_call_arguments.delta and .done) and response.output_item.done;
// then response.completed (response.incomplete) with the usage. Each
// carries its sequence_number.
func responseEvents(req Request, a Answer) []event {
	var events []event
	add := func(typ string, data map[string]any) {
		data["type"], data["sequence_number"] = typ, len(events)
		events = append(events, event{typ, data})
	}
	head := responseHead(req, a)
	add("response.created", map[string]any{"response": head})
	add("response.in_progress", map[string]any{"response": head})
	for i, item := range responseItems(req, a) {
		id := item["id"]
		switch item["type"] {
		case "message":
			text := item["content"].([]any)[0].(map[string]any)["text"].(string)
			add("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
			at := func(m map[string]any) map[string]any {
				m["item_id"], m["output_index"], m["content_index"] = id, i, 0
				return m
			}
			add("response.content_part.added", at(map[string]any{"part": outputText("")}))
			for _, p := range pieces(text) {
				add("response.output_text.delta", at(map[string]any{"delta": p, "logprobs": []any{}}))
			}
			add("response.output_text.done", at(map[string]any{"text": text, "logprobs": []any{}}))
			add("response.content_part.done", at(map[string]any{"part": outputText(text)}))
		case "function_call":
			args := item["arguments"].(string)
			add("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"id": id, "type": "function_call", "status": "in_progress", "arguments": "",
				"call_id": item["call_id"], "name": item["name"]}})
			for _, p := range pieces(args) {
				add("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": p})
			}
			add("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i,
				"name": item["name"], "arguments": args})
		}
		add("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	done := responseObject(req, a).(map[string]any)
	typ := "response.completed"
	if done["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	add(typ, map[string]any{"response": done})
	return events
}
