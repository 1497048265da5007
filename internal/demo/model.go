package demo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ModelID is the provider model id the demo model answers as. It is rules,
// not an LLM, and says so wherever it appears.
const ModelID = "demo-rules"

// ModelLabel is how the demo names its model to people.
const ModelLabel = "demo model: rules, not an LLM"

// CaseInstruction is the sentence of an agent's instructions that makes the
// demo model open a fraud case for a risky transaction: version 2 of the
// demo's LLM agent has it, version 1 does not.
const CaseInstruction = "Open a fraud case for any transaction over 1000 EUR whose customer has a risk score above 0.5."

// The demo model's rules, in order, for the conversation so far:
//  1. no transaction id (tx_…) in the last user message: ask for one;
//  2. the transaction not yet looked up: call payments' getTransaction;
//  3. its customer not yet looked up: call customers' customer;
//  4. the system message holds CaseInstruction, the transaction is over
//     1000 and the customer's risk score above 0.5, and no case opened
//     yet: call cases' OpenCase;
//  5. otherwise answer in two sentences from what the calls returned.
//
// A rule needing a function the request does not offer is skipped. Token
// counts are a quarter of the characters, as a rough tokenizer would give.
// The rules read one conversation whichever wire it came in: OpenAI's Chat
// Completions and Responses APIs, and Anthropic's Messages API (model_wires.go),
// each streamed or not.
type demoModel struct {
	n atomic.Int64
}

// next numbers the demo model's answers and calls.
func (m *demoModel) next() string { return strconv.FormatInt(m.n.Add(1), 10) }

// modelHandler serves the demo model's endpoints: /v1 is the root of its
// OpenAI API and of its Anthropic API alike.
func modelHandler() http.Handler {
	m := &demoModel{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.chat)
	mux.HandleFunc("POST /v1/responses", m.responses)
	mux.HandleFunc("POST /v1/messages", m.messages)
	return mux
}

// conversation is what the rules read of a request.
type conversation struct {
	system string
	// user is the text of the last user message that has text.
	user string
	// offered are the functions the request offers, by name.
	offered []string
	// names maps the id of each call the assistant made to its function.
	names map[string]string
	// results are the calls' results in order: call id and text.
	results [][2]string
	// chars counts the request's characters, for its token count.
	chars int
}

func (c *conversation) say(role, content string) {
	c.chars += len(content) + 8
	switch role {
	case "system", "developer":
		c.system += content
	case "user":
		if content != "" {
			c.user = content
		}
	}
}

func (c *conversation) called(id, name string) {
	if c.names == nil {
		c.names = map[string]string{}
	}
	c.names[id] = name
}

func (c *conversation) result(id, content string) {
	c.chars += len(content) + 8
	c.results = append(c.results, [2]string{id, content})
}

func (c *conversation) offer(name string) {
	c.chars += len(name) + 40
	c.offered = append(c.offered, name)
}

func (c *conversation) inputTokens() int { return c.chars/4 + 1 }

// reply is the demo model's answer: a call to make, or the final text.
type reply struct {
	call *modelCall
	text string
}

func (r reply) outputTokens() int {
	if r.call != nil {
		return (len(r.arguments())+len(r.call.name))/4 + 1
	}
	return len(r.text)/4 + 1
}

// arguments are the call's arguments as a function call carries them.
func (r reply) arguments() string {
	args, _ := json.Marshal(r.call.args)
	return string(args)
}

// chatRequest is the part of a Chat Completions request the rules read.
type chatRequest struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

func (req chatRequest) conversation() conversation {
	var c conversation
	for _, t := range req.Tools {
		c.offer(t.Function.Name)
	}
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			c.called(tc.ID, tc.Function.Name)
		}
		if m.Role == "tool" {
			c.result(m.ToolCallID, text(m.Content))
		} else {
			c.say(m.Role, text(m.Content))
		}
	}
	return c
}

// modelCall is a function call the demo model asks for.
type modelCall struct {
	name string
	args map[string]any
}

var txPattern = regexp.MustCompile(`tx_[0-9]+`)

// decode reads a request of the wire a handler serves, or answers 400 in
// that wire's error shape.
func decode(w http.ResponseWriter, r *http.Request, v any, wire, errType string) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(v)
	if err == nil {
		return true
	}
	body := map[string]any{"error": map[string]string{"type": "invalid_request_error",
		"message": "the demo model reads " + wire + " request: " + err.Error()}}
	if errType == "anthropic" {
		body["type"] = "error"
	}
	writeJSON(w, http.StatusBadRequest, body)
	return false
}

func (m *demoModel) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decode(w, r, &req, "a Chat Completions", "openai") {
		return
	}
	conv := req.conversation()
	rep := answer(conv)
	id := "chatcmpl-demo-" + m.next()
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	if rep.call != nil {
		msg["tool_calls"] = []map[string]any{{"id": "call_" + m.next(), "type": "function",
			"function": map[string]any{"name": rep.call.name, "arguments": rep.arguments()}}}
		finish = "tool_calls"
	} else {
		msg["content"] = rep.text
	}
	in, out := conv.inputTokens(), rep.outputTokens()
	usage := map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": ModelID,
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	// Streamed: the message as one delta, the finish, the usage, [DONE].
	sse := newSSE(w)
	chunk := func(choices []map[string]any, usage any) {
		sse.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(),
			"model": ModelID, "choices": choices, "usage": usage})
	}
	if tcs, ok := msg["tool_calls"].([]map[string]any); ok {
		tcs[0]["index"] = 0
	}
	chunk([]map[string]any{{"index": 0, "delta": msg, "finish_reason": nil}}, nil)
	chunk([]map[string]any{{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
	chunk([]map[string]any{}, usage)
	sse.done()
}

// answer applies the rules to a conversation.
func answer(c conversation) reply {
	offered := map[string]string{} // operation id → function name
	for _, name := range c.offered {
		if i := strings.LastIndex(name, "__"); i >= 0 {
			offered[name[i+2:]] = name
		}
	}
	results := map[string]map[string]any{}
	for _, r := range c.results {
		var v map[string]any
		json.Unmarshal([]byte(r[1]), &v) //nolint:errcheck // a non-object result counts as empty
		name := c.names[r[0]]
		if i := strings.LastIndex(name, "__"); i >= 0 {
			name = name[i+2:]
		}
		results[name] = v
	}
	tx := txPattern.FindString(c.user)
	if tx == "" {
		return reply{text: "Which transaction? Give me its id (tx_1001 to tx_1007) and I will look it up."}
	}
	txn, looked := results["getTransaction"]
	if fn, ok := offered["getTransaction"]; ok && !looked {
		return reply{call: &modelCall{fn, map[string]any{"id": tx}}}
	}
	customerID, _ := find(txn, "customer_id").(string)
	cust, lookedCust := results["customer"]
	if fn, ok := offered["customer"]; ok && customerID != "" && !lookedCust {
		return reply{call: &modelCall{fn, map[string]any{"id": customerID}}}
	}
	amount, _ := find(txn, "amount").(float64)
	risk, _ := find(cust, "riskScore").(float64)
	currency, _ := find(txn, "currency").(string)
	merchant, _ := find(txn, "merchant").(string)
	name, _ := find(cust, "name").(string)
	risky := amount > 1000 && risk > 0.5
	opening, opened := results["OpenCase"]
	if fn, ok := offered["OpenCase"]; ok && risky && !opened && strings.Contains(c.system, CaseInstruction) {
		return reply{call: &modelCall{fn, map[string]any{"transactionId": tx, "queue": "fraud-review",
			"reason": fmt.Sprintf("amount %.2f, customer risk %.2f", amount, risk)}}}
	}
	if txn == nil {
		return reply{text: fmt.Sprintf("I could not look %s up.", tx)}
	}
	summary := fmt.Sprintf("%s is %.2f %s at %s", tx, amount, currency, merchant)
	if name != "" {
		summary += fmt.Sprintf(" by %s (risk score %.2f)", name, risk)
	}
	switch {
	case opened && opening == nil:
		// The call had no answer (a dry-run replay does not make it).
		return reply{text: summary + ". I asked for a fraud case to be opened for it; it was not confirmed."}
	case opened:
		return reply{text: summary + ". I opened a fraud case for it."}
	case risky:
		return reply{text: summary + ". It looks risky: have someone review it."}
	}
	return reply{text: summary + ". Nothing about it looks unusual."}
}

// text is a message's content: a string, or the text of its parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts) //nolint:errcheck // no parts, no text
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// find returns the first value under key anywhere in v (a GraphQL answer
// nests its fields under data and the query's name).
func find(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		if x, ok := v[key]; ok {
			return x
		}
		for _, x := range v {
			if f := find(x, key); f != nil {
				return f
			}
		}
	case []any:
		for _, x := range v {
			if f := find(x, key); f != nil {
				return f
			}
		}
	}
	return nil
}
