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

// A floor is the least a document's ranking may score on a set of queries.
type floor struct{ recall, first float64 }

// TestRelevance ranks each document's real operations for the queries
// people type and holds every document to recall@5 of at least 0.9 and the
// meant operation first for at least 70 % of its queries.
func TestRelevance(t *testing.T) {
	rank(t, realdocs.All, Queries, func(string) floor { return floor{0.9, 0.7} })
}

// TestParaphrased ranks the held-out paraphrased queries, written from the
// task titles of each API's documentation, and holds each document to its
// floor.
func TestParaphrased(t *testing.T) {
	floors := map[string]floor{
		realdocs.GitHubREST.Name:    {0.54, 0.27},
		realdocs.GitHubGraphQL.Name: {0.68, 0.37},
		realdocs.Kubernetes.Name:    {0.68, 0.43},
		realdocs.Petstore.Name:      {0.73, 0.40},
	}
	rank(t, ParaphrasedDocs, Paraphrased, func(doc string) floor { return floors[doc] })
}

// imported keeps each document's operations across the tests of a run:
// GitHub's REST description takes seconds to import.
var imported = map[string][]tool.Operation{}

// rank scores each of docs on its queries in set, logs the misses and a
// table of the figures, and fails a document below its floor.
func rank(t *testing.T, docs []realdocs.Doc, set map[string][]Query, floorOf func(doc string) floor) {
	t.Helper()
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to search real API descriptions (fetched from npm and the Go module proxy)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var all Score
	var table strings.Builder
	for _, d := range docs {
		ops, ok := imported[d.Name]
		if !ok {
			spec, err := Import(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			ops = spec.Operations
			imported[d.Name] = ops
		}
		if len(ops) != d.Operations {
			t.Errorf("%s: %d operations, want %d", d.Name, len(ops), d.Operations)
		}
		ix := tool.NewSearchIndex(d.Name, ops)
		for _, tc := range set[d.Name] {
			for _, id := range tc.Want {
				if !slices.ContainsFunc(ops, func(op tool.Operation) bool { return op.ID == id }) {
					t.Errorf("%s: %q expects %s, which the document does not have", d.Name, tc.Q, id)
				}
			}
		}
		sc := RankQueries(set[d.Name], IDs(ix))
		for _, m := range sc.Misses {
			t.Logf("%s %s", d.Name, m)
		}
		fmt.Fprintf(&table, "| %s | %d | %d | %.2f | %.2f |\n", d.Name, ix.Len(), sc.Queries, sc.Recall(), sc.FirstRate())
		if f := floorOf(d.Name); sc.Recall() < f.recall || sc.FirstRate() < f.first {
			t.Errorf("%s: recall@5 %.2f (want ≥ %.2f), first %.2f (want ≥ %.2f)", d.Name, sc.Recall(), f.recall, sc.FirstRate(), f.first)
		}
		all = all.Add(sc)
	}
	fmt.Fprintf(&table, "| all | | %d | %.2f | %.2f |\n", all.Queries, all.Recall(), all.FirstRate())
	t.Logf("\n| document | operations | queries | recall@5 | first |\n|---|---|---|---|---|\n%s", table.String())
}
