package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

// load is the clients: what they sent, what was answered, and the
// workflows acknowledged to them.
type load struct {
	c     *cluster
	tools *toolService

	mu       sync.Mutex
	statuses map[string]map[string]int  // kind → status → requests
	lat      map[string][]time.Duration // kind → latency of every attempt that was answered
	ackedIDs map[string]struct{}        // workflows a client was told of
	finished map[string]struct{}        // of those, the ones whose complete event or answer was seen
	firstErr map[string]string          // kind → first error seen
}

func newLoad(c *cluster, tools *toolService) *load {
	return &load{c: c, tools: tools, statuses: map[string]map[string]int{}, lat: map[string][]time.Duration{},
		ackedIDs: map[string]struct{}{}, finished: map[string]struct{}{}, firstErr: map[string]string{}}
}

// kinds of request, with their share of the load.
var kinds = []struct {
	name   string
	weight int
}{
	{"invoke", 55}, {"invoke-stream", 15}, {"audit-query", 12}, {"replay", 10}, {"register", 8},
}

// run sends requests from workers for d; requests in flight at the end are
// let finish.
func (l *load) run(ctx context.Context, workers int, d time.Duration) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for n := 0; ctx.Err() == nil && time.Now().Before(end); n++ {
				key := fmt.Sprintf("w%d-%d", w, n)
				switch pick(rng) {
				case "invoke":
					l.invoke(ctx, key)
				case "invoke-stream":
					l.stream(ctx, key)
				case "audit-query":
					l.record("audit-query", l.c.send(ctx, "audit-query", "GET", "/v1/audit/query?limit=20", nil, ""))
				case "replay":
					if id := l.someWorkflow(rng); id != "" {
						body := map[string]any{"target_agent_version": agentName + "@1", "dry_run": true}
						l.record("replay", l.c.send(ctx, "replay", "POST", "/v1/workflows/"+id+"/replay", body, key))
					}
				case "register":
					reg := map[string]any{"name": "shop-" + key, "type": "openapi", "spec": l.tools.spec()}
					l.record("register", l.c.send(ctx, "register", "POST", "/v1/tools", reg, key))
				}
			}
		})
	}
	wg.Wait()
}

func pick(rng *rand.Rand) string {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	n := rng.IntN(total)
	for _, k := range kinds {
		if n < k.weight {
			return k.name
		}
		n -= k.weight
	}
	return kinds[0].name
}

// invoke runs the agent synchronously; a 200 acknowledges its workflow.
func (l *load) invoke(ctx context.Context, key string) {
	a := l.c.send(ctx, "invoke", "POST", "/v1/agents/"+agentName+"/invoke", map[string]any{"goal": "order " + key}, key)
	l.record("invoke", a)
	if a.status == http.StatusOK {
		var v struct {
			WorkflowID string `json:"workflow_id"`
			Status     string `json:"status"`
		}
		if json.Unmarshal(a.body, &v) == nil && v.WorkflowID != "" {
			l.ack(v.WorkflowID, v.Status != "running")
		}
	}
}

// stream runs the agent with a stream of its steps, sent again with the
// same Idempotency-Key (which attaches to the workflow) to another replica
// when it cannot connect or is answered 5xx; the workflow is acknowledged
// by the answer's Workflow-Id header, finished by the complete event.
func (l *load) stream(ctx context.Context, key string) {
	body, _ := json.Marshal(map[string]any{"goal": "order " + key, "stream": true})
	var a answer
	for i := range maxAttempts {
		if i > 0 {
			time.Sleep(time.Duration(i) * 150 * time.Millisecond)
		}
		start := time.Now()
		a.status, a.err = l.streamOnce(ctx, l.c.replica(), body, key)
		a.attempts = append(a.attempts, attempt{status: a.status, took: time.Since(start)})
		if (a.err == nil && a.status < 500) || ctx.Err() != nil {
			break
		}
	}
	l.record("invoke-stream", a)
}

func (l *load) streamOnce(ctx context.Context, srv *benchserver.Server, body []byte, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", srv.BaseURL()+"/v1/agents/"+agentName+"/invoke", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+l.c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := l.c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Workflow-Id"); resp.StatusCode == http.StatusOK && id != "" {
		l.ack(id, readStream(resp))
	}
	return resp.StatusCode, nil
}

// readStream reads server-sent events until the complete event or the
// end, and says whether the complete event came.
func readStream(resp *http.Response) bool {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Event string `json:"event"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Event == "complete" {
			return true
		}
	}
	return false
}

func (l *load) ack(id string, finished bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ackedIDs[id] = struct{}{}
	if finished {
		l.finished[id] = struct{}{}
	}
}

// record counts a request's final status and every answered attempt.
func (l *load) record(kind string, a answer) {
	status := fmt.Sprint(a.status)
	if a.status == 0 {
		status = "no answer"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.statuses[kind] == nil {
		l.statuses[kind] = map[string]int{}
	}
	l.statuses[kind][status]++
	for _, at := range a.attempts {
		if at.status != 0 {
			l.lat[kind] = append(l.lat[kind], at.took)
		}
	}
	if (a.err != nil || a.status >= 500) && l.firstErr[kind] == "" {
		if a.err != nil {
			l.firstErr[kind] = a.err.Error()
		} else {
			l.firstErr[kind] = fmt.Sprintf("%d %.200s", a.status, a.body)
		}
	}
}

// someWorkflow is an acknowledged workflow, or "" before any.
func (l *load) someWorkflow(rng *rand.Rand) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.finished {
		if rng.IntN(4) == 0 {
			return id
		}
	}
	for id := range l.finished {
		return id
	}
	return ""
}

func (l *load) acked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.ackedIDs))
	for id := range l.ackedIDs {
		ids = append(ids, id)
	}
	return ids
}
