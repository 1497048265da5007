package workflow

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
)

// TestCompletionRecordIsEncodingJSONs: a completion's record, the request
// spliced in as hashRequest encoded it, is byte for byte what encoding/json
// writes with the request as a json.RawMessage member, for requests whose
// strings hold what it escapes (<, >, &, U+2028, quotes, control
// characters) and for records with and without a cost.
func TestCompletionRecordIsEncodingJSONs(t *testing.T) {
	temp := 0.5
	reqs := []agent.ChatRequest{
		{Messages: []agent.ChatMessage{{Role: agent.RoleUser, Content: "hi"}}},
		{Messages: []agent.ChatMessage{
			{Role: agent.RoleSystem, Content: "Answer <b>only</b> with A & B; \"quote\" \u2028 line\tsep \x01"},
			{Role: agent.RoleUser, Content: "Größe: 5 € — ok?"},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{{ID: "call_1", Name: "payments__get", Arguments: `{"id":"<p1>"}`}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Content: `{"amount":1200,"note":"a & b"}`},
		}, Temperature: &temp, MaxOutputTokens: 64, OutputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	resp := agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "<done> & dusted"}, FinishReason: "stop", Model: "m-1",
		Usage: &agent.Usage{InputTokens: 12, OutputTokens: 3}}
	for i, req := range reqs {
		hash, raw, err := hashRequest(nil, nil, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, cost := range []*Cost{nil, {Amount: 0.000123, Currency: "EUR"}} {
			want, err := json.Marshal(struct {
				RequestSHA256 string             `json:"request_sha256"`
				Request       json.RawMessage    `json:"request"`
				Response      agent.ChatResponse `json:"response"`
				Step          int                `json:"step"`
				Cost          *Cost              `json:"cost,omitempty"`
			}{hash, raw, resp, 3, cost})
			if err != nil {
				t.Fatal(err)
			}
			got, err := completionRecord(hash, raw, resp, 3, cost)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("request %d, cost %v:\n got %s\nwant %s", i, cost, got, want)
			}
			if _, err := agent.DecodeCompletion(got); err != nil {
				t.Errorf("request %d: the record does not decode: %v", i, err)
			}
		}
	}
}

// BenchmarkCompletionRecord encodes the record of an agent's second
// completion (a goal, a tool call and its result, a tool offered): spliced
// as completionRecord does, and, for comparison, as encoding/json writes it
// with the request a json.RawMessage member.
func BenchmarkCompletionRecord(b *testing.B) {
	req := agent.ChatRequest{Messages: []agent.ChatMessage{
		{Role: agent.RoleSystem, Content: "You answer questions about payments. Use the tools to look them up."},
		{Role: agent.RoleUser, Content: "Is payment p1 settled, and for how much?"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{{ID: "call_1", Name: "payments__get", Arguments: `{"id":"p1"}`}}},
		{Role: agent.RoleTool, ToolCallID: "call_1", Content: `{"id":"p1","status":"settled","amount":1200,"currency":"EUR"}`},
	}, Tools: []agent.ChatTool{{Name: "payments__get", Description: "Get a payment by its id.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The payment's id."}},"required":["id"]}`)}}}
	hash, raw, err := hashRequest(nil, nil, req)
	if err != nil {
		b.Fatal(err)
	}
	resp := agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "It is settled: 1200 EUR."},
		FinishReason: "stop", Model: "m-1", Usage: &agent.Usage{InputTokens: 120, OutputTokens: 9}}
	b.Run("spliced", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := completionRecord(hash, raw, resp, 3, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(struct {
				RequestSHA256 string             `json:"request_sha256"`
				Request       json.RawMessage    `json:"request"`
				Response      agent.ChatResponse `json:"response"`
				Step          int                `json:"step"`
				Cost          *Cost              `json:"cost,omitempty"`
			}{hash, raw, resp, 3, nil}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
