// Package audit_test benchmarks the audit log of each store engine: append
// throughput (one goroutine and 16) and filtered queries over one tenant's
// chain of a million records. PostgreSQL runs when
// AGENTPLANE_TEST_DATABASE_URL is set; AGENTPLANE_BENCH_AUDIT_RECORDS
// changes the size of the seeded chain (default 1,000,000).
//
//	go test -run '^$' -bench . -benchtime 2000x -timeout 60m ./bench/audit/
package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
)

// store is what the benchmarks need of an engine.
type store interface {
	audit.Store
	Close() error
}

type engine struct {
	name string
	open func(b *testing.B) store
}

func engines(b *testing.B) []engine {
	es := []engine{{"sqlite", func(b *testing.B) store {
		db, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		return db
	}}}
	if os.Getenv(postgres.TestDatabaseEnv) != "" {
		es = append(es, engine{"postgres", func(b *testing.B) store {
			db, err := postgres.Open(b.Context(), postgres.NewTestDatabase(b))
			if err != nil {
				b.Fatal(err)
			}
			return db
		}})
	}
	return es
}

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rec is the i-th record of the synthetic workload: 100 users through 20
// clients, 20 actions, 10,000 resources, half the records in one of 50,000
// workflows, 90% success, one trace per 4 records, one record per 100 ms.
func rec(tenant string, i int) *audit.Record {
	r := &audit.Record{
		Time:      base.Add(time.Duration(i) * 100 * time.Millisecond),
		Tenant:    tenant,
		Actor:     audit.Actor{Sub: fmt.Sprintf("user-%d", i%100), ClientID: fmt.Sprintf("cli_%d", i%20)},
		Action:    fmt.Sprintf("action.%d", i%20),
		Resource:  audit.Resource{Type: fmt.Sprintf("type%d", i%5), ID: fmt.Sprintf("res_%d", i%10000)},
		Outcome:   audit.Success,
		Status:    200,
		RequestID: fmt.Sprintf("req_%09d", i),
		TraceID:   fmt.Sprintf("%032x", i/4),
		Details:   audit.Details(map[string]any{"n": i}),
	}
	if i%2 == 0 {
		r.WorkflowID = fmt.Sprintf("wf_%d", (i/2)%50000)
	}
	switch {
	case i%50 == 7:
		r.Outcome, r.Status = audit.Error, 500
	case i%12 == 5:
		r.Outcome, r.Status = audit.Denied, 403
	}
	return r
}

// BenchmarkAppend measures single-record appends to one tenant's chain,
// each its own transaction: sequentially, and from 16 goroutines at once.
func BenchmarkAppend(b *testing.B) {
	for _, e := range engines(b) {
		for _, workers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", e.name, workers), func(b *testing.B) {
				s := e.open(b)
				defer s.Close()
				ctx := b.Context()
				var next atomic.Int64
				b.ResetTimer()
				start := time.Now()
				if workers == 1 {
					for i := 0; b.Loop(); i++ {
						if err := s.AppendAudit(ctx, rec("acme", i)); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					runParallel(b, workers, func() error {
						return s.AppendAudit(ctx, rec("acme", int(next.Add(1))))
					})
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
				verify(b, s, "acme")
			})
		}
	}
}

// runParallel runs fn b.N times from exactly workers goroutines.
func runParallel(b *testing.B, workers int, fn func() error) {
	var left atomic.Int64
	left.Store(int64(b.N))
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for left.Add(-1) >= 0 {
				if err := fn(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

func verify(b *testing.B, s audit.Store, tenant string) {
	b.StopTimer()
	defer b.StartTimer()
	rep, err := audit.Verify(context.Background(), s, tenant)
	if err != nil || !rep.OK {
		b.Fatalf("chain broken: %+v, %v", rep, err)
	}
}

// BenchmarkQuery seeds one tenant with a chain of a million records (in
// batches of 1,000 through AppendAudit, so the chain is computed as usual),
// then times a page of results for each filter the API offers.
func BenchmarkQuery(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("AGENTPLANE_BENCH_AUDIT_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	filters := []struct {
		name string
		f    audit.Filter
	}{
		{"newest", audit.Filter{}},
		{"actor", audit.Filter{Actor: "user-42"}},
		{"actor_client", audit.Filter{Actor: "cli_7"}},
		{"action", audit.Filter{Action: "action.3"}},
		{"resource", audit.Filter{ResourceType: "type2", ResourceID: "res_1232"}},
		{"workflow", audit.Filter{WorkflowID: "wf_4711"}},
		{"outcome_error", audit.Filter{Outcome: audit.Error}},
		{"trace", audit.Filter{TraceID: fmt.Sprintf("%032x", n/8)}},
		{"since_recent", audit.Filter{Since: base.Add(20 * time.Hour)}},
		{"time_range_1h", audit.Filter{Since: base.Add(time.Hour), Until: base.Add(2 * time.Hour)}},
		{"time_range_19h", audit.Filter{Since: base.Add(time.Hour), Until: base.Add(20 * time.Hour)}},
		{"deep_cursor", audit.Filter{BeforeSeq: int64(n / 10)}},
		{"action_outcome_limit1000", audit.Filter{Action: "action.5", Outcome: audit.Denied, Limit: 1000}},
	}
	for _, e := range engines(b) {
		b.Run(fmt.Sprintf("%s/records=%d", e.name, n), func(b *testing.B) {
			s := e.open(b)
			defer s.Close()
			seed(b, s, "acme", n)
			for _, q := range filters {
				b.Run(q.name, func(b *testing.B) {
					ctx := b.Context()
					var got int
					for b.Loop() {
						recs, err := s.QueryAudit(ctx, "acme", q.f)
						if err != nil {
							b.Fatal(err)
						}
						got = len(recs)
					}
					b.ReportMetric(float64(got), "records/query")
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/query")
				})
			}
		})
	}
}

func seed(b *testing.B, s audit.Store, tenant string, n int) {
	const batch = 1000
	start := time.Now()
	recs := make([]*audit.Record, 0, batch)
	for i := 0; i < n; i += batch {
		recs = recs[:0]
		for j := i; j < min(i+batch, n); j++ {
			recs = append(recs, rec(tenant, j))
		}
		if err := s.AppendAudit(b.Context(), recs...); err != nil {
			b.Fatal(err)
		}
	}
	// Printed, not logged: a parent benchmark's log is not shown.
	fmt.Printf("seeded %d records in %s (%.0f records/s)\n", n, time.Since(start).Round(time.Millisecond),
		float64(n)/time.Since(start).Seconds())
}
