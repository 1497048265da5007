package graphql

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentplane/agentplane/internal/tool"
)

// githubGraphQLQueries are searches of GitHub's GraphQL operations, with
// the field a person means.
var githubGraphQLQueries = []struct {
	q    string
	want []string
}{
	{"add comment", []string{"addComment"}},
	{"create issue", []string{"createIssue"}},
	{"close issue", []string{"closeIssue"}},
	{"merge pull request", []string{"mergePullRequest"}},
	{"add star", []string{"addStar"}},
	{"create pull request", []string{"createPullRequest"}},
	{"delete branch", []string{"deleteRef"}},
	{"add labels", []string{"addLabelsToLabelable"}},
	{"repository", []string{"repository"}},
	{"lock issue", []string{"lockLockable"}},
	{"request reviews", []string{"requestReviews"}},
	{"create discussion", []string{"createDiscussion"}},
}

// TestSearchRelevanceGitHubGraphQL ranks GitHub's real GraphQL operations
// for the queries above: recall@5 at least 0.9, first at least 70 %.
func TestSearchRelevanceGitHubGraphQL(t *testing.T) {
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to search GitHub's GraphQL schema (installs @octokit/graphql-schema with npm)")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "agentplane-bench", "graphql-schema-"+githubSchemaVersion)
	pkg := filepath.Join(dir, "node_modules", "@octokit", "graphql-schema")
	if _, err := os.Stat(filepath.Join(pkg, "schema.graphql")); err != nil {
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "@octokit/graphql-schema@"+githubSchemaVersion)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install: %v\n%s", err, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(pkg, "schema.graphql"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := Importer{}.Import(context.Background(), tool.Source{Data: data})
	if err != nil {
		t.Fatal(err)
	}
	ix := tool.NewSearchIndex("github", spec.Operations)
	var inTop5, first int
	for _, tc := range githubGraphQLQueries {
		hits := ix.Search(tc.q, "")
		var top []string
		for _, h := range hits[:min(5, len(hits))] {
			top = append(top, h.ID)
		}
		if slices.ContainsFunc(top, func(id string) bool { return slices.Contains(tc.want, id) }) {
			inTop5++
		}
		if len(top) > 0 && slices.Contains(tc.want, top[0]) {
			first++
		} else {
			t.Logf("%q: top 5 %v, want %v", tc.q, top, tc.want)
		}
	}
	n := float64(len(githubGraphQLQueries))
	t.Logf("GitHub GraphQL, %d operations, %d queries: recall@5 %.2f, first %.2f", ix.Len(), len(githubGraphQLQueries), float64(inTop5)/n, float64(first)/n)
	if float64(inTop5)/n < 0.9 || float64(first)/n < 0.7 {
		t.Errorf("recall@5 %.2f (want ≥ 0.9), first %.2f (want ≥ 0.7)", float64(inTop5)/n, float64(first)/n)
	}
}
