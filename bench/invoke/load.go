package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

// toolService is the loopback API the agent's steps call.
type toolService struct {
	*httptest.Server
	hits atomic.Int64
}

// thingSpec is the tool service's OpenAPI document; %s is its base URL.
const thingSpec = `{"openapi": "3.0.3", "info": {"title": "things", "version": "1"},
 "servers": [{"url": "%s"}],
 "paths": {"/things/{id}": {"get": {"operationId": "getThing", "summary": "Read a thing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object",
     "properties": {"id": {"type": "string"}, "ok": {"type": "boolean"}}}}}}}}}}}`

// agentName and agentDefinition are the benchmarked agent: three sequential
// calls of svc.getThing with different arguments, then a literal outcome.
const (
	agentName       = "bench-three-calls"
	agentOutcome    = "done"
	agentSteps      = 3
	agentDefinition = `{
  "tools": ["svc"],
  "steps": [
    {"action": "get_a", "call": "svc.getThing", "args": {"id": "'a'"}, "save_as": "a"},
    {"action": "get_b", "call": "svc.getThing", "args": {"id": "'b'"}, "save_as": "b"},
    {"action": "get_c", "call": "svc.getThing", "args": {"id": "'c'"}, "save_as": "c"}
  ],
  "outcome": "'done'"
}`
)

func startToolService() *toolService {
	s := &toolService{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/things/")
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		s.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(thingBody(id))
	}))
	return s
}

// thingBody is the service's answer for id; the agent's three are made once,
// so the load generator spends its CPU on requests, not on encoding.
func thingBody(id string) []byte {
	if b, ok := thingBodies[id]; ok {
		return b
	}
	b, _ := json.Marshal(map[string]any{"id": id, "ok": true})
	return b
}

var thingBodies = map[string][]byte{
	"a": []byte(`{"id":"a","ok":true}`),
	"b": []byte(`{"id":"b","ok":true}`),
	"c": []byte(`{"id":"c","ok":true}`),
}

func (s *toolService) spec() string { return fmt.Sprintf(thingSpec, s.URL) }

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
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": svc.spec()}
	if st, body, err := c.do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	dep := map[string]any{"name": agentName, "definition": json.RawMessage(agentDefinition)}
	if st, body, err := c.do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
		return fmt.Errorf("deploy agent: %d %s %v", st, body, err)
	}
	return nil
}

// invokeBody is the body of every invocation.
var invokeBody = []byte(`{"goal": "bench", "context": {}}`)

// invokeAnswer is what the benchmark checks of a sync invocation.
type invokeAnswer struct {
	WorkflowID string `json:"workflow_id"`
	Status     string `json:"status"`
	Outcome    string `json:"outcome"`
	Steps      []struct {
		Step   int    `json:"step"`
		Status string `json:"status"`
	} `json:"steps"`
}

// invoke runs the agent once, synchronously, and checks the answer.
func (c *client) invoke(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "POST", c.srv.BaseURL()+"/v1/agents/"+agentName+"/invoke", bytes.NewReader(invokeBody))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.srv.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return c.check(resp.StatusCode, data)
}

func (c *client) check(status int, data []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("status %d: %.300s", status, data)
	}
	var a invokeAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if a.Status != "completed" || a.Outcome != agentOutcome || len(a.Steps) != agentSteps {
		return fmt.Errorf("workflow %s: status %q, outcome %q, %d steps: %.300s", a.WorkflowID, a.Status, a.Outcome, len(a.Steps), data)
	}
	for i, s := range a.Steps {
		if s.Step != i+1 || s.Status != "ok" {
			return fmt.Errorf("workflow %s: step %d is %d with status %q", a.WorkflowID, i+1, s.Step, s.Status)
		}
	}
	c.lastWorkflow.Store(a.WorkflowID)
	return nil
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
	if err := c.check(st, body); err != nil {
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
	hits0 := c.svc.hits.Load()
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
	if hits := c.svc.hits.Load() - hits0; res.errors == 0 && hits != int64(agentSteps*res.count) {
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
