package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
)

// Kinds of gateway exchange the agent makes.
const (
	kindCompletion = "completion"
	kindCall       = "call"
	// kindSession is the MCP session's own requests: initialize, the
	// initialized notification, tools/list, and its close.
	kindSession = "session"
)

// exchange is one gateway request as the agent saw it: sent, and its
// answer read to the end.
type exchange struct {
	kind       string
	status     int
	sent, read time.Time
}

func (e exchange) took() time.Duration { return e.read.Sub(e.sent) }

// agent is the Go recipe's agent (goagent, unmodified) with a note of
// which run each gateway token belongs to, and of every gateway request
// the agent made, timed where the agent sends and reads it.
type agent struct {
	handler http.Handler
	mu      sync.Mutex
	// runOf[token] is the run (its context's id) given token.
	runOf map[string]string
	// byToken[token] are the exchanges made with token, in order.
	byToken map[string][]exchange
	// failed holds a body of each kind and status of failure.
	failed map[string]string
}

func newAgent() *agent {
	return &agent{handler: goagent.Handler("default", 4), runOf: map[string]string{}, byToken: map[string][]exchange{}, failed: map[string]string{}}
}

// ServeHTTP notes the invocation's token and run, then hands it to the
// recipe's handler.
func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in goagent.Invocation
	var ctx struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &in) == nil && json.Unmarshal(in.Context, &ctx) == nil {
		a.mu.Lock()
		a.runOf[in.Gateway.Token] = ctx.ID
		a.mu.Unlock()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	a.handler.ServeHTTP(w, r)
}

// exchanges returns each run's exchanges, by run id.
func (a *agent) exchanges() map[string][][]exchange {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][][]exchange{}
	for tok, exs := range a.byToken {
		id := a.runOf[tok]
		out[id] = append(out[id], exs)
	}
	return out
}

func (a *agent) noteFailure(kind string, status int, body string) {
	a.mu.Lock()
	a.failed[fmt.Sprintf("%s %d", kind, status)] = body
	a.mu.Unlock()
}

// failures counts the gateway's answers of 300 or more, by kind and
// status, with a body of each.
func (a *agent) failures() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	counts := map[string]int{}
	for _, exs := range a.byToken {
		for _, ex := range exs {
			if ex.status >= 300 {
				counts[fmt.Sprintf("%s %d", ex.kind, ex.status)]++
			}
		}
	}
	out := map[string]string{}
	for k, body := range a.failed {
		out[k] = fmt.Sprintf("%d× %s", counts[k], body)
	}
	return out
}

func (a *agent) reset() {
	a.mu.Lock()
	clear(a.runOf)
	clear(a.byToken)
	clear(a.failed)
	a.mu.Unlock()
}

func (a *agent) note(token string, ex exchange) {
	a.mu.Lock()
	a.byToken[token] = append(a.byToken[token], ex)
	a.mu.Unlock()
}

// timing is the bench process's HTTP transport: the recipe sends its model
// requests and MCP requests with the default client, as an agent of its
// kind would, so timing them at the agent means timing that transport. It
// times the requests to the gateway and passes every other one on.
type timing struct {
	base  http.RoundTripper
	agent *agent
}

func (t *timing) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(r.URL.Path, "/gateway/") {
		return t.base.RoundTrip(r)
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	kind := kindSession
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		kind = kindCompletion
	} else if r.Body != nil {
		// An MCP request: a call is a JSON-RPC tools/call.
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			kind = kindCall
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	sent := time.Now()
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		resp.Body.Close()
		t.agent.noteFailure(kind, resp.StatusCode, string(body))
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, done: func() {
		t.agent.note(token, exchange{kind: kind, status: resp.StatusCode, sent: sent, read: time.Now()})
	}}
	return resp, nil
}

// timedBody calls done once, when its end is read or it is closed.
type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}
