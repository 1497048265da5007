package wire

import (
	"bytes"
	"testing"

	"github.com/gowebpki/jcs"
)

var apis = []string{ChatCompletions, Responses, Messages}

// FuzzRequest: whatever body an external agent sends, reading it never
// panics; and a body the gateway takes (one with a canonical form, the
// journal's key: a body with a duplicate member is refused 400 before it
// is read) reads as a ChatRequest like a plan step's, which a completion's
// record keeps, so ChatRequest.Hash holds for it, the same each time.
func FuzzRequest(f *testing.F) {
	for _, seed := range []struct {
		api  uint8
		body string
	}{
		{0, `{"model":"gpt","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"What is tx_1?"}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"payments__get","arguments":"{\"id\":\"tx_1\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"{\"amount\":12}"}],` +
			`"tools":[{"type":"function","function":{"name":"payments__get","parameters":{"type":"object","properties":{"id":{"type":"string"}}}}}],` +
			`"temperature":0.2,"max_completion_tokens":256,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}}`},
		{0, `{"model":"gpt","messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}],"max_tokens":3,"stream":true}`},
		{1, `{"model":"gpt","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},` +
			`{"type":"function_call","call_id":"c1","name":"payments__get","arguments":"{\"id\":\"tx_1\"}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"{\"amount\":12}"},{"type":"reasoning","summary":[]}],` +
			`"tools":[{"type":"function","name":"payments__get","parameters":{"type":"object"}},{"type":"web_search"}],"max_output_tokens":100,` +
			`"text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object"}}}}`},
		{1, `{"model":"gpt","input":"just text"}`},
		{2, `{"model":"claude","system":[{"type":"text","text":"Be brief."}],"max_tokens":512,"messages":[{"role":"user","content":"What is tx_1?"},` +
			`{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"t1","name":"payments__get","input":{"id":"tx_1"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"{\"amount\":12}"}],"is_error":false}]}],` +
			`"tools":[{"name":"payments__get","input_schema":{"type":"object"}}],"temperature":1}`},
		{2, `{"model":"claude","system":"s","messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`},
	} {
		f.Add(seed.api, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, api uint8, body []byte) {
		name := apis[int(api)%len(apis)]
		req, err := Request(name, body)
		if err != nil {
			return
		}
		if _, err := jcs.Transform(body); err != nil {
			return
		}
		first, err := req.Hash()
		if err != nil {
			t.Fatalf("a %s request read from %q cannot be hashed: %v", name, body, err)
		}
		again, err := Request(name, body)
		if err != nil {
			t.Fatalf("read once, then refused: %v", err)
		}
		if second, err := again.Hash(); err != nil || second != first {
			t.Fatalf("the same body hashed %s, then %s (%v)", first, second, err)
		}
	})
}

// FuzzAnswer: whatever a provider answers, whole or as a stream of events
// (here the body split at blank lines), reading it never panics.
func FuzzAnswer(f *testing.F) {
	for _, seed := range []struct {
		api    uint8
		stream bool
		body   string
	}{
		{0, false, `{"id":"c","object":"chat.completion","model":"gpt","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
			`"tool_calls":[{"id":"c1","type":"function","function":{"name":"payments__get","arguments":"{\"id\":\"tx_1\"}"}}]},"finish_reason":"tool_calls"}],` +
			`"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`},
		{0, true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"},
		{1, false, `{"id":"r","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}],"usage":{"input_tokens":5,"output_tokens":3}}`},
		{1, true, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"},
		{2, false, `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}],` +
			`"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}`},
		{2, true, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":3}}\n\n"},
	} {
		f.Add(seed.api, seed.stream, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, api uint8, stream bool, body []byte) {
		var events [][]byte
		if stream {
			events = bytes.Split(body, []byte("\n\n"))
		}
		Answer(apis[int(api)%len(apis)], body, events)
	})
}
