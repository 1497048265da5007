package llm

import (
	"context"
	"errors"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
)

func TestRetries(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Run("429 honours Retry-After", func(t *testing.T) {
				srv := p.newServer(t, llmtest.Sequence(
					llmtest.Answer{Status: 429, ErrorMessage: "Rate limit reached", Header: http.Header{"Retry-After": {"1"}}},
					llmtest.Text("ok"),
				))
				start := time.Now()
				if _, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(context.Background(), conversation()); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d < time.Second {
					t.Errorf("answered after %v, before the second Retry-After asked", d)
				}
				if srv.Count() != 2 {
					t.Errorf("%d requests, want 2", srv.Count())
				}
			})
			t.Run("retry-after-ms", func(t *testing.T) {
				srv := p.newServer(t, llmtest.Sequence(
					llmtest.Answer{Status: 429, ErrorMessage: "slow down", Header: http.Header{"Retry-After-Ms": {"300"}}},
					llmtest.Text("ok"),
				))
				start := time.Now()
				if _, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(context.Background(), conversation()); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d < 300*time.Millisecond {
					t.Errorf("answered after %v, before the 300ms asked", d)
				}
			})
			t.Run("500 then success", func(t *testing.T) {
				srv := p.newServer(t, llmtest.Sequence(llmtest.Error(500, "The server had an error"), llmtest.Text("ok")))
				resp, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(context.Background(), conversation())
				if err != nil || resp.Message.Content != "ok" || srv.Count() != 2 {
					t.Fatalf("answer %+v, error %v, %d requests", resp, err, srv.Count())
				}
			})
			t.Run("four failures are three retries", func(t *testing.T) {
				srv := p.newServer(t, llmtest.Sequence(llmtest.Error(503, "The engine is currently overloaded")))
				_, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(context.Background(), conversation())
				le := llmError(t, err)
				if le.Status != 503 || le.Message != "The engine is currently overloaded" {
					t.Errorf("error %+v", le)
				}
				if srv.Count() != 1+MaxRetries {
					t.Errorf("%d requests, want %d", srv.Count(), 1+MaxRetries)
				}
			})
			t.Run("400 is not retried", func(t *testing.T) {
				msg := "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens."
				srv := p.newServer(t, llmtest.Sequence(llmtest.Error(400, msg)))
				_, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(context.Background(), conversation())
				le := llmError(t, err)
				if le.Status != 400 || le.Message != msg || srv.Count() != 1 {
					t.Errorf("error %+v after %d requests", le, srv.Count())
				}
			})
			t.Run("deadline shorter than Retry-After", func(t *testing.T) {
				srv := p.newServer(t, llmtest.Sequence(llmtest.Answer{Status: 429, ErrorMessage: "Rate limit reached",
					Header: http.Header{"Retry-After": {time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)}}}))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_, err := newClient(t, testOptions(t), testModel(p.name, srv)).Complete(ctx, conversation())
				le := llmError(t, err)
				// Retry-After is past the deadline: the client answers at
				// once rather than wait for the deadline to end the call.
				if ctx.Err() != nil {
					t.Errorf("returned once the context ended (%v): it waited for a retry past the deadline", ctx.Err())
				}
				if le.Status != 429 || !strings.Contains(le.Message, "Rate limit reached") || !strings.Contains(le.Message, "deadline") {
					t.Errorf("error %+v", le)
				}
				if srv.Count() != 1 {
					t.Errorf("%d requests, want 1", srv.Count())
				}
			})
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, true},
		{http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{}, 0, false},
	}
	for _, tc := range cases {
		got, ok := retryAfter(tc.header, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%v) = %v, %v; want %v, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestUnusableAnswers(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cases := []struct {
				name    string
				answer  llmtest.Answer
				status  int
				message string
				tries   int
			}{
				{"slower than the timeout", llmtest.Answer{Delay: 2 * time.Second, Text: "late"}, 0, "did not answer within 300ms", 1},
				{"non-JSON body", llmtest.Answer{Raw: "<html>gateway</html>"}, 200, "not a chat completion in JSON (a text/html body)", 1},
				{"non-JSON error", llmtest.Answer{Status: 502, Raw: "<html>Bad Gateway</html>"}, 502, "Bad Gateway (a text/html body, not JSON)", 1 + MaxRetries},
				{"truncated body", llmtest.Answer{Text: "a long answer", Truncate: true}, 200, "cut short", 1 + MaxRetries},
				{"too large", llmtest.Answer{Text: strings.Repeat("a", maxAnswer)}, 200, "larger than 16 MiB", 1},
				{"401 in the provider's words", llmtest.Error(401, "Incorrect API key provided: "+testSecret+"."), 401, "Incorrect API key provided: [redacted].", 1},
			}
			if p.name == model.OpenAI {
				cases = append(cases, struct {
					name    string
					answer  llmtest.Answer
					status  int
					message string
					tries   int
				}{"no choices", llmtest.Answer{Choiceless: true}, 200, "its answer has no choices", 1})
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					srv := p.newServer(t, llmtest.Sequence(tc.answer))
					m := testModel(p.name, srv)
					if tc.answer.Delay > 0 {
						m.Timeout = 300 * time.Millisecond
					}
					if len(tc.answer.Text) >= maxAnswer {
						// 16 MiB written and read under -race on a loaded
						// machine take seconds: the limit refuses it, not the
						// clock.
						m.Timeout = 2 * time.Minute
					}
					_, err := newClient(t, testOptions(t), m).Complete(context.Background(), conversation())
					le := llmError(t, err)
					if le.Status != tc.status || !strings.Contains(le.Message, tc.message) {
						t.Errorf("error %+v, want status %d and %q", le, tc.status, tc.message)
					}
					if srv.Count() != tc.tries {
						t.Errorf("%d requests, want %d", srv.Count(), tc.tries)
					}
				})
			}
		})
	}
}

func TestNotFoundHintsAtTheBaseURL(t *testing.T) {
	cases := []struct {
		provider string
		baseURL  func(*llmtest.Server) string
		hint     string
	}{
		{model.OpenAI, func(s *llmtest.Server) string { return s.Server.URL }, "does base_url end in /v1?"},
		{model.Anthropic, func(s *llmtest.Server) string { return s.Server.URL + "/v1" }, "the API root without /v1"},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			var srv *llmtest.Server
			for _, p := range providers {
				if p.name == tc.provider {
					srv = p.newServer(t, llmtest.Sequence(llmtest.Text("ok")))
				}
			}
			m := testModel(tc.provider, srv)
			m.BaseURL = tc.baseURL(srv)
			_, err := newClient(t, testOptions(t), m).Complete(context.Background(), conversation())
			le := llmError(t, err)
			if le.Status != 404 || !strings.Contains(le.Message, tc.hint) {
				t.Errorf("error %+v, want a 404 saying %q", le, tc.hint)
			}
		})
	}
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	m := testModel(model.OpenAI, srv)
	srv.Close()
	_, err := newClient(t, testOptions(t), m).Complete(context.Background(), conversation())
	le := llmError(t, err)
	if le.Status != 0 || !strings.Contains(le.Message, "could not be reached") {
		t.Errorf("error %+v", le)
	}
}

func TestRefusedAddressIsNotRequested(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	opts := testOptions(t)
	opts.Outbound = outbound.New(outbound.Options{}) // loopback refused
	_, err := newClient(t, opts, srv.Model("helper")).Complete(context.Background(), conversation())
	le := llmError(t, err)
	if !strings.Contains(le.Message, "refused") || srv.Count() != 0 {
		t.Errorf("error %+v after %d requests", le, srv.Count())
	}
}

func TestBackoffDoublesWithJitter(t *testing.T) {
	for n, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		for range 20 {
			if d := backoff(time.Second, n); d > base || d < base*3/4 {
				t.Fatalf("backoff(1s, %d) = %v, want within [%v, %v]", n, d, base*3/4, base)
			}
		}
	}
}

func TestContextEndIsNotAnLLMError(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Answer{Delay: 5 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := newClient(t, testOptions(t), testModel(model.OpenAI, srv)).Complete(ctx, conversation())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v (%T), want the context's deadline", err, err)
	}
}

func TestConcurrencyBound(t *testing.T) {
	// Completions and relayed requests (a stream of each API) share the
	// model's bound.
	type call func(p *Pool, m *model.Model) error
	complete := func(p *Pool, m *model.Model) error {
		c, err := p.Client(m)
		if err == nil {
			_, err = c.Complete(context.Background(), conversation())
		}
		return err
	}
	relay := func(api int) call {
		return func(p *Pool, m *model.Model) error {
			a := relayAPIs[api]
			_, err := p.Relay(context.Background(), m, RelayRequest{API: a.api, Body: []byte(streamed(a.body))}, (&collect{}).send)
			return err
		}
	}
	cases := []struct {
		name      string
		newServer func(testing.TB, llmtest.Script, ...llmtest.Option) *llmtest.Server
		provider  string
		calls     []call
	}{
		{model.OpenAI, llmtest.NewOpenAIServer, model.OpenAI, []call{complete, relay(0), relay(1)}},
		{model.Anthropic, llmtest.NewAnthropicServer, model.Anthropic, []call{complete, relay(2)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			inFlight, most := 0, 0
			srv := tc.newServer(t, func(llmtest.Request) llmtest.Answer {
				mu.Lock()
				inFlight++
				most = max(most, inFlight)
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				inFlight--
				mu.Unlock()
				return llmtest.Text("ok")
			})
			m := testModel(tc.provider, srv)
			m.MaxConcurrency = 2
			p := NewClients(testOptions(t))
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Go(func() {
					if err := tc.calls[i%len(tc.calls)](p, m); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if most != 2 {
				t.Errorf("%d requests in flight at most, want 2", most)
			}
		})
	}
}

func TestConcurrencyWaitEndsWithTheContext(t *testing.T) {
	// The first completion holds the only slot until the test ends.
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := llmtest.NewOpenAIServer(t, func(llmtest.Request) llmtest.Answer {
		once.Do(func() { close(arrived) })
		<-release
		return llmtest.Text("ok")
	})
	t.Cleanup(func() { close(release) }) // before the server closes
	m := testModel(model.OpenAI, srv)
	m.MaxConcurrency = 1
	c := newClient(t, testOptions(t), m)
	go func() { _, _ = c.Complete(context.Background(), conversation()) }()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the first completion did not reach the server within 30 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Complete(ctx, conversation()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's deadline while waiting for a slot", err)
	}
}

// TestCompletionsInFlightHoldNoTimerGoroutines checks that a completion
// waiting on its model holds no goroutine of net/http's cancellation for
// transports it does not know (setRequestCancel, awaitLegacyCancel), which
// http.Client.Timeout costs over the outbound client's wrapped transport:
// two more a completion, 10,000 at 5,000 in flight.
func TestCompletionsInFlightHoldNoTimerGoroutines(t *testing.T) {
	const n = 8
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := p.newServer(t, llmtest.Sequence(llmtest.Answer{Delay: time.Minute}))
			c := newClient(t, testOptions(t), testModel(p.name, srv))
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() { _, _ = c.Complete(ctx, conversation()) })
			}
			defer wg.Wait()
			defer cancel()
			for deadline := time.Now().Add(10 * time.Second); srv.Count() < n; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d completions reached the model", srv.Count(), n)
				}
			}
			var stacks strings.Builder
			if err := pprof.Lookup("goroutine").WriteTo(&stacks, 2); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"net/http.setRequestCancel", "net/http.awaitLegacyCancel"} {
				if k := strings.Count(stacks.String(), "\n"+f); k > 0 {
					t.Errorf("%d goroutines in %s with %d completions in flight", k, f, n)
				}
			}
		})
	}
}

// TestRelayTimesOut checks that a relayed request ends at the model's
// timeout with the error a completion gets.
func TestRelayTimesOut(t *testing.T) {
	for _, a := range relayAPIs {
		t.Run(a.api, func(t *testing.T) {
			srv := a.newServer(t, llmtest.Sequence(llmtest.Answer{Delay: time.Minute}))
			m := testModel(a.provider, srv)
			m.Timeout = 300 * time.Millisecond
			start := time.Now()
			_, err := relayer(t).Relay(context.Background(), m, RelayRequest{API: a.api, Body: []byte(a.body)}, func([]byte) error { return nil })
			le := llmError(t, err)
			if !strings.Contains(le.Message, "did not answer within 300ms") {
				t.Errorf("error %+v, want the model's timeout", le)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("ended after %v", d)
			}
		})
	}
}
