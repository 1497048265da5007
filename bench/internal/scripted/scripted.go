// Package scripted holds the loopback services the LLM benchmarks run
// against: a model speaking Chat Completions that answers each completion
// after a latency (the first of a run with one call of svc__getThing, the
// second with "done: <id>"), and the things service that call reaches.
// Each notes when a run's requests came and went, so a benchmark can take
// their own time out of what it measures. A run is named by an id matching
// w[0-9]+ in its user message and in the call's path.
package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ThingSpec is the OpenAPI document of the things service, with one read,
// getThing; %s is its base URL.
const ThingSpec = `{"openapi": "3.0.3", "info": {"title": "things", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/things/{id}": {"get": {"operationId": "getThing", "summary": "Read a thing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}}}}`

// PlanAgent is the defined agent of the same work: one plan step on the
// server-wide model with the tool svc (ThingSpec), answering "done: <id>".
const PlanAgent = `{"tools": ["svc"],
 "inputs": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
 "instructions": "'Read the thing, then say done.'",
 "steps": [{"action": "solve", "plan": {"prompt": "'thing ' + context.id", "save_as": "answer"}}],
 "output": "answer", "outcome": "'answered'"}`

var idPattern = regexp.MustCompile(`w[0-9]+`)

// Model is the scripted model.
type Model struct {
	// latency is how long it answers after, in nanoseconds.
	latency atomic.Int64
	mu      sync.Mutex
	// times[id] are arrival and answer times of id's completions, in order.
	times    map[string][]time.Time
	requests atomic.Int64
}

// NewModel returns a model answering after latency.
func NewModel(latency time.Duration) *Model {
	m := &Model{times: map[string][]time.Time{}}
	m.SetLatency(latency)
	return m
}

// SetLatency makes the model answer after latency from now on.
func (m *Model) SetLatency(latency time.Duration) { m.latency.Store(int64(latency)) }

func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	m.requests.Add(1)
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	id, answered := "", false
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			id = idPattern.FindString(string(msg.Content))
		case "tool":
			answered = true
		}
	}
	select {
	case <-time.After(time.Duration(m.latency.Load())):
	case <-r.Context().Done():
		return
	}
	msg := `{"role":"assistant","content":"done: ` + id + `"}`
	finish := "stop"
	if !answered {
		msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"svc__getThing","arguments":"{\"id\":\"` + id + `\"}"}}]}`
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-bench","object":"chat.completion","model":"scripted","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":120,"completion_tokens":20,"total_tokens":140}}`, msg, finish)
	m.mu.Lock()
	m.times[id] = append(m.times[id], arrived, time.Now())
	m.mu.Unlock()
}

// Requests counts the completions asked since the last Reset.
func (m *Model) Requests() int64 { return m.requests.Load() }

// Times are the arrival and answer times of id's completions, in order.
func (m *Model) Times(id string) []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.times[id]...)
}

// Reset forgets the completions so far.
func (m *Model) Reset() {
	m.mu.Lock()
	clear(m.times)
	m.mu.Unlock()
	m.requests.Store(0)
}

// Things is the things service: GET /things/{id} answers {"id", "ok"}.
type Things struct {
	calls atomic.Int64
	mu    sync.Mutex
	// took[id] is how long id's call took here.
	took map[string]time.Duration
}

// NewThings returns the things service.
func NewThings() *Things { return &Things{took: map[string]time.Duration{}} }

func (t *Things) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t.calls.Add(1)
	id := strings.TrimPrefix(r.URL.Path, "/things/")
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q,"ok":true}`, id)
	t.mu.Lock()
	t.took[id] += time.Since(start)
	t.mu.Unlock()
}

// Calls counts the calls since the last Reset.
func (t *Things) Calls() int64 { return t.calls.Load() }

// Took is how long id's calls took here.
func (t *Things) Took(id string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.took[id]
}

// Reset forgets the calls so far.
func (t *Things) Reset() {
	t.mu.Lock()
	clear(t.took)
	t.mu.Unlock()
	t.calls.Store(0)
}
