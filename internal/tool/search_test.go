package tool

import (
	"fmt"
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	for in, want := range map[string][]string{
		"issues/create":           {"issue", "create"},
		"createIssue":             {"create", "issue"},
		"create_issue":            {"create", "issue"},
		"HTTPServer":              {"http", "server"},
		"get-v2-policies":         {"get", "v2", "policy"},
		"List the statuses of a…": {"list", "status"},
		"delete_pets__petId_":     {"delete", "pet", "pet", "id"},
		"a":                       nil,
	} {
		if got := Terms(in); !slices.Equal(got, want) {
			t.Errorf("Terms(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSearchRanksIdWordsFirst(t *testing.T) {
	ops := []Operation{
		{ID: "issues/create", Kind: Write, Summary: "Create an issue"},
		{ID: "reactions/create-for-issue", Kind: Write, Summary: "Create reaction for an issue"},
		{ID: "issues/list", Kind: Read, Summary: "List issues", Description: "List issues assigned to you."},
		{ID: "repos/get", Kind: Read, Summary: "Get a repository"},
	}
	ix := NewSearchIndex("gh", ops)
	for q, want := range map[string]string{
		"create issue":   "issues/create",
		"issue create":   "issues/create",
		"list issues":    "issues/list",
		"get repository": "repos/get",
		"REPOS_GET":      "repos/get",
	} {
		hits := ix.Search(q, "")
		if len(hits) == 0 || hits[0].ID != want {
			t.Errorf("%q: %v, want %s first", q, hits, want)
		}
	}
	if hits := ix.Search("create issue", Read); len(hits) != 1 || hits[0].ID != "issues/list" {
		t.Errorf("kind=read: %v", hits)
	}
	if hits := ix.Search("kubernetes", ""); len(hits) != 0 {
		t.Errorf("a word nowhere matched %v", hits)
	}
	if all := ix.Search("  ", ""); len(all) != 4 || all[0].Score != 0 {
		t.Errorf("an empty query lists every operation unscored: %v", all)
	}
}

func TestIndexCacheBuildsOncePerRevision(t *testing.T) {
	c := NewIndexCache(2)
	loads := 0
	load := func() ([]Operation, error) { loads++; return []Operation{{ID: "a"}}, nil }
	t1 := &Tool{ID: "tool_1", Tenant: "acme", Revision: 1}
	for range 3 {
		if _, err := c.Index(t1, load); err != nil {
			t.Fatal(err)
		}
	}
	t1b := *t1
	t1b.Revision = 2
	c.Index(&t1b, load)
	c.Index(&Tool{ID: "tool_2", Tenant: "acme", Revision: 1}, load)
	c.Index(t1, load) // evicted by the two since
	if loads != 4 {
		t.Errorf("%d loads, want 4: once per revision, again after eviction", loads)
	}
}

func TestMergeHits(t *testing.T) {
	hit := func(tool string, score float64, index int) Hit {
		return Hit{OperationRef: OperationRef{Tool: tool, ID: fmt.Sprint(tool, index)}, Score: score, Index: index}
	}
	b := []Hit{hit("b", 3, 4), hit("b", 2, 0), hit("b", 2, 1)}
	a := []Hit{hit("a", 2, 7), hit("a", 1, 0)}
	got := MergeHits([][]Hit{b, nil, a})
	var ids []string
	for _, h := range got {
		ids = append(ids, h.ID)
	}
	want := []string{"b4", "a7", "b0", "b1", "a0"}
	if !slices.Equal(ids, want) {
		t.Errorf("merged %v, want %v", ids, want)
	}
	if got := MergeHits(nil); len(got) != 0 {
		t.Errorf("nothing merged: %v", got)
	}
}
