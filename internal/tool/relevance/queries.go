package relevance

import (
	"fmt"
	"slices"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
)

// A Query is what a person looking for an operation would type, with the
// operation(s) they mean.
type Query struct {
	Q    string
	Want []string
}

// Queries holds the test set, per document.
var Queries = map[string][]Query{
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

// A Score is how a ranking did on a document's queries.
type Score struct {
	// Queries is how many there were; InTop5 how many had a meant operation
	// among the first five, First how many had one first.
	Queries, InTop5, First int
	// Misses are the queries whose meant operation was not first, with the
	// top five they got.
	Misses []string
}

// Recall is recall@5: the share of queries with a meant operation among the
// first five.
func (s Score) Recall() float64 { return float64(s.InTop5) / float64(max(s.Queries, 1)) }

// FirstRate is the share of queries with a meant operation first.
func (s Score) FirstRate() float64 { return float64(s.First) / float64(max(s.Queries, 1)) }

// Add is the score of two sets of queries together, misses left out.
func (s Score) Add(o Score) Score {
	return Score{Queries: s.Queries + o.Queries, InTop5: s.InTop5 + o.InTop5, First: s.First + o.First}
}

// Rank scores search, which returns operation ids best first, on each of
// a document's queries.
func Rank(doc string, search func(q string) []string) Score {
	return RankQueries(Queries[doc], search)
}

// RankQueries scores search on each of qs.
func RankQueries(qs []Query, search func(q string) []string) Score {
	s := Score{Queries: len(qs)}
	for _, tc := range qs {
		top := search(tc.Q)
		top = top[:min(5, len(top))]
		if slices.ContainsFunc(top, func(id string) bool { return slices.Contains(tc.Want, id) }) {
			s.InTop5++
		}
		if len(top) > 0 && slices.Contains(tc.Want, top[0]) {
			s.First++
		} else {
			s.Misses = append(s.Misses, fmt.Sprintf("%q: top 5 %v, want %v", tc.Q, top, tc.Want))
		}
	}
	return s
}

// IDs is search over one tool's index, for Rank: the ids of the first five
// operations matching q.
func IDs(ix *tool.SearchIndex) func(q string) []string {
	return func(q string) []string {
		hits := ix.Search(q, "")
		ids := make([]string, 0, min(len(hits), 5))
		for _, h := range hits[:min(len(hits), 5)] {
			ids = append(ids, h.ID)
		}
		return ids
	}
}
