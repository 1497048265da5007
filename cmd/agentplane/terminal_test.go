package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile is what a model, a tool or an external agent may answer to take
// over the terminal of whoever reads the run: clear the screen and write
// at its top, set the window's title, a hidden link (OSC 8), a carriage
// return that overwrites the line, an 8-bit CSI, a right-to-left override.
const hostile = "ok\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\\rapproved\u009b31m\u202egnirts"

// hostileShown is hostile as the client prints it.
const hostileShown = `ok\x1b[2J\x1b[H\x1b]0;pwned\a\x1b]8;;https://evil.example\x1b\click\x1b]8;;\x1b\\rapproved\u009b31m\u202egnirts`

// TestCLIEscapesControlCharacters reads a workflow whose recorded text is
// hostile in every place the client prints (a step's reason and error,
// the conversation's messages and tool calls, the output, the workflow's
// error, a problem's detail) and sees each printed with its control
// characters escaped, readable and inert.
func TestCLIEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	step := map[string]any{"step": 1, "action": "gateway_call", "kind": "call", "status": "denied", "tool": "payments",
		"operation": "refund", "reason": hostile, "error": hostile}
	done := map[string]any{"event": "complete", "workflow_id": "wf_1", "status": "failed", "outcome": "failed",
		"error": map[string]any{"detail": hostile}, "output": hostile}
	wf := map[string]any{"workflow_id": "wf_1", "agent": "triage", "agent_version": "1", "goal": hostile, "status": "failed",
		"outcome": "failed", "error": map[string]any{"detail": hostile}, "output": hostile,
		"steps": []any{step, map[string]any{"step": 2, "action": "chat", "kind": "completion", "status": "failed", "model": "gpt", "error": hostile}},
		"completions": []any{map[string]any{"n": 1, "step": 2, "model": "gpt", "finish_reason": hostile,
			"request": map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": hostile},
				map[string]any{"role": "tool", "tool_call_id": hostile, "content": hostile}}},
			"response": map[string]any{"message": map[string]any{"role": "assistant", "content": hostile,
				"tool_calls": []any{map[string]any{"id": "c1", "name": hostile, "arguments": hostile}}}}}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/workflows/wf_1":
			json.NewEncoder(w).Encode(wf)
		case "/v1/workflows/wf_1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			for i, ev := range []any{step, done} {
				b, _ := json.Marshal(ev)
				fmt.Fprintf(w, "id: %d\ndata: %s\n\n", i+1, b)
			}
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"title": "Not found", "status": 404, "detail": hostile})
		}
	}))
	t.Cleanup(srv.Close)
	config := filepath.Join(t.TempDir(), "config.yaml")
	for _, tc := range []struct {
		name string
		args []string
		// shown is how many times hostile is printed escaped (the output
		// is printed as JSON, which escapes it its own way).
		shown int
	}{
		{"conversation", []string{"workflows", "get", "wf_1", "--conversation"}, 7},
		{"get", []string{"workflows", "get", "wf_1"}, 5},
		{"follow", []string{"workflows", "events", "wf_1", "--follow"}, 3},
		{"problem", []string{"workflows", "get", "wf_2"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errs bytes.Buffer
			args := append(slices.Clip(tc.args), "--url", srv.URL, "--token", "tok", "--config", config)
			if err := run(context.Background(), args, func(string) string { return "" }, &out, &errs); err != nil {
				report(err, &errs)
			}
			printed := out.String() + errs.String()
			for i, r := range printed {
				if escaped(r) || (r == utf8.RuneError && !strings.HasPrefix(printed[i:], "\uFFFD")) {
					t.Fatalf("agentplane %s printed %q at byte %d, for the terminal to act on:\n%q", strings.Join(tc.args, " "), r, i, printed)
				}
			}
			if n := strings.Count(printed, hostileShown); n != tc.shown {
				t.Errorf("agentplane %s printed the hostile text escaped %d times, want %d:\n%s", strings.Join(tc.args, " "), n, tc.shown, printed)
			}
		})
	}
}

func TestTerminalText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain text, a tab\tand\nlines", "plain text, a tab\tand\nlines"},
		{"é ☃ 漢字 \U0001F600", "é ☃ 漢字 \U0001F600"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"bell\a, cr\r, nul\x00, del\x7f", `bell\a, cr\r, nul\x00, del\x7f`},
		{"csi\u009b2J, lro\u202d, isolate\u2066", `csi\u009b2J, lro\u202d, isolate\u2066`},
		{"not utf-8 \x9b\xff", `not utf-8 \x9b\xff`},
	} {
		var b bytes.Buffer
		n, err := terminal(&b).Write([]byte(tc.in))
		if err != nil || n != len(tc.in) || b.String() != tc.want {
			t.Errorf("terminal(%q) wrote %q (%d, %v), want %q", tc.in, b.String(), n, err, tc.want)
		}
	}
}
