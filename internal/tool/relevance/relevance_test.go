package relevance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
)

// A query is what a person looking for an operation would type, with the
// operation(s) they mean.
type query struct {
	q    string
	want []string
}

// Queries holds the test set, per document.
var Queries = map[string][]query{
	realdocs.GitHubREST.Name: {
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
	},
	realdocs.GitHubGraphQL.Name: {
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
	},
	realdocs.Kubernetes.Name: {
		{"list pods", []string{"listCoreV1NamespacedPod", "listCoreV1PodForAllNamespaces"}},
		{"delete namespace", []string{"deleteCoreV1Namespace"}},
		{"create deployment", []string{"createAppsV1NamespacedDeployment"}},
		{"scale deployment", []string{"replaceAppsV1NamespacedDeploymentScale", "patchAppsV1NamespacedDeploymentScale", "readAppsV1NamespacedDeploymentScale"}},
		{"read pod log", []string{"readCoreV1NamespacedPodLog"}},
		{"list nodes", []string{"listCoreV1Node"}},
		{"create config map", []string{"createCoreV1NamespacedConfigMap"}},
		{"delete secret", []string{"deleteCoreV1NamespacedSecret"}},
		{"read service", []string{"readCoreV1NamespacedService"}},
		{"create cron job", []string{"createBatchV1beta1NamespacedCronJob", "createBatchV2alpha1NamespacedCronJob"}},
		{"patch node", []string{"patchCoreV1Node"}},
		{"list persistent volume claims", []string{"listCoreV1NamespacedPersistentVolumeClaim", "listCoreV1PersistentVolumeClaimForAllNamespaces"}},
		{"evict pod", []string{"createCoreV1NamespacedPodEviction"}},
		{"watch pods", []string{"watchCoreV1NamespacedPodList", "watchCoreV1PodListForAllNamespaces", "watchCoreV1NamespacedPod"}},
	},
	realdocs.EC2.Name: {
		{"run instances", []string{"RunInstances"}},
		{"terminate instances", []string{"TerminateInstances"}},
		{"create snapshot", []string{"CreateSnapshot"}},
		{"describe images", []string{"DescribeImages"}},
		{"list instances", []string{"DescribeInstances"}},
		{"create security group", []string{"CreateSecurityGroup"}},
		{"allocate elastic ip address", []string{"AllocateAddress"}},
		{"attach volume", []string{"AttachVolume"}},
		{"stop instances", []string{"StopInstances"}},
		{"create key pair", []string{"CreateKeyPair"}},
		{"authorize security group ingress", []string{"AuthorizeSecurityGroupIngress"}},
		{"delete vpc", []string{"DeleteVpc"}},
		{"get console output", []string{"GetConsoleOutput"}},
		{"create tags", []string{"CreateTags"}},
	},
}

// TestRelevance ranks each document's real operations for the queries
// people type and holds every document to recall@5 of at least 0.9 and the
// meant operation first for at least 70 % of its queries.
func TestRelevance(t *testing.T) {
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to search real API descriptions (fetched from npm and the Go module proxy)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var total, totalTop5, totalFirst int
	var table strings.Builder
	for _, d := range realdocs.All {
		spec, err := Import(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Operations) != d.Operations {
			t.Errorf("%s: %d operations, want %d", d.Name, len(spec.Operations), d.Operations)
		}
		ix := tool.NewSearchIndex(d.Name, spec.Operations)
		var inTop5, first int
		for _, tc := range Queries[d.Name] {
			for _, id := range tc.want {
				if !slices.ContainsFunc(spec.Operations, func(op tool.Operation) bool { return op.ID == id }) {
					t.Errorf("%s: %q expects %s, which the document does not have", d.Name, tc.q, id)
				}
			}
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
				t.Logf("%s %q: top 5 %v, want %v", d.Name, tc.q, top, tc.want)
			}
		}
		n := len(Queries[d.Name])
		recall, firstRate := float64(inTop5)/float64(n), float64(first)/float64(n)
		fmt.Fprintf(&table, "| %s | %d | %d | %.2f | %.2f |\n", d.Name, ix.Len(), n, recall, firstRate)
		if recall < 0.9 || firstRate < 0.7 {
			t.Errorf("%s: recall@5 %.2f (want ≥ 0.9), first %.2f (want ≥ 0.7)", d.Name, recall, firstRate)
		}
		total, totalTop5, totalFirst = total+n, totalTop5+inTop5, totalFirst+first
	}
	fmt.Fprintf(&table, "| all | | %d | %.2f | %.2f |\n", total, float64(totalTop5)/float64(total), float64(totalFirst)/float64(total))
	t.Logf("\n| document | operations | queries | recall@5 | first |\n|---|---|---|---|---|\n%s", table.String())
}
