package ids

import "testing"

func TestNewIsPrefixedSortedAndValid(t *testing.T) {
	prev := ""
	for range 1000 {
		id := New(Tool)
		if !Valid(Tool, id) {
			t.Fatalf("%q is not valid", id)
		}
		if id <= prev {
			t.Fatalf("%q does not sort after %q", id, prev)
		}
		prev = id
	}
	for _, bad := range []string{"", "tool_", "wf_01J000000000000000000000000", "tool_!!", "tool_01J0000000000000000000000"} {
		if Valid(Tool, bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
