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
		for _, tc := range Queries[d.Name] {
			for _, id := range tc.Want {
				if !slices.ContainsFunc(spec.Operations, func(op tool.Operation) bool { return op.ID == id }) {
					t.Errorf("%s: %q expects %s, which the document does not have", d.Name, tc.Q, id)
				}
			}
		}
		recall, firstRate, misses := Score(d.Name, func(q string) []string {
			var ids []string
			for _, h := range ix.Search(q, "") {
				ids = append(ids, h.ID)
			}
			return ids
		})
		for _, m := range misses {
			t.Logf("%s %s", d.Name, m)
		}
		n := len(Queries[d.Name])
		inTop5, first := int(recall*float64(n)+0.5), int(firstRate*float64(n)+0.5)
		fmt.Fprintf(&table, "| %s | %d | %d | %.2f | %.2f |\n", d.Name, ix.Len(), n, recall, firstRate)
		if recall < 0.9 || firstRate < 0.7 {
			t.Errorf("%s: recall@5 %.2f (want ≥ 0.9), first %.2f (want ≥ 0.7)", d.Name, recall, firstRate)
		}
		total, totalTop5, totalFirst = total+n, totalTop5+inTop5, totalFirst+first
	}
	fmt.Fprintf(&table, "| all | | %d | %.2f | %.2f |\n", total, float64(totalTop5)/float64(total), float64(totalFirst)/float64(total))
	t.Logf("\n| document | operations | queries | recall@5 | first |\n|---|---|---|---|---|\n%s", table.String())
}
