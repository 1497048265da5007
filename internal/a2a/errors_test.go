package a2a

import (
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
)

// TestKindsAreA2AsOwn: each A2A error is a kind of its own, outside the
// problem table, with a page's title and text, and reads on the bindings
// as the protocol's error of its name.
func TestKindsAreA2AsOwn(t *testing.T) {
	want := map[problem.Code]bindingErr{
		"a2a-task-not-cancelable":             {"TASK_NOT_CANCELABLE", -32002, "FAILED_PRECONDITION"},
		"a2a-push-notification-not-supported": {"PUSH_NOTIFICATION_NOT_SUPPORTED", -32003, "FAILED_PRECONDITION"},
		"a2a-unsupported-operation":           {"UNSUPPORTED_OPERATION", -32004, "FAILED_PRECONDITION"},
		"a2a-content-type-not-supported":      {"CONTENT_TYPE_NOT_SUPPORTED", -32005, "INVALID_ARGUMENT"},
		"a2a-version-not-supported":           {"VERSION_NOT_SUPPORTED", -32009, "FAILED_PRECONDITION"},
	}
	if len(Kinds) != len(want) {
		t.Errorf("%d kinds, want %d", len(Kinds), len(want))
	}
	for _, k := range Kinds {
		if _, ok := problem.Lookup(k.Code); ok {
			t.Errorf("%s is also in the problem table", k.Code)
		}
		if k.Status != 400 || k.Title == "" || k.About == "" {
			t.Errorf("%s: status %d, title %q, about %q", k.Code, k.Status, k.Title, k.About)
		}
		pe := k.New("detail")
		if got := errOf(pe); got != want[k.Code] {
			t.Errorf("%s reads as %+v, want %+v", k.Code, got, want[k.Code])
		}
		if doc := pe.Doc("/", "", ""); doc.Code != k.Code || doc.Status != k.Status || doc.Title != k.Title {
			t.Errorf("%s: document %+v", k.Code, doc)
		}
	}
}
