package relevance

import "github.com/agentplane/agentplane/internal/realdocs"

// ParaphrasedDocs are the documents the paraphrased queries are about.
var ParaphrasedDocs = []realdocs.Doc{realdocs.GitHubREST, realdocs.GitHubGraphQL, realdocs.Kubernetes, realdocs.Petstore}

// Paraphrased holds the held-out set, per document: queries written from
// the task titles of each API's own documentation ("Create a repository",
// "Run a stateless application using a deployment", "Place an order for a
// pet") in the words a person uses for the task, not in the words of
// operation ids. Search is tuned on Queries; these measure whether that
// tuning carries over to how people ask.
var Paraphrased = map[string][]Query{
	realdocs.GitHubREST.Name: {
		{"spin up a new repository", []string{"repos/create-for-authenticated-user", "repos/create-in-org"}},
		{"file a bug in a project", []string{"issues/create"}},
		{"cut a release", []string{"repos/create-release"}},
		{"push a change to a file", []string{"repos/create-or-update-file-contents"}},
		{"leave feedback on a pull request", []string{"pulls/create-review", "pulls/create-review-comment"}},
		{"find a repo by its name", []string{"search/repos", "repos/get"}},
		{"open a pull request", []string{"pulls/create"}},
		{"comment on an issue", []string{"issues/create-comment"}},
		{"show the latest release", []string{"repos/get-latest-release"}},
		{"remove a file from a repository", []string{"repos/delete-file"}},
		{"rename a repository", []string{"repos/update"}},
		{"close an issue", []string{"issues/update"}},
		{"star a repo", []string{"activity/star-repo-for-authenticated-user"}},
		{"fetch my own user profile", []string{"users/get-authenticated"}},
		{"ask someone to review a pull request", []string{"pulls/request-reviewers"}},
		{"trigger a workflow manually", []string{"actions/create-workflow-dispatch"}},
		{"stop a running workflow", []string{"actions/cancel-workflow-run"}},
		{"read the contents of a file", []string{"repos/get-content"}},
		{"give a user access to a repository", []string{"repos/add-collaborator"}},
		{"make a new branch", []string{"git/create-ref"}},
		{"add a secret to a repository", []string{"actions/create-or-update-repo-secret"}},
		{"assign someone to an issue", []string{"issues/add-assignees"}},
	},
	realdocs.GitHubGraphQL.Name: {
		{"spin up a new repository", []string{"createRepository"}},
		{"file a bug in a project", []string{"createIssue"}},
		{"leave feedback on a pull request", []string{"addPullRequestReview", "addPullRequestReviewComment"}},
		{"push a change to a file", []string{"createCommitOnBranch"}},
		{"reopen a closed issue", []string{"reopenIssue"}},
		{"react to a comment with an emoji", []string{"addReaction"}},
		{"change the title of an issue", []string{"updateIssue"}},
		{"follow someone", []string{"followUser"}},
		{"find a repo by its name", []string{"repository", "search"}},
		{"approve a pull request", []string{"submitPullRequestReview", "addPullRequestReview"}},
		{"archive a repo", []string{"archiveRepository"}},
		{"look up a user by login", []string{"user"}},
		{"show the signed-in user", []string{"viewer"}},
		{"remove a label from an issue", []string{"removeLabelsFromLabelable"}},
		{"turn on auto-merge for a pull request", []string{"enablePullRequestAutoMerge"}},
		{"move an issue to another repository", []string{"transferIssue"}},
	},
	realdocs.Kubernetes.Name: {
		{"spin up a new pod", []string{"createCoreV1NamespacedPod"}},
		{"roll out a new deployment", []string{"createAppsV1NamespacedDeployment"}},
		{"show the logs of a container", []string{"readCoreV1NamespacedPodLog"}},
		{"remove a pod", []string{"deleteCoreV1NamespacedPod"}},
		{"change the number of replicas of a deployment", []string{"patchAppsV1NamespacedDeploymentScale", "replaceAppsV1NamespacedDeploymentScale"}},
		{"store a password in a secret", []string{"createCoreV1NamespacedSecret"}},
		{"make a new namespace", []string{"createCoreV1Namespace"}},
		{"expose an application as a service", []string{"createCoreV1NamespacedService"}},
		{"find every pod in a namespace", []string{"listCoreV1NamespacedPod"}},
		{"run a one-off job", []string{"createBatchV1NamespacedJob"}},
		{"edit a config map", []string{"patchCoreV1NamespacedConfigMap", "replaceCoreV1NamespacedConfigMap"}},
		{"check the status of a deployment", []string{"readAppsV1NamespacedDeploymentStatus", "readAppsV1NamespacedDeployment"}},
		{"see the events in a namespace", []string{"listCoreV1NamespacedEvent"}},
		{"schedule a recurring job", []string{"createBatchV1beta1NamespacedCronJob", "createBatchV2alpha1NamespacedCronJob"}},
		{"autoscale a deployment", []string{"createAutoscalingV1NamespacedHorizontalPodAutoscaler", "createAutoscalingV2beta1NamespacedHorizontalPodAutoscaler", "createAutoscalingV2beta2NamespacedHorizontalPodAutoscaler"}},
		{"take a node out of service", []string{"patchCoreV1Node", "replaceCoreV1Node", "deleteCoreV1Node"}},
	},
	realdocs.Petstore.Name: {
		{"register a new pet", []string{"addPet"}},
		{"buy a pet", []string{"placeOrder"}},
		{"look up a pet by its id", []string{"getPetById"}},
		{"show pets that are still available", []string{"findPetsByStatus"}},
		{"change a pet's name", []string{"updatePet", "updatePetWithForm"}},
		{"remove a pet from the store", []string{"deletePet"}},
		{"upload a photo of a pet", []string{"uploadFile"}},
		{"sign in", []string{"loginUser"}},
		{"sign out", []string{"logoutUser"}},
		{"cancel an order", []string{"deleteOrder"}},
		{"sign up a new user", []string{"createUser"}},
		{"check stock levels", []string{"getInventory"}},
		{"check on an order", []string{"getOrderById"}},
		{"find pets with a tag", []string{"findPetsByTags"}},
		{"edit a user's details", []string{"updateUser"}},
	},
}
