// Package search_test measures operation search over GitHub's real REST
// description (npm @octokit/openapi, installed on first use): the time to
// build a tool's index and the heap it keeps, and search latency, p50 and
// p99, over the queries people type.
//
//	go test -run '^$' -bench . -benchtime 2000x ./bench/search/
package search_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/tool/openapi/octokit"
)

var queries = []string{"create issue", "list pull requests", "create gist", "get repository", "delete repository",
	"list issue comments", "merge pull request", "create release", "list workflow runs", "add labels to issue",
	"create fork", "search code", "create webhook", "list branches", "create commit status", "list organization members",
	"gist", "issues/create", "repos", "a b c d e f g"}

func githubOps(b *testing.B) []tool.Operation {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := octokit.Dir(ctx)
	if err != nil {
		b.Skipf("GitHub's description is not available: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "api.github.com.json"))
	if err != nil {
		b.Fatal(err)
	}
	spec, err := openapi.New().Import(ctx, tool.Source{Data: data})
	if err != nil {
		b.Fatal(err)
	}
	sort.Slice(spec.Operations, func(i, j int) bool { return spec.Operations[i].ID < spec.Operations[j].ID })
	return spec.Operations
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func BenchmarkIndexBuild(b *testing.B) {
	ops := githubOps(b)
	before := heap()
	ix := tool.NewSearchIndex("github", ops)
	kept := heap() - before
	runtime.KeepAlive(ix)
	for b.Loop() {
		tool.NewSearchIndex("github", ops)
	}
	b.ReportMetric(float64(kept)/float64(len(ops)), "kept-B/operation")
	b.ReportMetric(float64(len(ops)), "operations")
}

func BenchmarkSearch(b *testing.B) {
	ix := tool.NewSearchIndex("github", githubOps(b))
	lat := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		start := time.Now()
		ix.Search(queries[i%len(queries)], "")
		lat = append(lat, time.Since(start))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
