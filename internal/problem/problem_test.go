package problem

import (
	"errors"
	"fmt"
	"testing"
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
