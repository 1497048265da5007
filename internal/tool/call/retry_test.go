package call

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/tool"
)

func TestCallRetries(t *testing.T) {
	_, get, cancel := billingOps()
	tests := []struct {
		name         string
		statuses     []int // answers in order; the last repeats
		op           *tool.Operation
		idempotent   bool
		key          string
		want         outcome
		wantAttempts int
		wantKeys     []string
	}{
		{name: "read retried after 503", statuses: []int{503, 200}, op: get, want: outcome{}, wantAttempts: 2, wantKeys: []string{"", ""}},
		{name: "read retried after 429 and 502", statuses: []int{429, 502, 200}, op: get, wantAttempts: 3, wantKeys: []string{"", "", ""}},
		{name: "read gives up after retries", statuses: []int{504}, op: get,
			want: outcome{Status: 504, Retryable: true, Msg: "the API answered 504 Gateway Timeout"}, wantAttempts: 3, wantKeys: []string{"", "", ""}},
		{name: "read not retried after 500", statuses: []int{500, 200}, op: get,
			want: outcome{Status: 500, Msg: "the API answered 500 Internal Server Error"}, wantAttempts: 1, wantKeys: []string{""}},
		{name: "write without idempotency support not retried", statuses: []int{503, 200}, op: cancel, key: "k1",
			want: outcome{Status: 503, Retryable: true, Msg: "the API answered 503 Service Unavailable"}, wantAttempts: 1, wantKeys: []string{""}},
		{name: "write without a key not retried", statuses: []int{503, 200}, op: cancel, idempotent: true,
			want: outcome{Status: 503, Retryable: true, Msg: "the API answered 503 Service Unavailable"}, wantAttempts: 1, wantKeys: []string{""}},
		{name: "idempotent write with a key retried with the same key", statuses: []int{503, 200}, op: cancel, idempotent: true, key: "k1",
			wantAttempts: 2, wantKeys: []string{"k1", "k1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
				w.WriteHeader(tc.statuses[min(n, len(tc.statuses))-1])
			})
			ex := newExecutor(t, Options{})
			res, err := ex.Call(context.Background(), tool.CallRequest{
				Tool:           &tool.Tool{ID: "t", Name: "t", BaseURL: api.URL, IdempotencySupport: tc.idempotent},
				Operation:      tc.op,
				Args:           map[string]any{tc.op.HTTP.Params[0].Name: "c"},
				IdempotencyKey: tc.key,
			})
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if res.Attempts != tc.wantAttempts {
				t.Errorf("attempts = %d, want %d", res.Attempts, tc.wantAttempts)
			}
			var keys []string
			for _, r := range api.requests() {
				keys = append(keys, r.Header.Get("Idempotency-Key"))
			}
			if diff := cmp.Diff(tc.wantKeys, keys); diff != "" {
				t.Errorf("Idempotency-Key of each attempt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"2", 2 * time.Second},
		{"-1", 0},
		{"soon", 0},
		{now.Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := parseRetryAfter(tc.in, now); got != tc.want {
				t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestCallRetryAfter(t *testing.T) {
	_, get, _ := billingOps()
	tests := []struct {
		name         string
		retryAfter   string
		want         outcome
		wantAttempts int
		minElapsed   time.Duration
	}{
		{"short Retry-After is honoured", "1", outcome{}, 2, time.Second},
		{"long Retry-After is not waited for", "120", outcome{Status: 429, Retryable: true, Msg: "the API answered 429 Too Many Requests"}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
				if n == 1 {
					w.Header().Set("Retry-After", tc.retryAfter)
					w.WriteHeader(http.StatusTooManyRequests)
				}
			})
			start := time.Now()
			res, err := newExecutor(t, Options{}).Call(context.Background(), tool.CallRequest{
				Tool: &tool.Tool{ID: "t", Name: "t", BaseURL: api.URL}, Operation: get, Args: map[string]any{"customer_id": "c"},
			})
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if res.Attempts != tc.wantAttempts {
				t.Errorf("attempts = %d, want %d", res.Attempts, tc.wantAttempts)
			}
			if elapsed := time.Since(start); elapsed < tc.minElapsed {
				t.Errorf("retried after %v, want at least %v", elapsed, tc.minElapsed)
			}
		})
	}
}

// TestCallRetryAfterDateReadsTheExecutorsClock checks that a Retry-After
// given as a date is measured against the executor's clock.
func TestCallRetryAfterDateReadsTheExecutorsClock(t *testing.T) {
	_, get, _ := billingOps()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", now.Add(time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	res, err := newExecutor(t, Options{Now: func() time.Time { return now }}).Call(context.Background(), tool.CallRequest{
		Tool: &tool.Tool{ID: "t", Name: "t", BaseURL: api.URL}, Operation: get, Args: map[string]any{"customer_id": "c"},
	})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if res.Attempts != 2 {
		t.Errorf("attempts = %d, want 2: one second to wait by the executor's clock", res.Attempts)
	}
}

func TestCallRetriesConnectionErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	base := closed.URL
	closed.Close()
	_, get, _ := billingOps()
	res, err := newExecutor(t, Options{}).Call(context.Background(), tool.CallRequest{
		Tool: &tool.Tool{ID: "t", Name: "t", BaseURL: base}, Operation: get, Args: map[string]any{"customer_id": "c"},
	})
	want := outcome{Retryable: true, Msg: "the API could not be reached: the connection was refused"}
	if diff := cmp.Diff(want, outcomeOf(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if res.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", res.Attempts)
	}
}
