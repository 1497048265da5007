package llm

import (
	"bytes"
	"encoding/json"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
)

// Normalize reads a relayed exchange as a plan step's completion: the
// agent's request body in api's wire format as a ChatRequest (its model
// the name the agent gave), and the answer, streamed or not, as a
// ChatResponse with the usage the relay counted. A nil resp gives a zero
// ChatResponse, and one cut before any of its answer came a ChatResponse
// with that usage alone; an error answer gives the request and an
// *agent.LLMError with the provider's status and words. What the relay
// read of the exchange is taken rather than read again when body is the
// one relayed, and resp lets go of it either way.
func Normalize(api string, body []byte, resp *RelayResponse) (agent.ChatRequest, agent.ChatResponse, error) {
	var read *relayRead
	if resp != nil && resp.read != nil {
		if bytes.Equal(resp.read.body, body) {
			read = resp.read // what the relay read of this very exchange
		}
		resp.read = nil // let go: a run may hold resp as long as it runs
	}
	var req agent.ChatRequest
	var err error
	if read != nil {
		req = read.asked
	} else {
		req, err = wire.Request(api, body)
	}
	if err != nil || resp == nil {
		return req, agent.ChatResponse{}, err
	}
	if resp.Status >= 400 {
		return req, agent.ChatResponse{}, &agent.LLMError{Status: resp.Status,
			Message: providerMessage(&exchange{status: resp.Status, header: resp.Header, body: resp.Body})}
	}
	if resp.Cut && len(resp.Events) == 0 {
		// Cut before any of the answer came: its tokens are all there is.
		u := resp.Usage
		return req, agent.ChatResponse{Usage: &u}, nil
	}
	var answer agent.ChatResponse
	if read != nil && read.answer != nil {
		answer = *read.answer
	} else if answer, err = wire.Answer(api, resp.Body, resp.Events); err != nil {
		return req, agent.ChatResponse{}, err
	}
	if resp.Cut || (answer.Usage == nil && resp.Usage != (agent.Usage{})) {
		// A stream cut short counts what the relay made of it, estimates
		// included; a withheld usage chunk is not among the events.
		u := resp.Usage
		answer.Usage = &u
	}
	return req, answer, nil
}

// streamEvent is what the relay reads of each event as it passes.
type streamEvent struct {
	Type    string `json:"type"`
	Choices *[]struct {
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Delta struct {
		StopReason string `json:"stop_reason"`
	} `json:"delta"`
}

// lastEvent reports whether ev ends a stream of api: [DONE] or a finish
// reason; response.completed, incomplete, failed or error; message_stop,
// a stop_reason or error.
func lastEvent(api string, ev []byte) bool {
	data := wire.EventData(ev)
	if string(data) == "[DONE]" {
		return true
	}
	var e streamEvent
	if json.Unmarshal(data, &e) != nil {
		return false
	}
	switch api {
	case ChatCompletions:
		if e.Choices != nil {
			for _, c := range *e.Choices {
				if c.FinishReason != nil {
					return true
				}
			}
		}
		return false
	case Responses:
		switch e.Type {
		case "response.completed", "response.incomplete", "response.failed", "error":
			return true
		}
		return false
	}
	return e.Type == "message_stop" || e.Type == "error" || (e.Type == "message_delta" && e.Delta.StopReason != "")
}

// usageChunk reports whether ev is the chunk of a streamed chat
// completion that carries its usage alone (no choices).
func usageChunk(ev []byte) bool {
	var e streamEvent
	if json.Unmarshal(wire.EventData(ev), &e) != nil {
		return false
	}
	return e.Choices != nil && len(*e.Choices) == 0 && len(e.Usage) > 0 && string(e.Usage) != "null"
}
