package graphql

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/vektah/gqlparser/v2"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
)

// githubSchemaVersion pins @octokit/graphql-schema: the counts below are
// those of this version. Its schema.graphql and schema.json are snapshots
// of different days (the SDL has seven mutations and Query.id the JSON
// lacks, the JSON two mutations the SDL lacks), so each file has its own
// count. Both were checked with graphql-js (buildSchema, buildClientSchema).
const githubSchemaVersion = "15.26.1"

// TestGitHubSchema imports GitHub's public GraphQL schema, as SDL and as
// introspection JSON, from the npm package @octokit/graphql-schema.
func TestGitHubSchema(t *testing.T) {
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to import GitHub's GraphQL schema (installs @octokit/graphql-schema with npm)")
	}
	cache, err := realdocs.Cache()
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := realdocs.NPMDir(context.Background(), cache, "@octokit/graphql-schema", githubSchemaVersion, "schema.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file               string
		queries, mutations int
		validates          bool
	}{
		{file: "schema.graphql", queries: 31, mutations: 247},
		{file: "schema.json", queries: 30, mutations: 242, validates: true},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(pkg, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			spec, err := Importer{}.Import(context.Background(), tool.Source{Data: data})
			if err != nil {
				t.Fatal(err)
			}
			var queries, mutations int
			for _, op := range spec.Operations {
				switch op.GraphQL.Root {
				case "query":
					queries++
				case "mutation":
					mutations++
				}
			}
			if queries != tc.queries || mutations != tc.mutations {
				t.Errorf("got %d queries and %d mutations, want %d and %d", queries, mutations, tc.queries, tc.mutations)
			}
			if tc.validates && len(spec.Warnings) > 0 {
				t.Errorf("warnings: %q", spec.Warnings)
			}
			if tc.validates {
				schema, _, err := fromIntrospection(data)
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range spec.Operations {
					doc := document(op.GraphQL)
					if _, errs := gqlparser.LoadQueryWithRules(schema, doc, nil); len(errs) > 0 {
						t.Errorf("%s: document does not validate: %v", op.ID, errs)
					}
				}
			}
			if !tc.validates && len(spec.Warnings) == 0 {
				t.Error("no warning for the SDL's duplicated fields")
			}
		})
	}
}
