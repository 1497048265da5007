package workflow

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
)

// TestCallsDifferByEveryDigit: two calls whose integer arguments share a
// double are different calls, to the journal of an external run and to a
// resumed definition, while a call recorded before arguments kept their
// digits (its numbers float64s) still matches the call made again.
func TestCallsDifferByEveryDigit(t *testing.T) {
	n := func(s string) json.Number { return json.Number(s) }
	for _, tc := range []struct {
		name     string
		recorded string
		args     map[string]any
		same     bool
	}{
		{"the same id", `{"id":1234567890123456789}`, map[string]any{"id": n("1234567890123456789")}, true},
		{"another id with the same double", `{"id":1234567890123456788}`, map[string]any{"id": n("1234567890123456789")}, false},
		{"the double the id was sent as before", `{"id":1234567890123456800}`, map[string]any{"id": n("1234567890123456789")}, false},
		{"recorded as float64s", `{"amount":1,"big":1e+21,"page":{"size":2.5}}`,
			map[string]any{"amount": n("1.0"), "big": n("1e21"), "page": map[string]any{"size": n("2.50")}}, true},
		{"recorded as a float64 past 2^53", `{"n":1234567890123456800}`, map[string]any{"n": 1234567890123456789.0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.args)
			if same := callKey("t", "o", json.RawMessage(tc.recorded)) == callKey("t", "o", raw); same != tc.same {
				t.Errorf("journal keys alike: %v, want %v", same, tc.same)
			}
			s := &Step{Step: 1, Action: "a", Tool: "t", Operation: "o", Status: agent.StatusOK, Args: json.RawMessage(tc.recorded)}
			err := sameCall(1, s, agent.ToolCall{Action: "a", Tool: "t", Operation: "o", Args: tc.args})
			if tc.same && err != nil || !tc.same && !errors.Is(err, ErrNondeterministic) {
				t.Errorf("resumed: %v, want the same call: %v", err, tc.same)
			}
		})
	}
}
