package web

import (
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/replay"
)

// TestRenderLiveReplayConversations checks that a live replay's page
// shows both conversations side by side and the usage of both runs, and
// leaves out the messages of a completion holding a tool the link does
// not show.
func TestRenderLiveReplayConversations(t *testing.T) {
	call := agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{{ID: "c1", Name: "risk__score", Arguments: `{"id":"RISK-ARGS"}`}}}
	req := &agent.ChatRequest{Messages: []agent.ChatMessage{{Role: agent.RoleSystem, Content: "STRICT-INSTRUCTIONS"}, {Role: agent.RoleUser, Content: "Goal: refund"}}}
	after := &agent.ChatRequest{Messages: append(append([]agent.ChatMessage{}, req.Messages...), call, agent.ChatMessage{Role: agent.RoleTool, ToolCallID: "c1", Content: "RISK-ANSWER"})}
	r := &replay.Replay{ID: "rpl_1", WorkflowID: "wf_1", DryRun: true, OriginalOutcome: "approved", ReplayOutcome: "escalated",
		Mode: replay.Mode{LLM: replay.LLMLive, UnrecordedCalls: replay.UnrecordedSkip},
		Usage: replay.Usages{Original: replay.Usage{InputTokens: 3, OutputTokens: 2, Completions: 1},
			Replay: replay.Usage{InputTokens: 6, OutputTokens: 4, Completions: 2, Cost: &replay.Cost{Amount: 0.0025, Currency: "USD"}}},
		OriginalCompletions: []replay.Completion{{N: 1, Response: agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "ORIGINAL-ANSWER"}}}},
		Completions: []replay.Completion{
			{N: 1, Request: req, Response: agent.ChatResponse{Message: call, Model: "rules-1"}},
			{N: 2, Request: after, Response: agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "too high"}}},
		},
	}
	page := render(t, ReplayPage{Replay: r, Tools: NewTools("*")})
	for _, want := range []string{"ORIGINAL-ANSWER", "STRICT-INSTRUCTIONS", "RISK-ARGS", "RISK-ANSWER", "too high", "0.0025 USD", "completions requested live"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	hidden := render(t, ReplayPage{Replay: r, Tools: NewTools("other")})
	for _, secret := range []string{"STRICT-INSTRUCTIONS", "RISK-ARGS", "RISK-ANSWER", "too high"} {
		if strings.Contains(hidden, secret) {
			t.Errorf("a page without tool:risk shows %q", secret)
		}
	}
	if !strings.Contains(hidden, "ORIGINAL-ANSWER") || !strings.Contains(hidden, "Messages hidden") {
		t.Error("a page without tool:risk should still show the conversation without risk calls, and say what it hides")
	}
}
