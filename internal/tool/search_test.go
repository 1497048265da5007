package tool

import (
	"fmt"
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	for in, want := range map[string][]string{
		"issues/create":             {"issu", "creat"},
		"createIssue":               {"creat", "issu"},
		"create_issue":              {"creat", "issu"},
		"HTTPServer":                {"http", "server"},
		"get-v2-policies":           {"get", "v2", "policy"},
		"List the statuses of a…":   {"list", "status"},
		"delete_pets__petId_":       {"delet", "pet", "pet", "id"},
		"a":                         nil,
		"created creating creates":  {"creat", "creat", "creat"},
		"running stopped tagged":    {"run", "stop", "tag"},
		"applied settings passed":   {"apply", "set", "pass"},
		"string need speed release": {"string", "need", "speed", "releas"},
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

// TestSearchUnderstandsHowPeopleAsk holds search to everyday verbs,
// paraphrases and word forms, and to what a method and path shape mean,
// while an operation's id, however written, still ranks it first.
func TestSearchUnderstandsHowPeopleAsk(t *testing.T) {
	op := func(id, method, path, summary string) Operation {
		kind := Write
		if method == "GET" {
			kind = Read
		}
		return Operation{ID: id, Kind: kind, Summary: summary, HTTP: &HTTPBinding{Method: method, Path: path}}
	}
	rest := NewSearchIndex("gh", []Operation{
		op("repos/create-webhook", "POST", "/repos/{owner}/{repo}/hooks", "Create a repository webhook"),
		op("repos/create-for-authenticated-user", "POST", "/user/repos", "Create a repository for the authenticated user"),
		op("repos/list-for-authenticated-user", "GET", "/user/repos", "List repositories for the authenticated user"),
		op("repos/get", "GET", "/repos/{owner}/{repo}", "Get a repository"),
		op("repos/update", "PATCH", "/repos/{owner}/{repo}", "Update a repository"),
		op("repos/delete", "DELETE", "/repos/{owner}/{repo}", "Delete a repository"),
		op("reactions/create-for-release", "POST", "/repos/{owner}/{repo}/releases/{release_id}/reactions", "Create reaction for a release"),
		op("repos/create-release", "POST", "/repos/{owner}/{repo}/releases", "Create a release"),
		op("issues/add-labels", "POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels", "Add labels to an issue"),
		op("issues/create-label", "POST", "/repos/{owner}/{repo}/labels", "Create a label"),
		op("issues/create", "POST", "/repos/{owner}/{repo}/issues", "Create an issue"),
		op("issues/get-comment", "GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "Get an issue comment"),
		op("issues/delete-comment", "DELETE", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "Delete an issue comment"),
		op("issues/create-comment", "POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "Create an issue comment"),
		op("projects/create", "POST", "/orgs/{org}/projects", "Create a project"),
		op("users/get-by-username", "GET", "/users/{username}", "Get a user"),
		op("users/get-authenticated", "GET", "/user", "Get the authenticated user"),
	})
	field := func(root, name, summary string) Operation {
		kind := Read
		if root == "mutation" {
			kind = Write
		}
		return Operation{ID: name, Kind: kind, Summary: summary, GraphQL: &GraphQLBinding{Root: root, Field: name}}
	}
	graph := NewSearchIndex("gh", []Operation{
		field("mutation", "createIssue", "Creates a new issue."),
		field("mutation", "createProject", "Creates a new project."),
		field("query", "user", "Lookup a user by login."),
		field("query", "viewer", "The currently authenticated user."),
		field("query", "repository", "Lookup a given repository by the owner and repository name."),
		field("query", "organization", "Lookup a organization by login."),
	})
	for _, tc := range []struct {
		ix      *SearchIndex
		q, want string
	}{
		// the action vocabulary, and what a method and path shape do
		{rest, "spin up a new repository", "repos/create-for-authenticated-user"},
		{rest, "cut a release", "repos/create-release"},
		{rest, "look up a repository", "repos/get"},
		{rest, "remove a repository", "repos/delete"},
		{rest, "rename a repository", "repos/update"},
		{rest, "show my repositories", "repos/list-for-authenticated-user"},
		{rest, "fetch my user", "users/get-authenticated"},
		{graph, "show the signed-in user", "viewer"},
		{graph, "look up a repository", "repository"},
		// a query naming no action asks to make what it starts with
		{rest, "comment on an issue", "issues/create-comment"},
		// words after a preposition are context and count for less
		{rest, "file a bug in a project", "issues/create"},
		{graph, "file a bug in a project", "createIssue"},
		// word forms
		{rest, "creating releases", "repos/create-release"},
		{rest, "created issues", "issues/create"},
		// the word as typed wins over a synonym
		{rest, "add labels to issue", "issues/add-labels"},
		// exact ids, however written, and their words come first
		{rest, "repos/create-webhook", "repos/create-webhook"},
		{rest, "repos create webhook", "repos/create-webhook"},
		{rest, "REPOS_GET", "repos/get"},
		{rest, "users/get-authenticated", "users/get-authenticated"},
		{graph, "viewer", "viewer"},
		{graph, "createProject", "createProject"},
		{graph, "create project", "createProject"},
	} {
		hits := tc.ix.Search(tc.q, "")
		if len(hits) == 0 || hits[0].ID != tc.want {
			top := []string{}
			for _, h := range hits[:min(3, len(hits))] {
				top = append(top, fmt.Sprintf("%s %.2f", h.ID, h.Score))
			}
			t.Errorf("%q: first %v, want %s", tc.q, top, tc.want)
		}
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
