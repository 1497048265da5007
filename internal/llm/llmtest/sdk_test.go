package llmtest_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// The scripted servers' streams are read by the providers' own SDKs: what
// they assemble is the script's answer.

// textAndCall is an answer of text and a tool call, with usage.
var textAndCall = llmtest.Answer{Text: "Let me look that up: café", ToolCalls: []agent.ChatToolCall{
	{ID: "call_7", Name: "payments__get", Arguments: `{"id":"p1"}`},
}, InputTokens: 21, OutputTokens: 8}

func openAIClient(srv *llmtest.Server) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	return &c
}

func TestChatCompletionsStreamReadByOpenAIGo(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(textAndCall))
	stream := openAIClient(srv).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "test-model",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Is p1 settled?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices", len(acc.Choices))
	}
	msg := acc.Choices[0].Message
	if msg.Content != textAndCall.Text || acc.Choices[0].FinishReason != "tool_calls" || acc.ID != "chatcmpl-1" || acc.Model != "test-model" {
		t.Errorf("assembled %+v", acc.ChatCompletion)
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_7" || msg.ToolCalls[0].Function.Name != "payments__get" ||
		msg.ToolCalls[0].Function.Arguments != `{"id":"p1"}` {
		t.Errorf("tool calls %+v", msg.ToolCalls)
	}
	if acc.Usage.PromptTokens != 21 || acc.Usage.CompletionTokens != 8 {
		t.Errorf("usage %+v", acc.Usage)
	}
	if !srv.Requests()[0].Stream {
		t.Error("the request is not marked streamed")
	}
}

func TestResponsesReadByOpenAIGo(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(textAndCall))
	params := responses.ResponseNewParams{
		Model:        "test-model",
		Instructions: openai.String("You help the payments team."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Is p1 settled?")},
	}
	check := func(t *testing.T, r responses.Response) {
		t.Helper()
		if r.ID != "resp_"+strconv.Itoa(srv.Count()) || r.Model != "test-model" || r.Status != "completed" || r.OutputText() != textAndCall.Text {
			t.Errorf("response %s %s %s %q", r.ID, r.Model, r.Status, r.OutputText())
		}
		if len(r.Output) != 2 {
			t.Fatalf("%d output items, want a message and a function call", len(r.Output))
		}
		fc := r.Output[1].AsFunctionCall()
		if fc.CallID != "call_7" || fc.Name != "payments__get" || fc.Arguments != `{"id":"p1"}` {
			t.Errorf("function call %+v", fc)
		}
		if r.Usage.InputTokens != 21 || r.Usage.OutputTokens != 8 || r.Usage.TotalTokens != 29 {
			t.Errorf("usage %+v", r.Usage)
		}
	}

	t.Run("not streamed", func(t *testing.T) {
		r, err := openAIClient(srv).Responses.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		check(t, *r)
		req := srv.Requests()[srv.Count()-1]
		want := []agent.ChatMessage{{Role: "system", Content: "You help the payments team."}, {Role: "user", Content: "Is p1 settled?"}}
		if diff := cmp.Diff(want, req.Messages); diff != "" {
			t.Errorf("decoded messages (-want +got):\n%s", diff)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		stream := openAIClient(srv).Responses.NewStreaming(context.Background(), params)
		var types []string
		var text, args string
		var completed responses.Response
		seq := int64(0)
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			if ev.SequenceNumber != seq {
				t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq++
			switch ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.function_call_arguments.delta":
				args += ev.Delta
			case "response.completed":
				completed = ev.AsResponseCompleted().Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text != textAndCall.Text || args != `{"id":"p1"}` {
			t.Errorf("deltas %q and %q", text, args)
		}
		check(t, completed)
		want := []string{"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
		if diff := cmp.Diff(want, types); diff != "" {
			t.Errorf("event types (-want +got):\n%s", diff)
		}
	})
	t.Run("function call output", func(t *testing.T) {
		_, err := openAIClient(srv).Responses.New(context.Background(), responses.ResponseNewParams{
			Model: "test-model",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("Is p1 settled?", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(`{"id":"p1"}`, "call_7", "payments__get"),
				{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: openai.String("call_7"),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"status":"settled"}`)},
				}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		req := srv.Requests()[srv.Count()-1]
		want := []agent.ChatMessage{
			{Role: "user", Content: "Is p1 settled?"},
			{Role: "assistant", ToolCalls: []agent.ChatToolCall{{ID: "call_7", Name: "payments__get", Arguments: `{"id":"p1"}`}}},
			{Role: "tool", ToolCallID: "call_7", Content: `{"status":"settled"}`},
		}
		if diff := cmp.Diff(want, req.Messages); diff != "" {
			t.Errorf("decoded messages (-want +got):\n%s", diff)
		}
	})
}

func TestMessagesStreamReadByAnthropicSDK(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(textAndCall))
	client := anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "test-model", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Is p1 settled?"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.ID != "msg_1" || msg.Model != "test-model" || msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("message %s %s %s", msg.ID, msg.Model, msg.StopReason)
	}
	if len(msg.Content) != 2 || msg.Content[0].Text != textAndCall.Text {
		t.Fatalf("content %+v", msg.Content)
	}
	use := msg.Content[1].AsToolUse()
	var input map[string]any
	if err := json.Unmarshal(use.Input, &input); err != nil || use.ID != "call_7" || use.Name != "payments__get" || input["id"] != "p1" {
		t.Errorf("tool use %+v (%v)", use, err)
	}
	if msg.Usage.InputTokens != 21 || msg.Usage.OutputTokens != 8 {
		t.Errorf("usage %+v", msg.Usage)
	}
}
