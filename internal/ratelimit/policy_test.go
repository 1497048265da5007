package ratelimit

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

var sortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
})

func TestParseOverrides(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		want    map[string]Limit
		wantErr bool
	}{
		{
			name:  "rate and rate with burst",
			specs: []string{"t1=50", "t2=1000:2000"},
			want: map[string]Limit{
				"t1": {Rate: 50, Burst: 50, Period: time.Minute},
				"t2": {Rate: 1000, Burst: 2000, Period: time.Minute},
			},
		},
		{name: "none", specs: nil, want: map[string]Limit{}},
		{name: "no equals sign", specs: []string{"t1"}, wantErr: true},
		{name: "empty tenant", specs: []string{"=5"}, wantErr: true},
		{name: "rate not a number", specs: []string{"t1=fast"}, wantErr: true},
		{name: "zero rate", specs: []string{"t1=0"}, wantErr: true},
		{name: "negative burst", specs: []string{"t1=5:-1"}, wantErr: true},
		{name: "empty burst", specs: []string{"t1=5:"}, wantErr: true},
		{name: "tenant twice", specs: []string{"t1=5", "t1=6"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOverrides(tc.specs)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseOverrides(%q) = %v, want an error", tc.specs, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseOverrides(%q): %v", tc.specs, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("overrides (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyFor(t *testing.T) {
	p := DefaultPolicy()
	p.Tenants = map[string]Limit{"big": {Rate: 1000, Burst: 2000}}

	got := []Limit{p.For("big"), p.For("other"), p.ForIP()}
	want := []Limit{
		{Rate: 1000, Burst: 2000, Period: time.Minute},
		{Rate: 600, Burst: 600, Period: time.Minute},
		{Rate: 120, Burst: 120, Period: time.Minute},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
}

func TestResultHeadersAndError(t *testing.T) {
	tests := []struct {
		name    string
		res     Result
		want    http.Header
		wantErr bool
	}{
		{
			name: "allowed",
			res:  Result{Allowed: true, Limit: 600, Remaining: 599, Reset: 100 * time.Millisecond},
			want: http.Header{
				"X-Ratelimit-Limit":     {"600"},
				"X-Ratelimit-Remaining": {"599"},
				"X-Ratelimit-Reset":     {"1"},
			},
		},
		{
			name: "refused",
			res:  Result{Limit: 5, Remaining: 0, Reset: 59500 * time.Millisecond, RetryAfter: 11500 * time.Millisecond},
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset":     {"60"},
				"Retry-After":           {"12"},
			},
			wantErr: true,
		},
		{
			name: "refused with a wait under a second",
			res:  Result{Limit: 5, Reset: time.Millisecond, RetryAfter: time.Millisecond},
			want: http.Header{
				"X-Ratelimit-Limit":     {"5"},
				"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset":     {"1"},
				"Retry-After":           {"1"},
			},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := http.Header{}
			tc.res.SetHeaders(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			err := tc.res.Err()
			if !tc.wantErr {
				if err != nil {
					t.Errorf("Err() = %v, want nil", err)
				}
				return
			}
			pe := problem.As(err)
			if pe.Code != problem.RateLimited || pe.RetryAfter != tc.res.RetryAfter {
				t.Errorf("Err() = %+v, want code %s with RetryAfter %s", pe, problem.RateLimited, tc.res.RetryAfter)
			}
		})
	}
}
