package call

import (
	"testing"

	"github.com/agentplane/agentplane/internal/tool"
)

// TestReadA2A reads SendMessage answers: a completed task is the result,
// a task that waits for input or authentication fails with its error
// code and the agent's words, any other end fails naming its state.
func TestReadA2A(t *testing.T) {
	task := func(state, text string) string {
		msg := ""
		if text != "" {
			msg = `,"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"` + text + `"}]}`
		}
		return `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","contextId":"t1","status":{"state":"` + state + `"` + msg + `}}}}`
	}
	for _, tc := range []struct {
		name, body, fault, code string
	}{
		{"completed", task("TASK_STATE_COMPLETED", ""), "", ""},
		{"input required", task("TASK_STATE_INPUT_REQUIRED", "approve the refund"),
			"the remote A2A task needs input a tool call cannot give: approve the refund", tool.CodeInputRequired},
		{"auth required", task("TASK_STATE_AUTH_REQUIRED", ""),
			"the remote A2A task needs authentication a tool call cannot give", tool.CodeAuthRequired},
		{"failed", task("TASK_STATE_FAILED", "the payments tool answered 503"),
			"the remote A2A task ended TASK_STATE_FAILED: the payments tool answered 503", ""},
		{"a message", `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]}}}`, "", ""},
		{"an error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}`,
			"the A2A agent answered error -32001: Task not found", ""},
		{"no result", `{"jsonrpc":"2.0","id":1}`, "the A2A agent's answer has no result", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, fault, code := readA2A([]byte(tc.body))
			if fault != tc.fault || code != tc.code {
				t.Errorf("fault, code = %q, %q; want %q, %q", fault, code, tc.fault, tc.code)
			}
			if len(res) == 0 {
				t.Error("no result recorded")
			}
		})
	}
}
