package demo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
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
type demoModel struct {
	n atomic.Int64
}

// modelHandler serves the demo model's Chat Completions endpoint.
func modelHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", &demoModel{})
	return mux
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
}

// modelCall is a function call the demo model asks for.
type modelCall struct {
	name string
	args map[string]any
}

var txPattern = regexp.MustCompile(`tx_[0-9]+`)

func (m *demoModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, "the demo model reads a Chat Completions request: "+err.Error())
		return
	}
	call, text := answer(req)
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	if call != nil {
		args, _ := json.Marshal(call.args)
		n := m.n.Add(1)
		msg["tool_calls"] = []map[string]any{{"id": "call_" + strconv.FormatInt(n, 10), "type": "function",
			"function": map[string]any{"name": call.name, "arguments": string(args)}}}
		finish = "tool_calls"
		text = string(args) + call.name
	} else {
		msg["content"] = text
	}
	in := 0
	for _, m := range req.Messages {
		in += len(m.Content) + 8
	}
	for _, t := range req.Tools {
		in += len(t.Function.Name) + 40
	}
	resp := map[string]any{
		"id": "chatcmpl-demo-" + strconv.FormatInt(m.n.Add(1), 10), "object": "chat.completion", "model": ModelID,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": in/4 + 1, "completion_tokens": len(text)/4 + 1, "total_tokens": in/4 + len(text)/4 + 2},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp) //nolint:errcheck // the client went away
}

// answer applies the rules: a call to make, or the final text.
func answer(req chatRequest) (*modelCall, string) {
	offered := map[string]string{} // operation id → function name
	for _, t := range req.Tools {
		name := t.Function.Name
		if i := strings.LastIndex(name, "__"); i >= 0 {
			offered[name[i+2:]] = name
		}
	}
	system, user := "", ""
	names := map[string]string{} // tool call id → function name
	results := map[string]map[string]any{}
	for _, msg := range req.Messages {
		switch msg.Role {
		case "system":
			system = text(msg.Content)
		case "user":
			user = text(msg.Content)
		case "assistant":
			for _, tc := range msg.ToolCalls {
				names[tc.ID] = tc.Function.Name
			}
		case "tool":
			var v map[string]any
			json.Unmarshal([]byte(text(msg.Content)), &v) //nolint:errcheck // a non-object result counts as empty
			name := names[msg.ToolCallID]
			if i := strings.LastIndex(name, "__"); i >= 0 {
				name = name[i+2:]
			}
			results[name] = v
		}
	}
	tx := txPattern.FindString(user)
	if tx == "" {
		return nil, "Which transaction? Give me its id (tx_1001 to tx_1007) and I will look it up."
	}
	txn, looked := results["getTransaction"]
	if fn, ok := offered["getTransaction"]; ok && !looked {
		return &modelCall{fn, map[string]any{"id": tx}}, ""
	}
	customerID, _ := find(txn, "customer_id").(string)
	cust, lookedCust := results["customer"]
	if fn, ok := offered["customer"]; ok && customerID != "" && !lookedCust {
		return &modelCall{fn, map[string]any{"id": customerID}}, ""
	}
	amount, _ := find(txn, "amount").(float64)
	risk, _ := find(cust, "riskScore").(float64)
	currency, _ := find(txn, "currency").(string)
	merchant, _ := find(txn, "merchant").(string)
	name, _ := find(cust, "name").(string)
	risky := amount > 1000 && risk > 0.5
	opening, opened := results["OpenCase"]
	if fn, ok := offered["OpenCase"]; ok && risky && !opened && strings.Contains(system, CaseInstruction) {
		return &modelCall{fn, map[string]any{"transactionId": tx, "queue": "fraud-review",
			"reason": fmt.Sprintf("amount %.2f, customer risk %.2f", amount, risk)}}, ""
	}
	if txn == nil {
		return nil, fmt.Sprintf("I could not look %s up.", tx)
	}
	summary := fmt.Sprintf("%s is %.2f %s at %s", tx, amount, currency, merchant)
	if name != "" {
		summary += fmt.Sprintf(" by %s (risk score %.2f)", name, risk)
	}
	switch {
	case opened && opening == nil:
		// The call had no answer (a dry-run replay does not make it).
		return nil, summary + ". I asked for a fraud case to be opened for it; it was not confirmed."
	case opened:
		return nil, summary + ". I opened a fraud case for it."
	case risky:
		return nil, summary + ". It looks risky: have someone review it."
	}
	return nil, summary + ". Nothing about it looks unusual."
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
