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

// TestRelevance ranks each document's real operations for the queries
// people type and holds every document to recall@5 of at least 0.9 and the
// meant operation first for at least 70 % of its queries.
func TestRelevance(t *testing.T) {
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to search real API descriptions (fetched from npm and the Go module proxy)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var all Score
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
		for _, tc := range Queries[d.Name] {
			for _, id := range tc.Want {
				if !slices.ContainsFunc(spec.Operations, func(op tool.Operation) bool { return op.ID == id }) {
					t.Errorf("%s: %q expects %s, which the document does not have", d.Name, tc.Q, id)
				}
			}
		}
		sc := Rank(d.Name, IDs(ix))
		for _, m := range sc.Misses {
			t.Logf("%s %s", d.Name, m)
		}
		fmt.Fprintf(&table, "| %s | %d | %d | %.2f | %.2f |\n", d.Name, ix.Len(), sc.Queries, sc.Recall(), sc.FirstRate())
		if sc.Recall() < 0.9 || sc.FirstRate() < 0.7 {
			t.Errorf("%s: recall@5 %.2f (want ≥ 0.9), first %.2f (want ≥ 0.7)", d.Name, sc.Recall(), sc.FirstRate())
		}
		all = all.Add(sc)
	}
	fmt.Fprintf(&table, "| all | | %d | %.2f | %.2f |\n", all.Queries, all.Recall(), all.FirstRate())
	t.Logf("\n| document | operations | queries | recall@5 | first |\n|---|---|---|---|---|\n%s", table.String())
}
