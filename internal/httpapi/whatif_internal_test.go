package httpapi

import (
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/replay"
)

// TestCompletionMessagesFollowTheToolRule checks that a replay's
// completions show their messages only to callers who may use every tool
// whose calls they hold.
func TestCompletionMessagesFollowTheToolRule(t *testing.T) {
	call := agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{{ID: "c1", Name: "payments__getTransaction", Arguments: `{"id":"tx_1"}`}}}
	cs := []replay.Completion{
		{N: 1, Request: &agent.ChatRequest{Messages: []agent.ChatMessage{{Role: agent.RoleUser, Content: "goal"}}},
			Response: agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "plain"}}},
		{N: 2, Request: &agent.ChatRequest{Messages: []agent.ChatMessage{{Role: agent.RoleUser, Content: "goal"}, call,
			{Role: agent.RoleTool, ToolCallID: "c1", Content: `{"amount":1500}`}}},
			Response: agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "done"}, Usage: &agent.Usage{InputTokens: 7}}},
	}
	got := replay.HideMessages(auth.Principal{Scopes: []string{"tool:cases"}}, cs)
	if got[0].MessagesHidden || got[0].Request == nil || got[0].Response.Message.Content != "plain" {
		t.Errorf("a completion without tool calls is hidden: %+v", got[0])
	}
	if !got[1].MessagesHidden || got[1].Request != nil || got[1].Response.Message.Content != "" || got[1].Response.Usage == nil {
		t.Errorf("a completion with a payments call shows its messages to a caller without tool:payments: %+v", got[1])
	}
	if cs[1].Request == nil {
		t.Error("hiding changed the stored completion")
	}
	for _, scopes := range [][]string{{"tool:payments"}, {"tool:*"}} {
		if shown := replay.HideMessages(auth.Principal{Scopes: scopes}, cs); shown[1].MessagesHidden {
			t.Errorf("%v: the completion is hidden", scopes)
		}
	}
}
