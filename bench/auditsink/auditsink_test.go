// Package auditsink_test benchmarks the audit sinks' pusher on each store
// engine: how many records a second one syslog+tcp sink takes from a
// backlog of AGENTPLANE_BENCH_SINK_RECORDS records (default 100,000) over
// 10 tenant chains, to a receiver on loopback that reads octet-counted
// frames, and how long one read of every chain's head (each pass's first
// read) takes over that backlog. PostgreSQL runs when
// AGENTPLANE_TEST_DATABASE_URL is set.
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/auditsink/
package auditsink_test

import (
	"bufio"
	"context"
	"fmt"

	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/siem"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
)

type store interface {
	siem.Store
	AppendAudit(ctx context.Context, recs ...*audit.Record) error
	Close() error
}

func engines(b *testing.B) map[string]func(b *testing.B) store {
	es := map[string]func(b *testing.B) store{"sqlite": func(b *testing.B) store { return sqlite.NewTestDB(b) }}
	if os.Getenv(postgres.TestDatabaseEnv) != "" {
		es["postgres"] = func(b *testing.B) store {
			db, err := postgres.Open(b.Context(), postgres.NewTestDatabase(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		}
	}
	return es
}

func records() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTPLANE_BENCH_SINK_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// seed appends n records over 10 tenants, 500 to a transaction.
func seed(b *testing.B, db store, n int) {
	b.Helper()
	for done := 0; done < n; {
		batch := make([]*audit.Record, min(500, n-done))
		for i := range batch {
			batch[i] = &audit.Record{Tenant: fmt.Sprintf("tenant-%d", (done+i)%10), Actor: audit.Actor{Sub: "alice", ClientID: "cli_1"},
				Action: "tool.read", Resource: audit.Resource{Type: "tool", ID: "tool_1"}, Outcome: audit.Success, Status: 200,
				RequestID: "req_1", Details: audit.Details(map[string]any{"method": "GET"})}
		}
		if err := db.AppendAudit(b.Context(), batch...); err != nil {
			b.Fatal(err)
		}
		done += len(batch)
	}
}

// receive counts the frames arriving on ln.
func receive(ln net.Listener, frames *atomic.Int64) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			br := bufio.NewReaderSize(c, 1<<20)
			for {
				n, err := br.ReadString(' ')
				if err != nil {
					return
				}
				size, _ := strconv.Atoi(n[:len(n)-1])
				if _, err := br.Discard(size); err != nil {
					return
				}
				frames.Add(1)
			}
		}()
	}
}

func BenchmarkSyslogBacklog(b *testing.B) {
	n := records()
	for name, open := range engines(b) {
		b.Run(name, func(b *testing.B) {
			db := open(b)
			seed(b, db, n)
			b.ResetTimer()
			for i := range b.N {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				var frames atomic.Int64
				go receive(ln, &frames)
				sink, err := siem.ParseSink(b.Context(), "syslog+tcp://"+ln.Addr().String(), siem.SinkOptions{})
				if err != nil {
					b.Fatal(err)
				}
				// A new sink name each round starts from the oldest record.
				p := &siem.Pusher{Store: db, Owner: fmt.Sprintf("bench-%d", i), Logger: nil}
				start := time.Now()
				for {
					more, err := p.Pass(b.Context(), renamed{sink, fmt.Sprintf("%s#%d", sink.Name(), i)})
					if err != nil {
						b.Fatal(err)
					}
					if !more {
						break
					}
				}
				for frames.Load() < int64(n) && time.Since(start) < time.Minute {
					time.Sleep(time.Millisecond)
				}
				elapsed := time.Since(start)
				if frames.Load() != int64(n) {
					b.Fatalf("the receiver has %d of %d", frames.Load(), n)
				}
				b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
				sink.Close()
				ln.Close()
			}
		})
	}
}

func BenchmarkAuditHeads(b *testing.B) {
	n := records()
	for name, open := range engines(b) {
		b.Run(name, func(b *testing.B) {
			db := open(b)
			seed(b, db, n)
			b.ResetTimer()
			for range b.N {
				if _, err := db.AuditHeads(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// renamed is a sink under another name (its own cursors and lease).
type renamed struct {
	siem.Sink
	name string
}

func (r renamed) Name() string { return r.name }
