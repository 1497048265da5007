// Package search_test measures operation search over four real API
// descriptions (internal/realdocs: GitHub's REST and GraphQL descriptions,
// Kubernetes' Swagger 2.0 document, Amazon EC2's WSDL; fetched on first
// use): the time to build a tool's index and the heap it keeps per
// operation, and search latency, p50 and p99, over GitHub's REST operations
// alone and over all four documents together, as GET /v1/operations
// searches a tenant's tools: every index, then one ranking.
//
//	go test -run '^$' -bench . -benchtime 2000x ./bench/search/
package search_test

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/relevance"
)

var queries = []string{"create issue", "list pull requests", "create gist", "get repository", "delete repository",
	"list issue comments", "merge pull request", "create release", "list workflow runs", "add labels to issue",
	"create fork", "search code", "create webhook", "list branches", "create commit status", "list organization members",
	"list pods", "delete namespace", "scale deployment", "run instances", "create snapshot", "add comment",
	"gist", "issues/create", "repos", "a b c d e f g"}

// ops imports one document.
func ops(b *testing.B, d realdocs.Doc) []tool.Operation {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec, err := relevance.Import(ctx, d)
	if err != nil {
		b.Skipf("%s is not available: %v", d.Name, err)
	}
	slices.SortFunc(spec.Operations, func(a, b tool.Operation) int { return cmp.Compare(a.ID, b.ID) })
	return spec.Operations
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func BenchmarkIndexBuild(b *testing.B) {
	for _, d := range realdocs.All {
		b.Run(d.Name, func(b *testing.B) {
			ops := ops(b, d)
			before := heap()
			ix := tool.NewSearchIndex(d.Name, ops)
			kept := heap() - before
			runtime.KeepAlive(ix)
			for b.Loop() {
				tool.NewSearchIndex(d.Name, ops)
			}
			b.ReportMetric(float64(kept)/float64(len(ops)), "kept-B/operation")
			b.ReportMetric(float64(len(ops)), "operations")
		})
	}
}

func BenchmarkSearch(b *testing.B) {
	github := []*tool.SearchIndex{tool.NewSearchIndex("github", ops(b, realdocs.GitHubREST))}
	all := []*tool.SearchIndex{github[0]}
	for _, d := range realdocs.All[1:] {
		all = append(all, tool.NewSearchIndex(d.Name, ops(b, d)))
	}
	for _, c := range []struct {
		name string
		ixs  []*tool.SearchIndex
	}{{"github-rest", github}, {"all-four", all}} {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			i := 0
			for b.Loop() {
				start := time.Now()
				lists := make([][]tool.Hit, len(c.ixs))
				for k, ix := range c.ixs {
					lists[k] = ix.Search(queries[i%len(queries)], "")
				}
				tool.MergeHits(lists)
				lat = append(lat, time.Since(start))
				i++
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
