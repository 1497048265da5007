package wire

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
)

// chatUsage is a Chat Completions usage object.
type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

func (u *chatUsage) usage() *agent.Usage {
	if u == nil {
		return nil
	}
	return &agent.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
}

// chatToolCall is a tool call of an answer, or a part of one in a chunk.
type chatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatAnswer reads a chat.completion.
func chatAnswer(body []byte) (agent.ChatResponse, error) {
	resp, _, err := ChatCompletion(body)
	return resp, err
}

// ChatCompletion reads a chat.completion: its first choice's message and
// finish reason (the function tool calls of the message, others left out),
// its id, model and usage (nil when it reports none), and how many choices
// it has.
func ChatCompletion(body []byte) (resp agent.ChatResponse, choices int, err error) {
	var in struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content   *string        `json:"content"`
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return agent.ChatResponse{}, 0, err
	}
	out := agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant}, ID: in.ID, Model: in.Model, Usage: in.Usage.usage()}
	if len(in.Choices) > 0 {
		ch := in.Choices[0]
		if ch.Message.Content != nil {
			out.Message.Content = *ch.Message.Content
		}
		for _, tc := range ch.Message.ToolCalls {
			if tc.Type == "" || tc.Type == "function" {
				out.Message.ToolCalls = append(out.Message.ToolCalls, agent.ChatToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
		}
		out.FinishReason = OpenAIFinish(ch.FinishReason)
	}
	return out, len(in.Choices), nil
}

// chatChunk is a chat.completion.chunk.
type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string        `json:"content"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// chatStream reassembles a streamed chat completion (its first choice).
func chatStream(events [][]byte) (agent.ChatResponse, error) {
	out := agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant}}
	var text strings.Builder
	calls := map[int]int{} // a call's index in the stream → in the message
	for _, ev := range events {
		data := EventData(ev)
		if len(data) == 0 || string(data) == "[DONE]" {
			continue
		}
		var ch chatChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return agent.ChatResponse{}, err
		}
		out.ID, out.Model = cmp.Or(ch.ID, out.ID), cmp.Or(ch.Model, out.Model)
		if ch.Usage != nil {
			out.Usage = ch.Usage.usage()
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != nil {
				text.WriteString(*c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				i, ok := calls[tc.Index]
				if !ok {
					i = len(out.Message.ToolCalls)
					calls[tc.Index] = i
					out.Message.ToolCalls = append(out.Message.ToolCalls, agent.ChatToolCall{})
				}
				call := &out.Message.ToolCalls[i]
				call.ID = cmp.Or(tc.ID, call.ID)
				call.Name = cmp.Or(tc.Function.Name, call.Name)
				call.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				out.FinishReason = OpenAIFinish(*c.FinishReason)
			}
		}
	}
	out.Message.Content = text.String()
	return out, nil
}

// responsesObject is a Responses response object.
type responsesObject struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Status            string          `json:"status"`
	Output            []responsesItem `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

// response maps a response object to a ChatResponse: its messages' text
// and its function calls, its status as a finish reason.
func (r responsesObject) response() agent.ChatResponse {
	out := agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant}, ID: r.ID, Model: r.Model}
	for _, m := range responsesMessages(nil, r.Output) {
		out.Message.Content += m.Content
		out.Message.ToolCalls = append(out.Message.ToolCalls, m.ToolCalls...)
	}
	if r.Usage != nil {
		out.Usage = &agent.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}
	}
	switch {
	case r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter":
		out.FinishReason = "content_filter"
	case r.Status == "incomplete":
		out.FinishReason = "length"
	case r.Status == "completed" && len(out.Message.ToolCalls) > 0:
		out.FinishReason = "tool_calls"
	case r.Status == "completed":
		out.FinishReason = "stop"
	}
	return out
}

// responsesAnswer reads a response object.
func responsesAnswer(body []byte) (agent.ChatResponse, error) {
	var r responsesObject
	if err := json.Unmarshal(body, &r); err != nil {
		return agent.ChatResponse{}, err
	}
	return r.response(), nil
}

// responsesStream reads a streamed response: the response object of its
// last lifecycle event (response.completed, …), with the items of
// response.output_item.done events when that object lists none.
func responsesStream(events [][]byte) (agent.ChatResponse, error) {
	var last responsesObject
	var done []responsesItem
	for _, ev := range events {
		var e struct {
			Type     string           `json:"type"`
			Response *responsesObject `json:"response"`
			Item     responsesItem    `json:"item"`
		}
		if err := json.Unmarshal(EventData(ev), &e); err != nil {
			return agent.ChatResponse{}, err
		}
		switch {
		case e.Type == "response.output_item.done":
			done = append(done, e.Item)
		case e.Response != nil:
			last = *e.Response
		}
	}
	if len(last.Output) == 0 {
		last.Output = done
	}
	return last.response(), nil
}

// AnthropicUsage is a Messages usage object.
type AnthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Input is all the input tokens, cached or not.
func (u AnthropicUsage) Input() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// AnthropicMessage is a message object.
type AnthropicMessage struct {
	ID         string           `json:"id"`
	Model      string           `json:"model"`
	Content    []AnthropicBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      *AnthropicUsage  `json:"usage"`
}

func (a AnthropicMessage) response() agent.ChatResponse {
	out := agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant}, ID: a.ID, Model: a.Model,
		FinishReason: AnthropicFinish(a.StopReason)}
	if msgs := anthropicMessages(nil, agent.RoleAssistant, a.Content); len(msgs) > 0 {
		out.Message = msgs[len(msgs)-1]
	}
	if a.Usage != nil {
		out.Usage = &agent.Usage{InputTokens: a.Usage.Input(), OutputTokens: a.Usage.OutputTokens}
	}
	return out
}

// messagesAnswer reads a message object.
func messagesAnswer(body []byte) (agent.ChatResponse, error) {
	var a AnthropicMessage
	if err := json.Unmarshal(body, &a); err != nil {
		return agent.ChatResponse{}, err
	}
	return a.response(), nil
}

// messagesStream reassembles a streamed message: message_start's message,
// its blocks from content_block_start and their deltas, message_delta's
// stop_reason and output tokens.
func messagesStream(events [][]byte) (agent.ChatResponse, error) {
	var msg AnthropicMessage
	partial := map[int]string{} // a tool_use block's input, as streamed
	for _, ev := range events {
		var e struct {
			Type         string           `json:"type"`
			Message      AnthropicMessage `json:"message"`
			Index        int              `json:"index"`
			ContentBlock AnthropicBlock   `json:"content_block"`
			Delta        struct {
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage *AnthropicUsage `json:"usage"`
		}
		if err := json.Unmarshal(EventData(ev), &e); err != nil {
			return agent.ChatResponse{}, err
		}
		switch e.Type {
		case "message_start":
			msg = e.Message
		case "content_block_start":
			for len(msg.Content) <= e.Index {
				msg.Content = append(msg.Content, AnthropicBlock{})
			}
			msg.Content[e.Index] = e.ContentBlock
		case "content_block_delta":
			if e.Index < len(msg.Content) {
				msg.Content[e.Index].Text += e.Delta.Text
				partial[e.Index] += e.Delta.PartialJSON
			}
		case "message_delta":
			msg.StopReason = cmp.Or(e.Delta.StopReason, msg.StopReason)
			if u := e.Usage; u != nil {
				if msg.Usage == nil {
					msg.Usage = &AnthropicUsage{}
				}
				msg.Usage.OutputTokens = u.OutputTokens
				if u.Input() > 0 {
					msg.Usage.InputTokens, msg.Usage.CacheCreationInputTokens, msg.Usage.CacheReadInputTokens =
						u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens
				}
			}
		}
	}
	for i, p := range partial {
		if p != "" {
			msg.Content[i].Input = json.RawMessage(p)
		}
	}
	return msg.response(), nil
}
