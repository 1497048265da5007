package mcp

import (
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
)

// TestAgentToolDescriptionEndsEachSentence: an agent's description is
// followed by what the tool does, as a sentence of its own.
func TestAgentToolDescriptionEndsEachSentence(t *testing.T) {
	for _, tc := range []struct{ desc, want string }{
		{"Fraud triage: escalate above 1000", "Fraud triage: escalate above 1000. Invokes version 2 (the default)"},
		{"Triage fraud.  ", "Triage fraud. Invokes version 2 (the default)"},
		{"Is it fraud?", "Is it fraud? Invokes version 2 (the default)"},
		{"", "Runs the agent triage. Invokes version 2 (the default)"},
	} {
		got := agentToolOf(&agent.Version{Name: "triage", Version: "2", Description: tc.desc}).Description
		if len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("description %q gives %q, want it to start %q", tc.desc, got, tc.want)
		}
	}
}
