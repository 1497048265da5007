package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
)

// relayAPIs are the wire APIs relayed, each with the server of the
// provider that speaks it and an agent's request in its format.
var relayAPIs = []struct {
	api       string
	provider  string
	newServer func(testing.TB, llmtest.Script, ...llmtest.Option) *llmtest.Server
	body      string
}{
	{ChatCompletions, model.OpenAI, llmtest.NewOpenAIServer,
		`{"model":"helper","messages":[{"role":"system","content":"You help the payments team."},{"role":"user","content":"Is p1 settled?"}],"temperature":0.2}`},
	{Responses, model.OpenAI, llmtest.NewOpenAIServer,
		`{"model":"helper","instructions":"You help the payments team.","input":"Is p1 settled?","temperature":0.2}`},
	{Messages, model.Anthropic, llmtest.NewAnthropicServer,
		`{"model":"helper","max_tokens":1024,"system":"You help the payments team.","messages":[{"role":"user","content":"Is p1 settled?"}],"temperature":0.2}`},
}

// streamed is body asking for a stream.
func streamed(body string) string {
	return strings.Replace(body, `{"model":"helper",`, `{"model":"helper","stream":true,`, 1)
}

// relayer is a pool with the test options.
func relayer(t *testing.T) *Pool {
	t.Helper()
	return NewClients(testOptions(t))
}

// collect is a send function keeping the events it is given.
type collect struct {
	mu     sync.Mutex
	events [][]byte
}

func (c *collect) send(ev []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, append([]byte(nil), ev...))
	return nil
}

// wantAnswer is what the script's textAndCall answer normalizes to.
func wantAnswer(id string) agent.ChatResponse {
	return agent.ChatResponse{
		Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "Checking: café",
			ToolCalls: []agent.ChatToolCall{{ID: "call_9", Name: "payments__get", Arguments: `{"id":"p1"}`}}},
		Usage: &agent.Usage{InputTokens: 21, OutputTokens: 8}, FinishReason: "tool_calls", ID: id, Model: "test-model-1",
	}
}

var textAndCall = llmtest.Answer{Text: "Checking: café", InputTokens: 21, OutputTokens: 8,
	ToolCalls: []agent.ChatToolCall{{ID: "call_9", Name: "payments__get", Arguments: `{"id":"p1"}`}}}

func TestRelay(t *testing.T) {
	ids := map[string]string{ChatCompletions: "chatcmpl-1", Responses: "resp_1", Messages: "msg_1"}
	for _, a := range relayAPIs {
		for _, stream := range []bool{false, true} {
			name := a.api
			body := a.body
			if stream {
				name, body = name+"/streamed", streamed(body)
			}
			t.Run(name, func(t *testing.T) {
				srv := a.newServer(t, llmtest.Sequence(textAndCall))
				m := testModel(a.provider, srv)
				var got collect
				resp, err := relayer(t).Relay(context.Background(), m, RelayRequest{API: a.api, Body: []byte(body)}, got.send)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Status != 200 || resp.Usage != (agent.Usage{InputTokens: 21, OutputTokens: 8}) ||
					resp.FinishReason != "tool_calls" || resp.ProviderModel != "test-model-1" {
					t.Errorf("status %d, usage %+v, finish %q, model %q", resp.Status, resp.Usage, resp.FinishReason, resp.ProviderModel)
				}
				if stream {
					if len(resp.Events) == 0 || resp.Body != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
						t.Errorf("%d events, body %q, header %v", len(resp.Events), resp.Body, resp.Header)
					}
					if diff := cmp.Diff(resp.Events, got.events); diff != "" {
						t.Errorf("events sent differ from those kept (-kept +sent):\n%s", diff)
					}
				} else if len(got.events) != 0 || resp.Events != nil || !json.Valid(resp.Body) {
					t.Errorf("a whole answer sent %d events; body %q", len(got.events), resp.Body)
				}

				sent := srv.Requests()[0]
				if sent.Model != "test-model-1" {
					t.Errorf("the provider was asked for model %q", sent.Model)
				}
				want := strings.Replace(body, `"helper"`, `"test-model-1"`, 1)
				if a.api == ChatCompletions && stream {
					want = `{"stream_options":{"include_usage":true},` + want[1:]
				}
				if string(sent.Body) != want {
					t.Errorf("sent body\n%s\nwant\n%s", sent.Body, want)
				}
				if h := sent.Header.Get(model.DefaultHeader(a.provider)); !strings.Contains(h, testSecret) || sent.Header.Get("X-Team") != "payments" {
					t.Errorf("credentials %q, X-Team %q", h, sent.Header.Get("X-Team"))
				}

				kept := resp.read
				req, answer, err := Normalize(a.api, []byte(body), resp)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantAnswer(ids[a.api]), answer); diff != "" {
					t.Errorf("normalized answer (-want +got):\n%s", diff)
				}
				temp := 0.2
				wantReq := agent.ChatRequest{Model: "helper", Temperature: &temp, Messages: []agent.ChatMessage{
					{Role: agent.RoleSystem, Content: "You help the payments team."}, {Role: agent.RoleUser, Content: "Is p1 settled?"}}}
				if a.api == Messages {
					wantReq.MaxOutputTokens = 1024
				}
				if diff := cmp.Diff(wantReq, req); diff != "" {
					t.Errorf("normalized request (-want +got):\n%s", diff)
				}

				// Normalize took what the relay read (all of it but for the
				// answer of a stream whose usage chunk the relay withheld)
				// and let go of it, and reading the exchange afresh gives
				// the same.
				withheld := a.api == ChatCompletions && stream
				if kept == nil || (kept.answer == nil) != withheld {
					t.Fatalf("the relay kept %+v of what it read", kept)
				}
				if resp.read != nil {
					t.Error("the answer still holds what the relay read")
				}
				freshReq, freshAnswer, err := Normalize(a.api, []byte(body), resp)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(freshReq, req); diff != "" {
					t.Errorf("the request as the relay read it (-afresh +relay):\n%s", diff)
				}
				if diff := cmp.Diff(freshAnswer, answer); diff != "" {
					t.Errorf("the answer as the relay read it (-afresh +relay):\n%s", diff)
				}
				// Another body with this answer is read for itself.
				resp.read = kept
				other := strings.Replace(body, "Is p1 settled?", "Is p2 settled?", 1)
				if otherReq, _, err := Normalize(a.api, []byte(other), resp); err != nil ||
					otherReq.Messages[len(otherReq.Messages)-1].Content != "Is p2 settled?" {
					t.Errorf("another body normalized as %+v (%v)", otherReq, err)
				}
			})
		}
	}
}

func TestRelaySendsEachEventAsItArrives(t *testing.T) {
	for _, a := range relayAPIs {
		t.Run(a.api, func(t *testing.T) {
			// The server holds its last event until the first has reached
			// send: a relay that buffered the stream would never end.
			hold := make(chan struct{})
			srv := a.newServer(t, llmtest.Sequence(llmtest.Answer{Text: "settled", HoldLast: hold}))
			var once sync.Once
			var got collect
			resp, err := relayer(t).Relay(context.Background(), testModel(a.provider, srv),
				RelayRequest{API: a.api, Body: []byte(streamed(a.body))}, func(ev []byte) error {
					once.Do(func() { close(hold) })
					return got.send(ev)
				})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.events) < 3 || len(resp.Events) != len(got.events) {
				t.Errorf("%d events sent, %d kept", len(got.events), len(resp.Events))
			}
		})
	}
}

func TestRelayRetriesBeforeTheFirstEvent(t *testing.T) {
	for _, a := range relayAPIs {
		t.Run(a.api, func(t *testing.T) {
			srv := a.newServer(t, llmtest.Sequence(
				llmtest.Answer{Status: 503, ErrorMessage: "overloaded", Header: http.Header{"Retry-After-Ms": {"10"}}},
				llmtest.Text("settled"),
			))
			var got collect
			resp, err := relayer(t).Relay(context.Background(), testModel(a.provider, srv),
				RelayRequest{API: a.api, Body: []byte(streamed(a.body))}, got.send)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != 200 || srv.Count() != 2 || len(got.events) == 0 {
				t.Errorf("status %d after %d requests, %d events", resp.Status, srv.Count(), len(got.events))
			}
		})
	}
}

func TestRelayPassesErrorAnswersOn(t *testing.T) {
	for _, a := range relayAPIs {
		t.Run(a.api, func(t *testing.T) {
			t.Run("400", func(t *testing.T) {
				srv := a.newServer(t, llmtest.Sequence(llmtest.Answer{Status: 400, ErrorMessage: "max_tokens is too large",
					Header: http.Header{"X-Request-Id": {"req_1"}, "Set-Cookie": {"s=1"}}}))
				var got collect
				resp, err := relayer(t).Relay(context.Background(), testModel(a.provider, srv),
					RelayRequest{API: a.api, Body: []byte(streamed(a.body))}, got.send)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Status != 400 || !bytes.Contains(resp.Body, []byte(`"max_tokens is too large"`)) || srv.Count() != 1 || len(got.events) != 0 {
					t.Errorf("status %d, body %s, %d requests, %d events", resp.Status, resp.Body, srv.Count(), len(got.events))
				}
				want := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}}
				if diff := cmp.Diff(want, resp.Header); diff != "" {
					t.Errorf("header (-want +got):\n%s", diff)
				}
				_, _, err = Normalize(a.api, []byte(a.body), resp)
				if le := llmError(t, err); le.Status != 400 || le.Message != "max_tokens is too large" {
					t.Errorf("normalized error %+v", le)
				}
			})
			t.Run("503 once retries are spent", func(t *testing.T) {
				srv := a.newServer(t, llmtest.Sequence(llmtest.Error(503, "overloaded")))
				resp, err := relayer(t).Relay(context.Background(), testModel(a.provider, srv),
					RelayRequest{API: a.api, Body: []byte(a.body)}, (&collect{}).send)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Status != 503 || !bytes.Contains(resp.Body, []byte("overloaded")) || srv.Count() != 1+MaxRetries {
					t.Errorf("status %d, body %s, %d requests", resp.Status, resp.Body, srv.Count())
				}
			})
		})
	}
}

func TestRelayStreamCutShort(t *testing.T) {
	for _, a := range relayAPIs {
		t.Run(a.api, func(t *testing.T) {
			srv := a.newServer(t, llmtest.Sequence(llmtest.Answer{Text: "settled", Truncate: true}))
			var got collect
			resp, err := relayer(t).Relay(context.Background(), testModel(a.provider, srv),
				RelayRequest{API: a.api, Body: []byte(streamed(a.body))}, got.send)
			le := llmError(t, err)
			if !strings.Contains(le.Message, "cut short") || strings.Contains(le.Message, testSecret) {
				t.Errorf("error %+v", le)
			}
			// Events were sent: no retry, and those sent are kept.
			if srv.Count() != 1 || resp == nil || len(resp.Events) == 0 || len(resp.Events) != len(got.events) {
				t.Errorf("%d requests, response %+v, %d events sent", srv.Count(), resp, len(got.events))
			}
		})
	}
}

// TestRelayCountsTheTokensOfACutStream: a stream cut short, by the model
// (half its events came) or by the agent (it went after the answer's text,
// before the stream's end), has the tokens its provider reported (a
// Messages stream's input tokens come first, its output tokens in
// message_delta), and the others estimated at four characters a token:
// input from the request's 57 characters (its two messages' 41 and eight
// for each), output from the text relayed ("settled, and" when cut by the
// model, the whole "settled, and paid on time" when the agent went).
func TestRelayCountsTheTokensOfACutStream(t *testing.T) {
	answer := llmtest.Answer{Text: "settled, and paid on time", InputTokens: 30, OutputTokens: 9}
	type counted struct {
		Usage                           agent.Usage
		InputEstimated, OutputEstimated bool
	}
	for _, tc := range []struct {
		by   string
		want map[string]counted
	}{
		{"the model", map[string]counted{
			ChatCompletions: {agent.Usage{InputTokens: 15, OutputTokens: 3}, true, true},
			Responses:       {agent.Usage{InputTokens: 15, OutputTokens: 3}, true, true},
			Messages:        {agent.Usage{InputTokens: 30, OutputTokens: 3}, false, true},
		}},
		{"the agent", map[string]counted{
			ChatCompletions: {agent.Usage{InputTokens: 15, OutputTokens: 7}, true, true},
			Responses:       {agent.Usage{InputTokens: 15, OutputTokens: 7}, true, true},
			Messages:        {agent.Usage{InputTokens: 30, OutputTokens: 9}, false, false},
		}},
	} {
		for _, a := range relayAPIs {
			t.Run(tc.by+"/"+a.api, func(t *testing.T) {
				script := answer
				ctx, leave := context.WithCancel(context.Background())
				defer leave()
				send := (&collect{}).send
				if tc.by == "the model" {
					script.Truncate = true
				} else {
					// The stream's last event is held until the test ends
					// (the server's request ends with the agent's leaving):
					// the agent goes once the one before it came.
					never := make(chan struct{})
					t.Cleanup(func() { close(never) })
					script.HoldLast = never
					send = func(ev []byte) error {
						for _, before := range []string{`"finish_reason":"stop"`, `"response.output_item.done"`, `"message_delta"`} {
							if bytes.Contains(ev, []byte(before)) {
								leave()
							}
						}
						return nil
					}
				}
				srv := a.newServer(t, llmtest.Sequence(script))
				resp, err := relayer(t).Relay(ctx, testModel(a.provider, srv), RelayRequest{API: a.api, Body: []byte(streamed(a.body))}, send)
				if err == nil || resp == nil || !resp.Cut {
					t.Fatalf("response %+v, error %v; want a cut stream", resp, err)
				}
				got := counted{resp.Usage, resp.InputEstimated, resp.OutputEstimated}
				if diff := cmp.Diff(tc.want[a.api], got); diff != "" {
					t.Errorf("counted (-want +got):\n%s", diff)
				}
				if _, norm, err := Normalize(a.api, []byte(streamed(a.body)), resp); err != nil || norm.Usage == nil || *norm.Usage != resp.Usage {
					t.Errorf("normalized usage %+v (%v), want %+v", norm.Usage, err, resp.Usage)
				}
			})
		}
	}
}

// TestRelayCountsTheInputOfARequestLeftUnanswered: a request the provider
// read, whose caller went before any of its answer came (streamed or not),
// is cut short with its input tokens estimated from the request's 57
// characters and no output; one whose caller went before it was sent
// costs nothing, and has no response.
func TestRelayCountsTheInputOfARequestLeftUnanswered(t *testing.T) {
	for _, a := range relayAPIs {
		for _, stream := range []bool{false, true} {
			name, body := a.api, a.body
			if stream {
				name, body = name+"/streamed", streamed(body)
			}
			t.Run(name, func(t *testing.T) {
				ctx, leave := context.WithCancel(context.Background())
				defer leave()
				srv := a.newServer(t, func(llmtest.Request) llmtest.Answer {
					// The caller goes once the provider has the request,
					// and its client has long marked it written (200 ms
					// is slack for a loaded machine's scheduling).
					time.AfterFunc(200*time.Millisecond, leave)
					return llmtest.Answer{Text: "settled", Delay: time.Minute}
				})
				var got collect
				resp, err := relayer(t).Relay(ctx, testModel(a.provider, srv), RelayRequest{API: a.api, Body: []byte(body)}, got.send)
				if !errors.Is(err, context.Canceled) || resp == nil || !resp.Cut || len(resp.Events) != 0 || len(got.events) != 0 {
					t.Fatalf("response %+v, error %v, %d events sent; want a request cut before its answer", resp, err, len(got.events))
				}
				want := agent.Usage{InputTokens: 15}
				if resp.Usage != want || !resp.InputEstimated || !resp.OutputEstimated {
					t.Errorf("counted %+v (estimated: input %v, output %v), want %+v, both estimated", resp.Usage, resp.InputEstimated, resp.OutputEstimated, want)
				}
				if _, norm, err := Normalize(a.api, []byte(body), resp); err != nil || norm.Usage == nil || *norm.Usage != want {
					t.Errorf("normalized usage %+v (%v), want %+v", norm.Usage, err, want)
				}
			})
		}
	}
	t.Run("never sent", func(t *testing.T) {
		srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("settled")))
		ctx, leave := context.WithCancel(context.Background())
		leave()
		resp, err := relayer(t).Relay(ctx, testModel(model.OpenAI, srv), RelayRequest{API: ChatCompletions, Body: []byte(streamed(relayAPIs[0].body))}, (&collect{}).send)
		if !errors.Is(err, context.Canceled) || resp != nil || srv.Count() != 0 {
			t.Errorf("response %+v, error %v, %d requests; want none, and nothing to count", resp, err, srv.Count())
		}
	})
}

func TestRelayStopsWhenSendFails(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("settled")))
	gone := errors.New("the agent went away")
	_, err := relayer(t).Relay(context.Background(), testModel(model.OpenAI, srv),
		RelayRequest{API: ChatCompletions, Body: []byte(streamed(relayAPIs[0].body))}, func([]byte) error { return gone })
	if !errors.Is(err, gone) || srv.Count() != 1 {
		t.Errorf("error %v after %d requests, want send's error and no retry", err, srv.Count())
	}
}

func TestRelayStreamUsage(t *testing.T) {
	body := streamed(relayAPIs[0].body)
	t.Run("added, read and not passed on", func(t *testing.T) {
		srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Answer{Text: "settled", InputTokens: 30, OutputTokens: 2}))
		var got collect
		resp, err := relayer(t).Relay(context.Background(), testModel(model.OpenAI, srv), RelayRequest{API: ChatCompletions, Body: []byte(body)}, got.send)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage != (agent.Usage{InputTokens: 30, OutputTokens: 2}) {
			t.Errorf("usage %+v", resp.Usage)
		}
		for _, ev := range got.events {
			if bytes.Contains(ev, []byte(`"choices":[]`)) {
				t.Errorf("the usage chunk the agent did not ask for was sent: %s", ev)
			}
		}
		_, answer, err := Normalize(ChatCompletions, []byte(body), resp)
		if err != nil || answer.Usage == nil || *answer.Usage != resp.Usage {
			t.Errorf("normalized usage %+v (%v)", answer.Usage, err)
		}
	})
	t.Run("asked for by the agent", func(t *testing.T) {
		srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("settled")))
		asked := strings.Replace(body, `"stream":true,`, `"stream":true,"stream_options": {"include_usage": true},`, 1)
		var got collect
		if _, err := relayer(t).Relay(context.Background(), testModel(model.OpenAI, srv), RelayRequest{API: ChatCompletions, Body: []byte(asked)}, got.send); err != nil {
			t.Fatal(err)
		}
		if sent := string(srv.Requests()[0].Body); sent != strings.Replace(asked, `"helper"`, `"test-model-1"`, 1) {
			t.Errorf("sent %s", sent)
		}
		if last := got.events[len(got.events)-2]; !bytes.Contains(last, []byte(`"choices":[]`)) {
			t.Errorf("the usage chunk was not passed on: %s", last)
		}
	})
}

func TestRelayHeaders(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text("ok")))
	h := http.Header{"Anthropic-Beta": {"tools-2024-04-04"}, "X-Api-Key": {"the-run-token"},
		"Authorization": {"Bearer the-run-token"}, "Cookie": {"s=1"}}
	if _, err := relayer(t).Relay(context.Background(), testModel(model.Anthropic, srv),
		RelayRequest{API: Messages, Body: []byte(relayAPIs[2].body), Header: h}, (&collect{}).send); err != nil {
		t.Fatal(err)
	}
	sent := srv.Requests()[0].Header
	want := map[string]string{"Anthropic-Beta": "tools-2024-04-04", "Anthropic-Version": defaultAnthropicVersion,
		"X-Api-Key": testSecret, "Authorization": "", "Cookie": ""}
	for k, v := range want {
		if sent.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, sent.Get(k), v)
		}
	}
}

func TestRelayRefusesAnAPIItsProviderDoesNotSpeak(t *testing.T) {
	cases := []struct {
		api, provider, endpoint string
		newServer               func(testing.TB, llmtest.Script, ...llmtest.Option) *llmtest.Server
	}{
		{ChatCompletions, model.Anthropic, "/anthropic/v1/messages", llmtest.NewAnthropicServer},
		{Responses, model.Anthropic, "/anthropic/v1/messages", llmtest.NewAnthropicServer},
		{Messages, model.OpenAI, "/openai/v1/chat/completions", llmtest.NewOpenAIServer},
	}
	for _, tc := range cases {
		t.Run(tc.api, func(t *testing.T) {
			srv := tc.newServer(t, llmtest.Sequence(llmtest.Text("ok")))
			resp, err := relayer(t).Relay(context.Background(), testModel(tc.provider, srv),
				RelayRequest{API: tc.api, Body: []byte(`{"model":"helper"}`)}, (&collect{}).send)
			le := llmError(t, err)
			if resp != nil || !strings.Contains(le.Message, "model helper is an "+tc.provider+" model") || !strings.Contains(le.Message, tc.endpoint) || srv.Count() != 0 {
				t.Errorf("response %v, error %q, %d requests", resp, le.Message, srv.Count())
			}
		})
	}
}

func TestRelayErrorsHaveNoSecret(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	m := testModel(model.OpenAI, srv)
	srv.Close()
	resp, err := relayer(t).Relay(context.Background(), m, RelayRequest{API: ChatCompletions, Body: []byte(relayAPIs[0].body)}, (&collect{}).send)
	le := llmError(t, err)
	if resp != nil || !strings.Contains(le.Message, "could not be reached") || strings.Contains(le.Message, testSecret) {
		t.Errorf("response %v, error %q", resp, le.Message)
	}
}

func TestRelaySpan(t *testing.T) {
	for _, a := range relayAPIs {
		t.Run(a.api, func(t *testing.T) {
			t.Run("streamed", func(t *testing.T) {
				rec, tp := recordSpans(t)
				srv := a.newServer(t, llmtest.Sequence(llmtest.Answer{Text: "settled", InputTokens: 42, OutputTokens: 7}))
				opts := testOptions(t)
				opts.TracerProvider, opts.CaptureContent = tp, true
				if _, err := NewClients(opts).Relay(context.Background(), testModel(a.provider, srv),
					RelayRequest{API: a.api, Body: []byte(streamed(a.body))}, (&collect{}).send); err != nil {
					t.Fatal(err)
				}
				s := chatSpan(t, rec)
				got := attrs(s)
				if s.Name() != "chat test-model-1" || got["gen_ai.usage.input_tokens"] != int64(42) || got["gen_ai.usage.output_tokens"] != int64(7) ||
					got["gen_ai.request.temperature"] != 0.2 || got["gen_ai.response.model"] != "test-model-1" {
					t.Errorf("span %q attributes %v", s.Name(), got)
				}
				if out := got["gen_ai.output.messages"]; out != `[{"role":"assistant","parts":[{"type":"text","content":"settled"}],"finish_reason":"stop"}]` {
					t.Errorf("gen_ai.output.messages %v", out)
				}
			})
			t.Run("an error answer echoing the key", func(t *testing.T) {
				rec, tp := recordSpans(t)
				srv := a.newServer(t, llmtest.Sequence(llmtest.Error(401, "Incorrect API key provided: "+testSecret)))
				opts := testOptions(t)
				opts.TracerProvider = tp
				resp, err := NewClients(opts).Relay(context.Background(), testModel(a.provider, srv),
					RelayRequest{API: a.api, Body: []byte(a.body)}, (&collect{}).send)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Status != 401 || bytes.Contains(resp.Body, []byte(testSecret)) || !bytes.Contains(resp.Body, []byte("Incorrect API key provided: [redacted]")) {
					t.Errorf("status %d, body %s", resp.Status, resp.Body)
				}
				if s := chatSpan(t, rec); attrs(s)["error.type"] != "401" {
					t.Errorf("error.type %v", attrs(s)["error.type"])
				}
				noSecretInSpans(t, rec)
			})
		})
	}
}
