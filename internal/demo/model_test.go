package demo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// demoAnswers are the demo APIs' answers to the calls the rules make.
var demoAnswers = map[string]string{
	"payments__getTransaction": `{"id":"tx_1003","amount":2400,"currency":"EUR","customer_id":"cus_cyd","merchant":"Gold & Co"}`,
	"customers__customer":      `{"data":{"customer":{"id":"cus_cyd","name":"Cyd Achterberg","riskScore":0.71}}}`,
	"cases__OpenCase":          `{"caseId":"CASE-1"}`,
}

var demoFunctions = []string{"payments__getTransaction", "customers__customer", "cases__OpenCase"}

// demoSession is a conversation with the demo model through one provider
// SDK, on one of its wires.
type demoSession interface {
	// turn asks the model and returns the calls it asked for (id and
	// function), or its final text.
	turn(ctx context.Context) (calls [][2]string, final string, err error)
	// answer adds a call's result to the conversation.
	answer(id, name, result string)
}

// TestDemoModelConversation holds a conversation with the demo model through
// the official OpenAI and Anthropic Go clients, on each wire it speaks,
// streamed and not, answering its calls as the demo's APIs would: version
// 1's instructions look up and answer, version 2's also open a case for a
// risky transaction.
func TestDemoModelConversation(t *testing.T) {
	apis, err := Start(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer apis.Close()
	wires := map[string]func(instructions string) demoSession{
		"chat completions":             func(in string) demoSession { return newChatSession(apis.Model, in, false) },
		"chat completions, streamed":   func(in string) demoSession { return newChatSession(apis.Model, in, true) },
		"responses":                    func(in string) demoSession { return newResponsesSession(apis.Model, in, false) },
		"responses, streamed":          func(in string) demoSession { return newResponsesSession(apis.Model, in, true) },
		"anthropic messages":           func(in string) demoSession { return newMessagesSession(apis.AnthropicModel(), in, false) },
		"anthropic messages, streamed": func(in string) demoSession { return newMessagesSession(apis.AnthropicModel(), in, true) },
	}
	for wire, open := range wires {
		t.Run(wire, func(t *testing.T) {
			for _, tc := range []struct {
				instructions string
				calls        []string
				final        string
			}{
				{"You help the payments team.", []string{"payments__getTransaction", "customers__customer"}, "It looks risky"},
				{"You help the payments team. " + CaseInstruction, []string{"payments__getTransaction", "customers__customer", "cases__OpenCase"}, "I opened a fraud case"},
			} {
				s := open(tc.instructions)
				var calls []string
				for turn := 0; ; turn++ {
					if turn > 5 {
						t.Fatalf("%q: no final answer after %d turns", tc.instructions, turn)
					}
					asked, final, err := s.turn(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if len(asked) == 0 {
						if !strings.Contains(final, tc.final) {
							t.Fatalf("%q: final answer %q, want %q", tc.instructions, final, tc.final)
						}
						break
					}
					for _, c := range asked {
						calls = append(calls, c[1])
						s.answer(c[0], c[1], demoAnswers[c[1]])
					}
				}
				if strings.Join(calls, ",") != strings.Join(tc.calls, ",") {
					t.Errorf("%q: calls %v, want %v", tc.instructions, calls, tc.calls)
				}
			}
		})
	}
}

type chatSession struct {
	cl     openai.Client
	params openai.ChatCompletionNewParams
	stream bool
}

func newChatSession(base, instructions string, stream bool) *chatSession {
	s := &chatSession{cl: openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("unused"), option.WithMaxRetries(0)), stream: stream}
	s.params = openai.ChatCompletionNewParams{Model: ModelID,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(instructions), openai.UserMessage("triage tx_1003")}}
	for _, name := range demoFunctions {
		s.params.Tools = append(s.params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name,
			Parameters: shared.FunctionParameters{"type": "object"}}))
	}
	if stream {
		s.params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	return s
}

func (s *chatSession) turn(ctx context.Context) ([][2]string, string, error) {
	resp, err := s.complete(ctx)
	if err != nil {
		return nil, "", err
	}
	if resp.Model != ModelID || resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
		return nil, "", fmt.Errorf("response model %q usage %+v", resp.Model, resp.Usage)
	}
	m := resp.Choices[0].Message
	s.params.Messages = append(s.params.Messages, m.ToParam())
	var calls [][2]string
	for _, c := range m.ToolCalls {
		calls = append(calls, [2]string{c.ID, c.Function.Name})
	}
	if want := map[bool]string{true: "tool_calls", false: "stop"}[len(calls) > 0]; resp.Choices[0].FinishReason != want {
		return nil, "", fmt.Errorf("finish reason %q, want %q", resp.Choices[0].FinishReason, want)
	}
	return calls, m.Content, nil
}

func (s *chatSession) complete(ctx context.Context) (*openai.ChatCompletion, error) {
	if !s.stream {
		return s.cl.Chat.Completions.New(ctx, s.params)
	}
	stream := s.cl.Chat.Completions.NewStreaming(ctx, s.params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	return &acc.ChatCompletion, stream.Err()
}

func (s *chatSession) answer(id, _, result string) {
	s.params.Messages = append(s.params.Messages, openai.ToolMessage(result, id))
}

type responsesSession struct {
	cl     openai.Client
	params responses.ResponseNewParams
	input  responses.ResponseInputParam
	stream bool
}

func newResponsesSession(base, instructions string, stream bool) *responsesSession {
	s := &responsesSession{cl: openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("unused"), option.WithMaxRetries(0)), stream: stream}
	s.params = responses.ResponseNewParams{Model: ModelID, Instructions: openai.String(instructions)}
	for _, name := range demoFunctions {
		s.params.Tools = append(s.params.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name,
			Parameters: map[string]any{"type": "object"}}})
	}
	s.input = responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("triage tx_1003", responses.EasyInputMessageRoleUser)}
	return s
}

func (s *responsesSession) turn(ctx context.Context) ([][2]string, string, error) {
	s.params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: s.input}
	var resp *responses.Response
	var err error
	if s.stream {
		stream := s.cl.Responses.NewStreaming(ctx, s.params)
		var deltas string
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "response.output_text.delta":
				deltas += ev.Delta
			case "response.completed":
				resp = &ev.Response
			}
		}
		if err = stream.Err(); err == nil && resp == nil {
			err = fmt.Errorf("the stream ended without response.completed")
		}
		if err == nil && deltas != resp.OutputText() {
			err = fmt.Errorf("text deltas %q, completed text %q", deltas, resp.OutputText())
		}
	} else {
		resp, err = s.cl.Responses.New(ctx, s.params)
	}
	if err != nil {
		return nil, "", err
	}
	if resp.Model != ModelID || resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 || resp.Status != "completed" {
		return nil, "", fmt.Errorf("response model %q status %q usage %+v", resp.Model, resp.Status, resp.Usage)
	}
	var calls [][2]string
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			calls = append(calls, [2]string{item.CallID, item.Name})
			s.input = append(s.input, responses.ResponseInputItemParamOfFunctionCall(item.Arguments.OfString, item.CallID, item.Name))
		}
	}
	return calls, resp.OutputText(), nil
}

func (s *responsesSession) answer(id, _, result string) {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
	out.OfFunctionCallOutput.CallID = openai.String(id)
	s.input = append(s.input, out)
}

type messagesSession struct {
	cl     anthropic.Client
	params anthropic.MessageNewParams
	stream bool
}

func newMessagesSession(base, instructions string, stream bool) *messagesSession {
	s := &messagesSession{cl: anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0)), stream: stream}
	s.params = anthropic.MessageNewParams{Model: ModelID, MaxTokens: 1024,
		System:   []anthropic.TextBlockParam{{Text: instructions}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("triage tx_1003"))}}
	for _, name := range demoFunctions {
		s.params.Tools = append(s.params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name,
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}})
	}
	return s
}

func (s *messagesSession) turn(ctx context.Context) ([][2]string, string, error) {
	var msg anthropic.Message
	if s.stream {
		stream := s.cl.Messages.NewStreaming(ctx, s.params)
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				return nil, "", err
			}
		}
		if err := stream.Err(); err != nil {
			return nil, "", err
		}
	} else {
		m, err := s.cl.Messages.New(ctx, s.params)
		if err != nil {
			return nil, "", err
		}
		msg = *m
	}
	if string(msg.Model) != ModelID || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		return nil, "", fmt.Errorf("message model %q usage %+v", msg.Model, msg.Usage)
	}
	s.params.Messages = append(s.params.Messages, msg.ToParam())
	var calls [][2]string
	var final string
	for _, b := range msg.Content {
		switch b.Type {
		case "tool_use":
			calls = append(calls, [2]string{b.ID, b.Name})
		case "text":
			final += b.Text
		}
	}
	if want := map[bool]anthropic.StopReason{true: "tool_use", false: "end_turn"}[len(calls) > 0]; msg.StopReason != want {
		return nil, "", fmt.Errorf("stop reason %q, want %q", msg.StopReason, want)
	}
	return calls, final, nil
}

// answer adds a result as Anthropic's API wants it: the results of one
// turn's calls in one user message.
func (s *messagesSession) answer(id, _, result string) {
	s.params.Messages = append(s.params.Messages, anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, result, false)))
}

// TestDemoModelAsksForATransaction: without a transaction id it asks for one.
func TestDemoModelAsksForATransaction(t *testing.T) {
	rep := answer(conversation{})
	if rep.call != nil || !strings.Contains(rep.text, "tx_1001") {
		t.Fatalf("call %v text %q", rep.call, rep.text)
	}
}
