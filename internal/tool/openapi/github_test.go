package openapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/openapi/octokit"
)

// TestGitHubDescriptions imports GitHub's real REST descriptions (npm
// @octokit/openapi, installed with npm on first use) and asserts their exact
// operation counts. Opt-in: it needs npm and the registry, and reads ~40 MB.
func TestGitHubDescriptions(t *testing.T) {
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to import GitHub's REST descriptions (npm install of @octokit/openapi)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := octokit.Dir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range octokit.Operations {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			spec, err := New().Import(ctx, tool.Source{Data: data})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(spec.Operations); got != want {
				t.Errorf("got %d operations, want %d", got, want)
			}
			seen := make(map[string]bool)
			for _, op := range spec.Operations {
				if seen[op.ID] {
					t.Errorf("duplicate id %q", op.ID)
				}
				seen[op.ID] = true
				if !json.Valid(op.Input) || op.Output != nil && !json.Valid(op.Output) {
					t.Errorf("%s: invalid schema JSON", op.ID)
				}
			}
			if name == "api.github.com.json" && spec.BaseURL != "https://api.github.com" {
				t.Errorf("base URL %q, want https://api.github.com", spec.BaseURL)
			}
			t.Logf("%d operations, %d warnings", len(spec.Operations), len(spec.Warnings))
		})
	}
}
