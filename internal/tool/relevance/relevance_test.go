package relevance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
)

// A floor is the least a ranking may score on a set of queries.
type floor struct{ recall, first float64 }

func (f floor) check(t *testing.T, name string, sc Score) {
	t.Helper()
	if sc.Recall() < f.recall || sc.FirstRate() < f.first {
		t.Errorf("%s: recall@5 %.2f (want ≥ %.2f), first %.2f (want ≥ %.2f)", name, sc.Recall(), f.recall, sc.FirstRate(), f.first)
	}
}

// TestRelevance ranks each document's real operations for the queries
// people type and holds each document to its figures: recall@5 and the
// share of queries with the meant operation first.
func TestRelevance(t *testing.T) {
	rank(t, realdocs.All, Queries, map[string]floor{
		realdocs.GitHubREST.Name:    {1, 1},
		realdocs.GitHubGraphQL.Name: {0.91, 0.91},
		realdocs.Kubernetes.Name:    {1, 1},
		realdocs.EC2.Name:           {1, 0.92},
	}, floor{0.98, 0.97})
}

// TestParaphrased ranks the held-out paraphrased queries, written from the
// task titles of each API's documentation, and holds each document, and
// all of them together, to its figures.
func TestParaphrased(t *testing.T) {
	rank(t, ParaphrasedDocs, Paraphrased, map[string]floor{
		realdocs.GitHubREST.Name:    {0.95, 0.68},
		realdocs.GitHubGraphQL.Name: {0.93, 0.81},
		realdocs.Kubernetes.Name:    {0.81, 0.75},
		realdocs.Petstore.Name:      {0.93, 0.93},
	}, floor{0.9, 0.77})
}

// TestIdentifiersRankFirst holds every operation of every document first
// for its own id, and for its id's words written apart (issues create,
// list Core V1 Namespaced Pod): what people mean is learnt without
// hiding what they name.
func TestIdentifiersRankFirst(t *testing.T) {
	for _, d := range append(slices.Clone(realdocs.All), realdocs.Petstore) {
		ops := operations(t, d)
		ix := tool.NewSearchIndex(d.Name, ops)
		for _, op := range ops {
			for _, q := range []string{op.ID, spaced(op.ID)} {
				if hits := ix.Search(q, ""); len(hits) == 0 || hits[0].ID != op.ID {
					t.Errorf("%s: %q does not rank %s first: %v", d.Name, q, op.ID, IDs(ix)(q))
				}
			}
		}
	}
}

// spaced writes an id's words apart: "createIssue" → "create Issue",
// "issues/create" → "issues create".
func spaced(id string) string {
	var b strings.Builder
	rs := []rune(id)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			b.WriteRune(' ')
			continue
		case i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])):
			b.WriteRune(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// imported keeps each document's operations across the tests of a run:
// GitHub's REST description takes seconds to import.
var imported = map[string][]tool.Operation{}

// operations imports d, once per run; the test is skipped unless
// AGENTPLANE_TEST_GITHUB_SPECS=1.
func operations(t *testing.T, d realdocs.Doc) []tool.Operation {
	t.Helper()
	if os.Getenv("AGENTPLANE_TEST_GITHUB_SPECS") != "1" {
		t.Skip("set AGENTPLANE_TEST_GITHUB_SPECS=1 to search real API descriptions (fetched from npm and the Go module proxy)")
	}
	if ops, ok := imported[d.Name]; ok {
		return ops
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec, err := Import(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Operations) != d.Operations {
		t.Errorf("%s: %d operations, want %d", d.Name, len(spec.Operations), d.Operations)
	}
	imported[d.Name] = spec.Operations
	return spec.Operations
}

// rank scores each of docs on its queries in set, logs the misses and a
// table of the figures, and fails a document below its floor, or all of
// them together below overall.
func rank(t *testing.T, docs []realdocs.Doc, set map[string][]Query, floors map[string]floor, overall floor) {
	t.Helper()
	var all Score
	var table strings.Builder
	for _, d := range docs {
		ops := operations(t, d)
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
		floors[d.Name].check(t, d.Name, sc)
		all = all.Add(sc)
	}
	fmt.Fprintf(&table, "| all | | %d | %.2f | %.2f |\n", all.Queries, all.Recall(), all.FirstRate())
	overall.check(t, "all", all)
	t.Logf("\n| document | operations | queries | recall@5 | first |\n|---|---|---|---|---|\n%s", table.String())
}
