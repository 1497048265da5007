package openapi

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/openapi/octokit"
)

// githubOps imports api.github.com.json of a published @octokit/openapi.
func githubOps(t *testing.T, ctx context.Context, version string) []tool.Operation {
	t.Helper()
	dir, err := octokit.DirOf(ctx, version)
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
	return spec.Operations
}

// changesOf lists an operation's changes in a diff as "kind path
// breaking".
func changesOf(d tool.Diff, op string) []string {
	var out []string
	for _, c := range d.Changed {
		if c.Operation != op {
			continue
		}
		for _, ch := range c.Changes {
			s := ch.Kind + " " + ch.Path
			if ch.Breaking {
				s += " breaking"
			}
			out = append(out, s)
		}
	}
	return out
}

// TestGitHubDescriptionDrift diffs two pairs of published releases of
// GitHub's REST description (npm @octokit/openapi, installed on first
// use) and compares the diff with what was read by hand in the two JSON
// documents: 23.0.0 to 23.0.2 changed one operation (repos/get-content lost
// the request body a GET never had a use for); 22.0.0 to 23.0.0 removed
// the team discussions, tag protection, Copilot metrics and organization
// custom property values endpoints, and changed, among others, the
// operations checked below. Opt-in: it needs npm and the registry.
func TestGitHubDescriptionDrift(t *testing.T) {
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to diff published releases of GitHub's REST description (npm install of @octokit/openapi)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	v22, v23, v232 := githubOps(t, ctx, "22.0.0"), githubOps(t, ctx, "23.0.0"), githubOps(t, ctx, octokit.Version)

	d := tool.DiffOperations(v23, v232)
	if len(d.Added) != 0 || len(d.Removed) != 0 || len(d.Changed) != 1 {
		t.Errorf("23.0.0 to %s: added %v, removed %v, %d changed; want one changed", octokit.Version, d.Added, d.Removed, len(d.Changed))
	}
	if diff := cmp.Diff([]string{"parameter_removed body breaking"}, changesOf(d, "repos/get-content")); diff != "" {
		t.Errorf("repos/get-content, 23.0.0 to %s (-want +got):\n%s", octokit.Version, diff)
	}

	d = tool.DiffOperations(v22, v23)
	removed := []string{
		"copilot/copilot-metrics-for-organization", "copilot/copilot-metrics-for-team",
		"orgs/custom-properties-for-orgs-create-or-update-organization-values", "orgs/custom-properties-for-orgs-get-organization-values",
		"reactions/create-for-team-discussion-comment-in-org", "reactions/create-for-team-discussion-comment-legacy",
		"reactions/create-for-team-discussion-in-org", "reactions/create-for-team-discussion-legacy",
		"reactions/delete-for-team-discussion", "reactions/delete-for-team-discussion-comment",
		"reactions/list-for-team-discussion-comment-in-org", "reactions/list-for-team-discussion-comment-legacy",
		"reactions/list-for-team-discussion-in-org", "reactions/list-for-team-discussion-legacy",
		"repos/create-tag-protection", "repos/delete-tag-protection", "repos/list-tag-protection",
		"teams/create-discussion-comment-in-org", "teams/create-discussion-comment-legacy",
		"teams/create-discussion-in-org", "teams/create-discussion-legacy",
		"teams/delete-discussion-comment-in-org", "teams/delete-discussion-comment-legacy",
		"teams/delete-discussion-in-org", "teams/delete-discussion-legacy",
		"teams/get-discussion-comment-in-org", "teams/get-discussion-comment-legacy",
		"teams/get-discussion-in-org", "teams/get-discussion-legacy",
		"teams/list-discussion-comments-in-org", "teams/list-discussion-comments-legacy",
		"teams/list-discussions-in-org", "teams/list-discussions-legacy",
		"teams/update-discussion-comment-in-org", "teams/update-discussion-comment-legacy",
		"teams/update-discussion-in-org", "teams/update-discussion-legacy",
	}
	if diff := cmp.Diff(removed, d.Removed); diff != "" {
		t.Errorf("removed, 22.0.0 to 23.0.0 (-want +got):\n%s", diff)
	}
	if len(d.Added) != 152 || !d.Breaking() {
		t.Errorf("22.0.0 to 23.0.0: %d added (want 152), breaking %v", len(d.Added), d.Breaking())
	}
	for op, want := range map[string][]string{
		// check_run_id gained format int64.
		"checks/get": {"format_changed check_run_id breaking"},
		// The rate limit resources lost code_scanning_upload and gained
		// copilot_usage_records.
		"rate-limit/get": {"response_field_removed response.resources.code_scanning_upload breaking",
			"response_field_added response.resources.copilot_usage_records"},
		// The app permissions lost team_discussions and gained two;
		// organization_copilot_seat_management takes read as well as
		// write; the repositories gained two fields.
		"apps/create-installation-access-token": {
			"parameter_added permissions.code_quality",
			"parameter_added permissions.organization_copilot_agent_settings",
			"enum_widened permissions.organization_copilot_seat_management",
			"parameter_removed permissions.team_discussions breaking",
			"response_field_added response.permissions.code_quality",
			"response_field_added response.permissions.organization_copilot_agent_settings",
			"enum_widened response.permissions.organization_copilot_seat_management",
			"response_field_removed response.permissions.team_discussions breaking",
			"response_field_added response.repositories[].has_pull_requests",
			"response_field_added response.repositories[].pull_request_creation_policy",
		},
	} {
		if diff := cmp.Diff(want, changesOf(d, op)); diff != "" {
			t.Errorf("%s, 22.0.0 to 23.0.0 (-want +got):\n%s", op, diff)
		}
	}
}
