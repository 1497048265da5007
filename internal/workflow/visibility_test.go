package workflow_test

import (
	"encoding/json"
	"testing"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/workflow"
)

func TestToolVisibility(t *testing.T) {
	body := json.RawMessage(`{"amount":1500}`)
	steps := []workflow.Step{
		{Step: 1, Tool: "cases", Args: body, Request: body, Result: body},
		{Step: 2, Tool: "payments", Args: body, Request: body, Result: body},
		{Step: 3, Action: "finish"},
	}
	afterCases := workflow.Completion{N: 2, Step: 2}    // after the cases call only
	afterPayments := workflow.Completion{N: 3, Step: 3} // after both calls
	final := workflow.Completion{N: 4}                  // of no step: after every call
	for _, tc := range []struct {
		name   string
		scopes []string
		// bodies says whose steps' bodies the caller reads, by step.
		bodies map[int]bool
		// messages says which completions' messages the caller reads, by N.
		messages map[int]bool
	}{
		{name: "no tool scope", scopes: []string{"workflows:read"},
			bodies: map[int]bool{1: false, 2: false, 3: true}, messages: map[int]bool{2: false, 3: false, 4: false}},
		{name: "tool:cases sees cases, not payments", scopes: []string{"tool:cases"},
			bodies: map[int]bool{1: true, 2: false, 3: true}, messages: map[int]bool{2: true, 3: false, 4: false}},
		{name: "tool:payments sees payments, not cases", scopes: []string{"tool:payments"},
			bodies: map[int]bool{1: false, 2: true, 3: true}, messages: map[int]bool{2: false, 3: false, 4: false}},
		{name: "both tools", scopes: []string{"tool:cases", "tool:payments"},
			bodies: map[int]bool{1: true, 2: true, 3: true}, messages: map[int]bool{2: true, 3: true, 4: true}},
		{name: "tool:* sees all", scopes: []string{"tool:*"},
			bodies: map[int]bool{1: true, 2: true, 3: true}, messages: map[int]bool{2: true, 3: true, 4: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := auth.Principal{Scopes: tc.scopes}
			for _, st := range steps {
				shown := workflow.HideBodies(p, &st)
				if got := shown.Args != nil && shown.Request != nil && shown.Result != nil; st.Tool != "" && got != tc.bodies[st.Step] {
					t.Errorf("step %d (%s): bodies shown %v, want %v", st.Step, st.Tool, got, tc.bodies[st.Step])
				}
				if hidden := workflow.BodiesHidden(p, st); hidden == tc.bodies[st.Step] {
					t.Errorf("step %d: BodiesHidden %v, want %v", st.Step, hidden, !tc.bodies[st.Step])
				}
				if st.Tool != "" && st.Args == nil {
					t.Errorf("step %d: hiding changed the stored step", st.Step)
				}
			}
			for _, c := range []workflow.Completion{afterCases, afterPayments, final} {
				if hidden := workflow.MessagesHidden(p, c, steps); hidden == tc.messages[c.N] {
					t.Errorf("completion %d: messages hidden %v, want %v", c.N, hidden, !tc.messages[c.N])
				}
			}
		})
	}
	if workflow.HideBodies(auth.Principal{}, nil) != nil {
		t.Error("no step became a step")
	}
}
