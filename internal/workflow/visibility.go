package workflow

// A Reader is who reads a workflow's history. It sees the bodies of a
// tool's calls (args, request, result), and the messages of a completion
// after them, only when it may use the tool: a principal by its tool:<name>
// and tool:* scopes, a signed page by the tools its link names.
type Reader interface {
	CanUseTool(name string) bool
}

// BodiesHidden reports whether r may not read the bodies of st: it is a
// call of a tool r may not use.
func BodiesHidden(r Reader, st Step) bool {
	return st.Tool != "" && !r.CanUseTool(st.Tool)
}

// HideBodies returns st as r may read it: without its args, request and
// result when r may not use its tool.
func HideBodies(r Reader, st *Step) *Step {
	if st == nil || !BodiesHidden(r, *st) {
		return st
	}
	c := *st
	c.Args, c.Result, c.Request = nil, nil, nil
	return &c
}

// MessagesHidden reports whether the messages of c are withheld from r:
// the workflow called, before c, a tool r may not use, so the conversation
// may hold that tool's answers. A completion of no step (c.Step 0) comes
// after every call.
func MessagesHidden(r Reader, c Completion, steps []Step) bool {
	for _, st := range steps {
		if (c.Step == 0 || st.Step < c.Step) && BodiesHidden(r, st) {
			return true
		}
	}
	return false
}
