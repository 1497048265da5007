package problem

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEveryCodeHasAStatusAndTitle(t *testing.T) {
	seen := map[Code]bool{}
	for _, k := range Kinds {
		if seen[k.Code] {
			t.Errorf("code %q listed twice", k.Code)
		}
		seen[k.Code] = true
		if k.Status < 400 || k.Status > 599 || k.Title == "" || k.About == "" {
			t.Errorf("code %q: status %d, title %q, about %q", k.Code, k.Status, k.Title, k.About)
		}
	}
}

func TestAsKeepsKindThroughWrapping(t *testing.T) {
	err := fmt.Errorf("load tool: %w", New(NotFound, "no tool with id %s", "tool_1"))
	pe := As(err)
	if pe.Code != NotFound || Status(pe.Code) != 404 {
		t.Fatalf("As = %+v", pe)
	}
	if !Is(err, NotFound) || Is(err, Conflict) {
		t.Fatal("Is does not follow the chain")
	}
}

func TestInternalDocumentHidesCause(t *testing.T) {
	doc := As(errors.New("pq: password=hunter2")).Doc("/v1/tools", "req_1", "")
	if doc.Code != Internal || doc.Status != 500 || doc.Detail != "the server failed to handle the request" {
		t.Fatalf("doc = %+v", doc)
	}
	if doc.Type != "https://agentplane.dev/problems/internal" {
		t.Fatalf("type = %q", doc.Type)
	}
}

// TestKindNewDocumentsItsKind: an error of a protocol's own kind, outside
// the table, is documented as its kind, through wrapping; a code that is
// in no table is internal.
func TestKindNewDocumentsItsKind(t *testing.T) {
	k := Kind{Code: "a2a-task-not-cancelable", Status: 400, Title: "A2A task not cancelable", About: "The task has already ended."}
	err := fmt.Errorf("cancel: %w", k.New("task %s has already ended", "t1"))
	if !Is(err, k.Code) {
		t.Fatal("Is does not find the kind's code")
	}
	doc := As(err).Doc("/a2a/x/tasks/t1:cancel", "req_1", "")
	want := Document{Type: TypeBase + "a2a-task-not-cancelable", Title: "A2A task not cancelable", Status: 400,
		Detail: "task t1 has already ended", Instance: "/a2a/x/tasks/t1:cancel", Code: k.Code, RequestID: "req_1"}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("doc (-want +got):\n%s", diff)
	}
	if doc := New(k.Code, "no kind").Doc("/", "", ""); doc.Code != Internal || doc.Status != 500 {
		t.Errorf("a code of no table: %+v", doc)
	}
}
