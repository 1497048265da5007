package web

import (
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/replay"
)

// conversationView is the two conversations of a live replay, side by
// side, and the usage of both runs.
type conversationView struct {
	Original, Replay []completionView
	Usage            []usageRow
}

// completionView is one completion: what was new to the model (the
// messages after its previous answer) and its answer.
type completionView struct {
	N       int
	Model   string
	Tokens  string
	Cost    string
	Hidden  bool
	Asked   []messageView
	Answer  messageView
	Finish  string
	Missing bool
}

type messageView struct {
	Role, Content string
	Calls         []string
}

type usageRow struct {
	Side                 string
	Input, Output, Count string
	Cost                 string
}

// newConversationView shows a replay's usage and, for a live replay, both
// conversations; a completion that holds calls of a tool tools does not
// show is left without its messages.
func newConversationView(r *replay.Replay, tools Tools) *conversationView {
	v := &conversationView{Usage: []usageRow{usageRowOf("Original", r.Usage.Original), usageRowOf("Replay", r.Usage.Replay)}}
	v.Original, v.Replay = completionViews(r.OriginalCompletions, tools), completionViews(r.Completions, tools)
	return v
}

func usageRowOf(side string, u replay.Usage) usageRow {
	row := usageRow{Side: side, Input: fmt.Sprint(u.InputTokens), Output: fmt.Sprint(u.OutputTokens), Count: fmt.Sprint(u.Completions), Cost: "—"}
	if u.Cost != nil {
		row.Cost = formatCost(u.Cost)
	}
	return row
}

func formatCost(c *replay.Cost) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", c.Amount), "0"), ".") + " " + c.Currency
}

func completionViews(cs []replay.Completion, tools Tools) []completionView {
	out := make([]completionView, 0, len(cs))
	for _, c := range cs {
		v := completionView{N: c.N, Model: c.Response.Model, Finish: c.Response.FinishReason}
		if u := c.Response.Usage; u != nil {
			v.Tokens = fmt.Sprintf("%d in, %d out", u.InputTokens, u.OutputTokens)
		}
		if c.Cost != nil {
			v.Cost = formatCost(c.Cost)
		}
		if c.HiddenFrom(tools) || c.MessagesHidden {
			v.Hidden = true
			out = append(out, v)
			continue
		}
		if c.Request == nil {
			v.Missing = true
		} else {
			msgs := c.Request.Messages
			start := 0
			for i, m := range msgs {
				if m.Role == agent.RoleAssistant {
					start = i + 1
				}
			}
			for _, m := range msgs[start:] {
				v.Asked = append(v.Asked, messageViewOf(m))
			}
		}
		v.Answer = messageViewOf(c.Response.Message)
		out = append(out, v)
	}
	return out
}

func messageViewOf(m agent.ChatMessage) messageView {
	v := messageView{Role: m.Role, Content: m.Content}
	for _, tc := range m.ToolCalls {
		v.Calls = append(v.Calls, tc.Name+"("+tc.Arguments+")")
	}
	return v
}

// Turn is one completion of a conversation as the pages show it: the
// messages new to the model, its answer, its tokens and cost.
type Turn = completionView

// Conversation shows completions as turns, for the replay viewer and the
// console alike; a completion that holds calls of a tool tools does not
// show is left without its messages.
func Conversation(cs []replay.Completion, tools Tools) []Turn {
	return completionViews(cs, tools)
}
