package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentplane/agentplane/internal/agent"
)

// toolConversation is a conversation in the chat shape: a goal, a call
// with its result, and a tool offered.
func toolConversation(model string, maxTokens int64) agent.ChatRequest {
	return agent.ChatRequest{
		Model: model, MaxOutputTokens: maxTokens,
		Messages: []agent.ChatMessage{
			{Role: agent.RoleSystem, Content: "You help the payments team."},
			{Role: agent.RoleUser, Content: "Is p1 settled?"},
			{Role: agent.RoleAssistant, Content: "Checking.", ToolCalls: []agent.ChatToolCall{{ID: "call_1", Name: "payments__get", Arguments: `{"id":"p1"}`}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Content: `{"status":"settled"}`},
		},
		Tools: []agent.ChatTool{{Name: "payments__get", Description: "Get a payment.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)}},
	}
}

func TestNormalizeRequest(t *testing.T) {
	cases := []struct {
		name, api, body string
		want            agent.ChatRequest
	}{
		{"chat completions", ChatCompletions, `{"model":"helper","max_completion_tokens":500,"messages":[
			{"role":"developer","content":"You help the payments team."},
			{"role":"user","content":[{"type":"text","text":"Is p1 "},{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"text","text":"settled?"}]},
			{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"payments__get","arguments":"{\"id\":\"p1\"}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"{\"status\":\"settled\"}"}],
			"tools":[{"type":"function","function":{"name":"payments__get","description":"Get a payment.","parameters":{"type":"object","properties":{"id":{"type":"string"}}}}}]}`,
			toolConversation("helper", 500)},
		{"responses", Responses, `{"model":"helper","max_output_tokens":500,"instructions":"You help the payments team.","input":[
			{"role":"user","content":[{"type":"input_text","text":"Is p1 settled?"}]},
			{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking.","annotations":[]}]},
			{"type":"function_call","call_id":"call_1","name":"payments__get","arguments":"{\"id\":\"p1\"}"},
			{"type":"function_call_output","call_id":"call_1","output":"{\"status\":\"settled\"}"}],
			"tools":[{"type":"function","name":"payments__get","description":"Get a payment.","parameters":{"type":"object","properties":{"id":{"type":"string"}}},"strict":false},{"type":"web_search"}]}`,
			toolConversation("helper", 500)},
		{"messages", Messages, `{"model":"helper","max_tokens":500,"system":[{"type":"text","text":"You help the payments team."}],"messages":[
			{"role":"user","content":"Is p1 settled?"},
			{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"call_1","name":"payments__get","input":{"id":"p1"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"{\"status\":\"settled\"}"}]}]}],
			"tools":[{"name":"payments__get","description":"Get a payment.","input_schema":{"type":"object","properties":{"id":{"type":"string"}}}},{"type":"web_search_20250305","name":"web_search"}]}`,
			toolConversation("helper", 500)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, resp, err := Normalize(tc.api, []byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(agent.ChatResponse{}, resp); diff != "" {
				t.Errorf("an answer without a response (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		_, _, err := Normalize(Messages, []byte(`{"messages":`), nil)
		var le *agent.LLMError
		if !errors.As(err, &le) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestNormalizeAnswer(t *testing.T) {
	want := func(finish string) agent.ChatResponse {
		return agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "Too long"},
			Usage: &agent.Usage{InputTokens: 12, OutputTokens: 4}, FinishReason: finish, ID: "x1", Model: "m-2"}
	}
	cases := []struct {
		name, api, body string
		events          []string
		want            agent.ChatResponse
	}{
		{"chat completion cut at its length", ChatCompletions,
			`{"id":"x1","object":"chat.completion","model":"m-2","choices":[{"index":0,"message":{"role":"assistant","content":"Too long"},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":4}}`,
			nil, want("length")},
		{"chat chunks", ChatCompletions, "", []string{
			`data: {"id":"x1","object":"chat.completion.chunk","model":"m-2","choices":[{"index":0,"delta":{"role":"assistant","content":"Too "},"finish_reason":null}]}`,
			`data: {"id":"x1","object":"chat.completion.chunk","model":"m-2","choices":[{"index":0,"delta":{"content":"long"},"finish_reason":"length"}]}`,
			`data: {"id":"x1","object":"chat.completion.chunk","model":"m-2","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4}}`,
			`data: [DONE]`,
		}, want("length")},
		{"incomplete response", Responses,
			`{"id":"x1","object":"response","model":"m-2","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
			"output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Too long","annotations":[]}]}],
			"usage":{"input_tokens":12,"output_tokens":4}}`,
			nil, want("length")},
		{"response events without output in the last", Responses, "", []string{
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"x1\",\"model\":\"m-2\",\"status\":\"in_progress\",\"output\":[]}}",
			"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Too long\"}]}}",
			"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"x1\",\"model\":\"m-2\",\"status\":\"incomplete\",\"output\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":4}}}",
		}, want("length")},
		{"message at max_tokens", Messages,
			`{"id":"x1","type":"message","model":"m-2","role":"assistant","content":[{"type":"text","text":"Too long"}],"stop_reason":"max_tokens","usage":{"input_tokens":2,"cache_read_input_tokens":10,"output_tokens":4}}`,
			nil, want("length")},
		{"message events", Messages, "", []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"x1\",\"type\":\"message\",\"model\":\"m-2\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Too \"}}",
			"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"long\"}}",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":4}}",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}",
		}, want("length")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := &RelayResponse{Status: 200}
			if tc.events == nil {
				resp.Body = []byte(tc.body)
			}
			for _, e := range tc.events {
				resp.Events = append(resp.Events, []byte(e))
			}
			_, got, err := Normalize(tc.api, []byte(`{"model":"helper"}`), resp)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetMember(t *testing.T) {
	cases := []struct{ in, key, value, want string }{
		{`{"model":"a","n":1}`, "model", `"b"`, `{"model":"b","n":1}`},
		{"{ \"n\" : 1 ,\n \"model\" :\t\"a\" }", "model", `"b"`, "{ \"n\" : 1 ,\n \"model\" :\t\"b\" }"},
		{`{"n":{"model":"inner"}}`, "model", `"b"`, `{"model":"b","n":{"model":"inner"}}`},
		{` {}`, "model", `"b"`, ` {"model":"b"}`},
		{`{"model":null,"x":[1,2]}`, "model", `"b"`, `{"model":"b","x":[1,2]}`},
	}
	for _, tc := range cases {
		got, err := setMember([]byte(tc.in), tc.key, []byte(tc.value))
		if err != nil || string(got) != tc.want {
			t.Errorf("setMember(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":1} {}`, `{"a":}`, `"x"`} {
		if _, err := setMember([]byte(bad), "model", []byte(`"b"`)); err == nil {
			t.Errorf("setMember(%q) took it for an object", bad)
		}
	}
}

func TestReadEvents(t *testing.T) {
	stream := "event: a\ndata: 1\n\n\n: ping\n\ndata: 2\r\n\r\ndata: 3\n"
	var got []string
	err := readEvents(strings.NewReader(stream), func(ev []byte) error {
		got = append(got, string(ev))
		return nil
	})
	if diff := cmp.Diff([]string{"event: a\ndata: 1", ": ping", "data: 2"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v for a stream ending inside an event", err)
	}
}

func TestErrorBodyIsReadByTheSDKs(t *testing.T) {
	serve := func(t *testing.T, api string, status int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(ErrorBody(api, status, "the run's token budget is spent", "limit_exceeded"))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	t.Run("openai", func(t *testing.T) {
		c := openai.NewClient(option.WithBaseURL(serve(t, ChatCompletions, 429)), option.WithAPIKey("k"), option.WithMaxRetries(0))
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "helper",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Message != "the run's token budget is spent" ||
			oe.Type != "rate_limit_error" || oe.Code != "limit_exceeded" {
			t.Errorf("error %#v", err)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		c := anthropic.NewClient(aoption.WithBaseURL(serve(t, Messages, 403)), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
		_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "helper", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 403 {
			t.Fatalf("error %#v", err)
		}
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(ae.RawJSON()), &body) != nil || body.Type != "error" ||
			body.Error.Type != "permission_error" || body.Error.Message != "the run's token budget is spent" {
			t.Errorf("body %s", ae.RawJSON())
		}
	})
	for status, want := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
		413: "request_too_large", 500: "api_error", 529: "overloaded_error"} {
		var body struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(ErrorBody(Messages, status, "m", ""), &body); err != nil || body.Error.Type != want {
			t.Errorf("anthropic %d: type %q, want %q", status, body.Error.Type, want)
		}
	}
	if got := string(ErrorBody(Responses, 503, "down", "")); got != `{"error":{"message":"down","type":"server_error","param":null,"code":null}}` {
		t.Errorf("openai 503: %s", got)
	}
}
