package demo

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// TestDemoModelConversation holds a conversation with the demo model through
// the official OpenAI client, answering its calls as the demo's APIs would:
// version 1's instructions look up and answer, version 2's also open a case
// for a risky transaction.
func TestDemoModelConversation(t *testing.T) {
	apis, err := Start(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer apis.Close()
	cl := openai.NewClient(option.WithBaseURL(apis.Model), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	tools := []openai.ChatCompletionToolUnionParam{}
	for _, name := range []string{"payments__getTransaction", "customers__customer", "cases__OpenCase"} {
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name,
			Parameters: shared.FunctionParameters{"type": "object"}}))
	}
	answers := map[string]string{
		"payments__getTransaction": `{"id":"tx_1003","amount":2400,"currency":"EUR","customer_id":"cus_cyd","merchant":"Gold & Co"}`,
		"customers__customer":      `{"data":{"customer":{"id":"cus_cyd","name":"Cyd Achterberg","riskScore":0.71}}}`,
		"cases__OpenCase":          `{"caseId":"CASE-1"}`,
	}
	for _, tc := range []struct {
		instructions string
		calls        []string
		final        string
	}{
		{"You help the payments team.", []string{"payments__getTransaction", "customers__customer"}, "It looks risky"},
		{"You help the payments team. " + CaseInstruction, []string{"payments__getTransaction", "customers__customer", "cases__OpenCase"}, "I opened a fraud case"},
	} {
		msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(tc.instructions), openai.UserMessage("triage tx_1003")}
		var calls []string
		for turn := 0; ; turn++ {
			if turn > 5 {
				t.Fatalf("%q: no final answer after %d turns", tc.instructions, turn)
			}
			resp, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: ModelID, Messages: msgs, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Model != ModelID || resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
				t.Fatalf("response model %q usage %+v", resp.Model, resp.Usage)
			}
			m := resp.Choices[0].Message
			if len(m.ToolCalls) == 0 {
				if !strings.Contains(m.Content, tc.final) || resp.Choices[0].FinishReason != "stop" {
					t.Fatalf("%q: final answer %q (%s), want %q", tc.instructions, m.Content, resp.Choices[0].FinishReason, tc.final)
				}
				break
			}
			msgs = append(msgs, m.ToParam())
			for _, call := range m.ToolCalls {
				calls = append(calls, call.Function.Name)
				msgs = append(msgs, openai.ToolMessage(answers[call.Function.Name], call.ID))
			}
		}
		if strings.Join(calls, ",") != strings.Join(tc.calls, ",") {
			t.Errorf("%q: calls %v, want %v", tc.instructions, calls, tc.calls)
		}
	}
}

// TestDemoModelAsksForATransaction: without a transaction id it asks for one.
func TestDemoModelAsksForATransaction(t *testing.T) {
	call, text := answer(chatRequest{})
	if call != nil || !strings.Contains(text, "tx_1001") {
		t.Fatalf("call %v text %q", call, text)
	}
}
