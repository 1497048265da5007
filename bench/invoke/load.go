package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/bench/internal/invokeload"
)

// toolService is the loopback API the agent's steps call.
type toolService = invokeload.ToolService

func startToolService() *toolService { return invokeload.StartToolService() }

// The benchmarked agent (see invokeload).
const (
	agentName       = invokeload.AgentName
	agentOutcome    = invokeload.AgentOutcome
	agentSteps      = invokeload.AgentSteps
	agentDefinition = invokeload.AgentDefinition
)

// client talks to one server with the benchmark's token.
type client struct {
	srv  *benchserver.Server
	http *http.Client
	// lastWorkflow is a workflow id from the last load, checked in the store.
	lastWorkflow atomic.Value
	svc          *toolService
}

func newClient(srv *benchserver.Server, concurrency int) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = concurrency * 2
	tr.MaxIdleConnsPerHost = concurrency * 2
	tr.MaxConnsPerHost = 0
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	srv.HTTP = hc
	return &client{srv: srv, http: hc}
}

// do sends a JSON request and returns the status and body.
func (c *client) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	return c.srv.Do(ctx, method, path, body)
}

// setup registers the tool service and deploys the agent.
func (c *client) setup(ctx context.Context, svc *toolService) error {
	c.svc = svc
	return invokeload.Setup(ctx, c.srv, svc)
}

// invoke runs the agent once, synchronously, and checks the answer.
func (c *client) invoke(ctx context.Context) error {
	id, err := invokeload.Invoke(ctx, c.http, c.srv)
	if err == nil {
		c.lastWorkflow.Store(id)
	}
	return err
}

// checkStored reads the last workflow back: its steps must be in the store.
func (c *client) checkStored(ctx context.Context) error {
	id, _ := c.lastWorkflow.Load().(string)
	if id == "" {
		return nil
	}
	st, body, err := c.do(ctx, "GET", "/v1/workflows/"+id, nil)
	if err != nil {
		return fmt.Errorf("read back workflow %s: %w", id, err)
	}
	if _, err := invokeload.Check(st, body); err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	return nil
}

// levelResult is one concurrency level's measurement.
type levelResult struct {
	store       string
	concurrency int
	count       int
	errors      int
	firstError  string
	elapsed     time.Duration
	// lat holds every invocation's latency, sorted.
	lat       []time.Duration
	serverCPU time.Duration
	// wal is the database's log written over the level (PostgreSQL only).
	wal *walResult
	// loadCPU is this process's CPU over the level: the client and the
	// tool service, which share the machine with the server.
	loadCPU time.Duration
}

func (r levelResult) throughput() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.count) / r.elapsed.Seconds()
}

// p returns the q-th percentile latency (nearest rank).
func (r levelResult) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := int(q/100*float64(len(r.lat))+0.5) - 1
	return r.lat[min(max(i, 0), len(r.lat)-1)]
}

// load runs n invocations from c goroutines, stopping early after limit.
// cpu, when not nil, reads the server's CPU time before and after.
// wal, when not nil, reads the database's log counters likewise.
func (c *client) load(ctx context.Context, store string, n, conc int, limit time.Duration, cpu func() time.Duration, wal *walProbe) levelResult {
	res := levelResult{store: store, concurrency: conc}
	var wal0 walCount
	if wal != nil {
		var err error
		if wal0, err = wal.read(ctx); err != nil {
			wal = nil
		}
	}
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	hits0 := c.svc.Hits.Load()
	var cpu0 time.Duration
	if cpu != nil {
		cpu0 = cpu()
	}
	self0 := selfCPU()
	start := time.Now()
	deadline := start.Add(limit)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, n/conc+1)
			var errs []error
			for next.Add(1) <= int64(n) && ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				err := c.invoke(ctx)
				lat = append(lat, time.Since(t0))
				if err != nil {
					errs = append(errs, err)
				}
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errors += len(errs)
			if len(errs) > 0 && res.firstError == "" {
				res.firstError = errs[0].Error()
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.loadCPU = selfCPU() - self0
	if cpu != nil {
		res.serverCPU = cpu() - cpu0
	}
	res.count = len(res.lat)
	slices.Sort(res.lat)
	if wal != nil {
		res.wal = walSince(ctx, wal, wal0)
	}
	if hits := c.svc.Hits.Load() - hits0; res.errors == 0 && hits != int64(agentSteps*res.count) {
		res.errors = 1
		res.firstError = fmt.Sprintf("the tool service saw %d calls for %d workflows of %d steps", hits, res.count, agentSteps)
	}
	return res
}

// selfCPU is this process's user and system time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// walSince is the log written since from, or nil when it cannot be read.
func walSince(ctx context.Context, p *walProbe, from walCount) *walResult {
	to, err := p.read(ctx)
	if err != nil {
		return nil
	}
	r := &walResult{records: to.records - from.records, fpi: to.fpi - from.fpi, bytes: to.bytes - from.bytes}
	if p.detail {
		r.kinds, _ = p.breakdown(ctx, from.lsn, to.lsn)
	}
	return r
}
