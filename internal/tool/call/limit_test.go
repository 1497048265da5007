package call

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/tool"
)

// arrivals is a tool server that records when each request arrived and
// how many were in flight at once; each answer takes hold.
type arrivals struct {
	*httptest.Server
	mu       sync.Mutex
	at       []time.Time
	inFlight int
	maxSeen  int
}

func newArrivals(t *testing.T, hold time.Duration) *arrivals {
	a := &arrivals{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.inFlight++
		a.maxSeen = max(a.maxSeen, a.inFlight)
		a.mu.Unlock()
		time.Sleep(hold)
		a.mu.Lock()
		a.inFlight--
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(a.Close)
	return a
}

// check fails t when more than concurrency requests were in flight at once
// or more than perSecond+1 arrived within any one second.
func (a *arrivals) check(t *testing.T, calls, concurrency, perSecond int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.at) != calls {
		t.Errorf("the server saw %d requests, want %d", len(a.at), calls)
	}
	if a.maxSeen > concurrency {
		t.Errorf("the server saw %d requests in flight at once, over the limit of %d", a.maxSeen, concurrency)
	}
	for i := range a.at {
		n := 0
		for j := i; j < len(a.at) && a.at[j].Sub(a.at[i]) < time.Second; j++ {
			n++
		}
		if n > perSecond+1 {
			t.Fatalf("%d requests arrived within one second from request %d, over the rate of %d/s (+1 for the edges)", n, i, perSecond)
		}
	}
}

func limitedTool(url string, l *tool.Limits) *tool.Tool {
	return &tool.Tool{ID: ids.New(ids.Tool), Name: "billing", BaseURL: url, Limits: l}
}

// callMany makes n concurrent calls of op through the executors in turn.
func callMany(t *testing.T, exs []*Executor, tl *tool.Tool, op *tool.Operation, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := exs[i%len(exs)].Call(context.Background(), tool.CallRequest{Tool: tl, Operation: op, Args: map[string]any{"customer_id": "c"}})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

func TestRateAndConcurrencyInProcess(t *testing.T) {
	_, get, _ := billingOps()
	api := newArrivals(t, 50*time.Millisecond)
	tl := limitedTool(api.URL, &tool.Limits{Rate: "20/s", Concurrency: 3})
	callMany(t, []*Executor{newExecutor(t, Options{})}, tl, get, 30)
	api.check(t, 30, 3, 20)
}

func TestRedisLimitsAcrossRunners(t *testing.T) {
	url := os.Getenv("AGENTPLANE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("set AGENTPLANE_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to test limits shared through Redis")
	}
	client, err := ratelimit.ConnectRedis(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	prefix := "agentplane-test:" + ids.New(ids.Tool) + ":"
	_, get, _ := billingOps()
	api := newArrivals(t, 50*time.Millisecond)
	tl := limitedTool(api.URL, &tool.Limits{Rate: "20/s", Concurrency: 3})
	// Two runners, each with its own executor and connection to one Redis.
	exs := []*Executor{
		newExecutor(t, Options{Limiter: NewRedisLimiter(client, prefix, 0)}),
		newExecutor(t, Options{Limiter: NewRedisLimiter(client, prefix, 0)}),
	}
	callMany(t, exs, tl, get, 40)
	api.check(t, 40, 3, 20)

	t.Run("a dead holder's slot frees within its lease", func(t *testing.T) {
		lease := 300 * time.Millisecond
		dead := NewRedisLimiter(client, prefix, lease)
		key := prefix + "tool-slots:lease"
		// A replica that took the only slot and died: no renewal, no release.
		if got, err := acquireSlot.Run(context.Background(), client, []string{key}, "dead", 1, lease.Milliseconds()).Int(); err != nil || got != 1 {
			t.Fatalf("take the slot: %v, %v", got, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		release, err := dead.Acquire(ctx, "lease", 1)
		if err != nil {
			t.Fatalf("the slot was not freed within 30 s: %v", err)
		}
		release()
		if waited := time.Since(start); waited < lease/2 {
			t.Errorf("got the slot after %s, before the dead holder's lease ended", waited)
		}
	})
}

func TestCircuitBreaker(t *testing.T) {
	_, get, _ := billingOps()
	var failing atomic.Bool
	failing.Store(true)
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	openFor := time.Second
	tl := limitedTool(api.URL, &tool.Limits{Retries: &tool.RetryLimits{Max: 0},
		Circuit: &tool.CircuitLimits{Failures: 3, Window: "10s", OpenFor: openFor.String()}})
	ex := newExecutor(t, Options{})
	call := func() (int, string) {
		res, err := ex.Call(context.Background(), tool.CallRequest{Tool: tl, Operation: get, Args: map[string]any{"customer_id": "c"}})
		return res.Attempts, tool.ErrorCode(err)
	}
	for i := range 3 {
		if _, code := call(); code != tool.CodeUpstream {
			t.Fatalf("call %d: error_code %q, want upstream_error", i, code)
		}
	}
	cb := ex.breakers.get(tl.EffectiveLimits(get.ID))
	for range 5 {
		if attempts, code := call(); code != tool.CodeCircuitOpen || attempts != 0 {
			t.Fatalf("with the circuit open: error_code %q after %d attempts, want circuit_open, never sent", code, attempts)
		}
	}
	// The refusals did not wait for the circuit's time to pass: it is still open.
	if st := cb.State(); st != gobreaker.StateOpen {
		t.Errorf("after failing fast the circuit is %s, want still open", st)
	}
	if n := len(api.requests()); n != 3 {
		t.Errorf("the server saw %d requests, want 3: an open circuit sends nothing", n)
	}
	// Half-open, a failing probe opens it again.
	waitHalfOpen(t, cb)
	if _, code := call(); code != tool.CodeUpstream {
		t.Fatalf("the half-open probe: error_code %q, want upstream_error from the server", code)
	}
	if _, code := call(); code != tool.CodeCircuitOpen {
		t.Fatalf("after a failed probe: error_code %q, want circuit_open", code)
	}
	// The server recovers: the probe succeeds and the circuit closes.
	failing.Store(false)
	waitHalfOpen(t, cb)
	for i := range 3 {
		if _, code := call(); code != "" {
			t.Fatalf("call %d after recovery: error_code %q", i, code)
		}
	}
	if n := len(api.requests()); n != 7 {
		t.Errorf("the server saw %d requests, want 7", n)
	}
}

// waitHalfOpen waits until cb lets a probe through: its open time has
// passed (State moves an open circuit on once it has).
func waitHalfOpen(t *testing.T, cb *gobreaker.TwoStepCircuitBreaker[struct{}]) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for cb.State() != gobreaker.StateHalfOpen {
		if time.Now().After(deadline) {
			t.Fatalf("the circuit is %s 30 s on, want half-open", cb.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRetryAfterDoesNotOpenCircuit(t *testing.T) {
	_, get, _ := billingOps()
	api := newArrivals(t, 0)
	inner := api.Config.Handler
	api.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.mu.Lock()
		first := len(api.at) == 0
		api.mu.Unlock()
		if first {
			api.mu.Lock()
			api.at = append(api.at, time.Now())
			api.mu.Unlock()
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		inner.ServeHTTP(w, r)
	})
	tl := limitedTool(api.URL, &tool.Limits{Retries: &tool.RetryLimits{Max: 3},
		Circuit: &tool.CircuitLimits{Failures: 1, Window: "10s", OpenFor: "10s"}})
	ex := newExecutor(t, Options{})
	res, err := ex.Call(context.Background(), tool.CallRequest{Tool: tl, Operation: get, Args: map[string]any{"customer_id": "c"}})
	if err != nil || res.Attempts != 2 || res.Status != 200 {
		t.Fatalf("call: %d attempts, status %d, %v; want 2 attempts ending 200", res.Attempts, res.Status, err)
	}
	if gap := api.at[1].Sub(api.at[0]); gap < 2*time.Second {
		t.Errorf("the retry came %s after the 429, before its Retry-After of 2s", gap)
	}
	if st := ex.breakers.get(tl.EffectiveLimits(get.ID)).State(); st != gobreaker.StateClosed {
		t.Errorf("after a 429 the circuit is %s, want closed", st)
	}
}

func TestWriteWithoutIdempotencyNeverRetried(t *testing.T) {
	_, _, cancel := billingOps()
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	tl := limitedTool(api.URL, &tool.Limits{Retries: &tool.RetryLimits{Max: 5, On: []int{503}}})
	res, err := newExecutor(t, Options{}).Call(context.Background(), tool.CallRequest{Tool: tl, Operation: cancel,
		Args: map[string]any{"id": "ch_1"}, IdempotencyKey: "wf.1"})
	if res.Attempts != 1 || len(api.requests()) != 1 {
		t.Errorf("a write of a tool without idempotency support was sent %d times", len(api.requests()))
	}
	if code := tool.ErrorCode(err); code != tool.CodeUpstream {
		t.Errorf("error_code %q, want upstream_error", code)
	}
}

func TestErrorCodes(t *testing.T) {
	_, get, _ := billingOps()
	slow := newArrivals(t, 500*time.Millisecond)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	ex := newExecutor(t, Options{})
	call := func(tl *tool.Tool, args map[string]any) string {
		_, err := ex.Call(context.Background(), tool.CallRequest{Tool: tl, Operation: get, Args: args})
		return tool.ErrorCode(err)
	}
	args := map[string]any{"customer_id": "c"}
	if code := call(limitedTool(slow.URL, &tool.Limits{Timeout: "100ms"}), args); code != tool.CodeTimeout {
		t.Errorf("a call past its tool's timeout: %q, want timeout", code)
	}
	if code := call(limitedTool(closed.URL, &tool.Limits{Retries: &tool.RetryLimits{Max: 0}}), args); code != tool.CodeTransport {
		t.Errorf("a call to a closed port: %q, want transport", code)
	}
	if code := call(limitedTool(slow.URL, nil), map[string]any{}); code != tool.CodeInvalidArguments {
		t.Errorf("a call without its required argument: %q, want invalid_arguments", code)
	}
	// A call holds the only slot until the test lets its answer go.
	held, release := make(chan struct{}), make(chan struct{})
	holding := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(held)
		<-release
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(holding.Close)
	busy := limitedTool(holding.URL, &tool.Limits{Concurrency: 1})
	var wg sync.WaitGroup
	wg.Go(func() { call(busy, args) })
	<-held
	// The workflow's time ends before the slot frees.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := ex.Call(ctx, tool.CallRequest{Tool: busy, Operation: get, Args: args})
	if code := tool.ErrorCode(err); code != tool.CodeRateLimited {
		t.Errorf("a call that gets no slot within its time: %q, want rate_limited", code)
	}
	close(release)
	wg.Wait()
}

func TestRetriesAreVisibleInTheTrace(t *testing.T) {
	exp := spanExporter()
	_, get, _ := billingOps()
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	tl := limitedTool(api.URL, &tool.Limits{Retries: &tool.RetryLimits{Max: 2}})
	tl.Name = "traced"
	if _, err := newExecutor(t, Options{}).Call(context.Background(), tool.CallRequest{Tool: tl, Operation: get, Args: map[string]any{"customer_id": "c"}}); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range spanText(exp.GetSpans()) {
		if strings.HasPrefix(line, "tool.call traced.") {
			found = true
			for _, want := range []string{"agentplane.tool.attempts=2", "event retry agentplane.tool.attempt=1 http.response.status_code=503 error.type=upstream_error"} {
				if !strings.Contains(line, want) {
					t.Errorf("the call's span lacks %q:\n%s", want, line)
				}
			}
		}
	}
	if !found {
		t.Error("no span of the call")
	}
}
