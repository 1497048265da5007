package openapi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/openapi/octokit"
)

// githubQueries are what a person looking for a GitHub REST operation
// would type, with the operation(s) they mean.
var githubQueries = []struct {
	q    string
	want []string
}{
	{"create issue", []string{"issues/create"}},
	{"list pull requests", []string{"pulls/list"}},
	{"create gist", []string{"gists/create"}},
	{"get repository", []string{"repos/get"}},
	{"delete repository", []string{"repos/delete"}},
	{"list issue comments", []string{"issues/list-comments", "issues/list-comments-for-repo"}},
	{"merge pull request", []string{"pulls/merge"}},
	{"create release", []string{"repos/create-release"}},
	{"list workflow runs", []string{"actions/list-workflow-runs", "actions/list-workflow-runs-for-repo"}},
	{"add labels to issue", []string{"issues/add-labels"}},
	{"create fork", []string{"repos/create-fork"}},
	{"search code", []string{"search/code"}},
	{"create webhook", []string{"repos/create-webhook", "orgs/create-webhook"}},
	{"list branches", []string{"repos/list-branches"}},
	{"create commit status", []string{"repos/create-commit-status"}},
	{"list organization members", []string{"orgs/list-members"}},
	{"create review for pull request", []string{"pulls/create-review"}},
	{"get user by username", []string{"users/get-by-username"}},
	{"list repository collaborators", []string{"repos/list-collaborators"}},
	{"create repository for authenticated user", []string{"repos/create-for-authenticated-user"}},
	{"update issue", []string{"issues/update"}},
	{"list tags", []string{"repos/list-tags"}},
	{"get commit", []string{"repos/get-commit", "git/get-commit"}},
	{"create deployment", []string{"repos/create-deployment"}},
	{"lock issue", []string{"issues/lock"}},
	{"list gists", []string{"gists/list", "gists/list-public", "gists/list-for-user"}},
	{"download repository archive zip", []string{"repos/download-zipball-archive"}},
	{"create git tag", []string{"git/create-tag"}},
	{"list check runs for commit", []string{"checks/list-for-ref"}},
	{"rerun workflow", []string{"actions/re-run-workflow"}},
}

// TestSearchRelevanceGitHub ranks GitHub's real REST operations (1,000+)
// for queries people type, and holds the ranking to recall@5 of at least
// 0.9 and the meant operation first for at least 70 % of them.
func TestSearchRelevanceGitHub(t *testing.T) {
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to search GitHub's REST description (npm install of @octokit/openapi)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := octokit.Dir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "api.github.com.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := New().Import(ctx, tool.Source{Data: data})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(spec.Operations, func(i, j int) bool { return spec.Operations[i].ID < spec.Operations[j].ID })
	ix := tool.NewSearchIndex("github", spec.Operations)
	var inTop5, first int
	for _, tc := range githubQueries {
		hits := ix.Search(tc.q, "")
		var top []string
		for _, h := range hits[:min(5, len(hits))] {
			top = append(top, h.ID)
		}
		found := slices.ContainsFunc(top, func(id string) bool { return slices.Contains(tc.want, id) })
		if found {
			inTop5++
		}
		if len(top) > 0 && slices.Contains(tc.want, top[0]) {
			first++
		} else {
			t.Logf("%q: top 5 %v, want %v", tc.q, top, tc.want)
		}
	}
	n := float64(len(githubQueries))
	t.Logf("GitHub REST, %d operations, %d queries: recall@5 %.2f, first %.2f", ix.Len(), len(githubQueries), float64(inTop5)/n, float64(first)/n)
	if float64(inTop5)/n < 0.9 || float64(first)/n < 0.7 {
		t.Errorf("recall@5 %.2f (want ≥ 0.9), first %.2f (want ≥ 0.7)", float64(inTop5)/n, float64(first)/n)
	}
}
