package replay

import "github.com/agentplane/agentplane/internal/workflow"

// HiddenFrom reports whether r may not read c's messages: they hold a call
// of, or an answer from, a tool r may not use.
func (c Completion) HiddenFrom(r workflow.Reader) bool {
	for _, name := range c.Tools() {
		if !r.CanUseTool(name) {
			return true
		}
	}
	return false
}

// HideMessages returns the completions as r may read them: the messages
// left out of those that hold calls of a tool r may not use.
func HideMessages(r workflow.Reader, cs []Completion) []Completion {
	if len(cs) == 0 {
		return cs
	}
	out := make([]Completion, len(cs))
	for i, c := range cs {
		out[i] = c
		if c.HiddenFrom(r) {
			out[i] = c.Hidden()
		}
	}
	return out
}
