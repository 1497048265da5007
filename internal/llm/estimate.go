package llm

import (
	"encoding/json"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
)

// EstimateTokens is the tokens of n bytes of text no provider counted:
// about four bytes a token (four characters of English), as the demo
// model counts its tokens, rounded up.
func EstimateTokens(n int) int64 {
	return int64(n+3) / 4
}

// cutUsage is what is known of the tokens of a stream of api cut short:
// events are those that arrived for the request body (the usage chunk the
// relay asked for among them) and answer what they make. It is the usage
// the provider reported in them where that is whole (a Chat Completions or
// Responses stream's comes at its end; a Messages stream's input tokens
// come at its start, its output tokens at its end), and the rest estimated
// (EstimateTokens): the input tokens from the request, the output tokens
// from the answer relayed when that is more than the provider had counted.
func cutUsage(api string, body []byte, answer agent.ChatResponse, events [][]byte) (u agent.Usage, inEstimated, outEstimated bool) {
	if answer.Usage != nil {
		u = *answer.Usage
		if api != Messages || streamHas(events, "message_delta") {
			return u, false, false
		}
	}
	if u.InputTokens == 0 {
		if req, err := wire.Request(api, body); err == nil {
			u.InputTokens, inEstimated = EstimateTokens(requestChars(req)), true
		}
	}
	if out := EstimateTokens(answerChars(api, answer, events)); out > u.OutputTokens {
		u.OutputTokens, outEstimated = out, true
	}
	return u, inEstimated, outEstimated
}

// streamHas reports whether one of events is of the type typ.
func streamHas(events [][]byte, typ string) bool {
	for _, ev := range events {
		var e struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(wire.EventData(ev), &e) == nil && e.Type == typ {
			return true
		}
	}
	return false
}

// requestChars measures a request's text as the demo model does, each
// message's text and eight bytes more, and also what the demo leaves out
// or guesses: the calls a message carries, each function offered by its
// name, description and parameters' schema as sent, the output schema.
func requestChars(req agent.ChatRequest) int {
	n := len(req.OutputSchema)
	for _, m := range req.Messages {
		n += len(m.Content) + 8
		for _, tc := range m.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments)
		}
	}
	for _, f := range req.Tools {
		n += len(f.Name) + len(f.Description) + len(f.Parameters)
	}
	return n
}

// answerChars measures the answer a stream relayed: its text and its
// calls' names and arguments; a Responses stream's text and arguments as
// their deltas, as its answer has an item only once it is done.
func answerChars(api string, answer agent.ChatResponse, events [][]byte) int {
	n := len(answer.Message.Content)
	for _, tc := range answer.Message.ToolCalls {
		n += len(tc.Name) + len(tc.Arguments)
	}
	if api != Responses {
		return n
	}
	deltas := 0
	for _, ev := range events {
		var e struct {
			Delta json.RawMessage `json:"delta"`
		}
		var s string
		if json.Unmarshal(wire.EventData(ev), &e) == nil && json.Unmarshal(e.Delta, &s) == nil {
			deltas += len(s)
		}
	}
	return max(n, deltas)
}
