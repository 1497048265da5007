package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name string
		lat  []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p90 of four", ms(1, 2, 3, 4), 90, 4 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := (levelResult{lat: tc.lat}).p(tc.q); got != tc.want {
				t.Errorf("p(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	env := func(url string) func(string) string {
		return func(string) string { return url }
	}
	tests := []struct {
		name    string
		args    []string
		getenv  func(string) string
		want    options
		wantErr string
	}{
		{
			name:   "defaults",
			getenv: env(""),
			want: options{stores: []string{"sqlite", "postgres"}, n: 2000, levels: []int{1, 16}, warmup: 200,
				duration: 2 * time.Minute, databaseURL: benchserver.DefaultDatabaseURL, repo: ".", engineRuns: 20000, roundTrips: 5000},
		},
		{
			name: "flags and the environment's database",
			args: []string{"-store", "sqlite", "-n", "20", "-c", "2, 4", "-duration", "5s",
				"-server-args", " --database-writers 2 ", "-wal-detail"},
			getenv: env("postgres://x@127.0.0.1/db"),
			want: options{stores: []string{"sqlite"}, n: 20, levels: []int{2, 4}, warmup: 200,
				duration: 5 * time.Second, databaseURL: "postgres://x@127.0.0.1/db", repo: ".", engineRuns: 20000, roundTrips: 5000,
				serverArgs: []string{"--database-writers", "2"}, walDetail: true},
		},
		{name: "unknown store", args: []string{"-store", "mysql"}, getenv: env(""), wantErr: "-store"},
		{name: "bad level", args: []string{"-c", "1,0"}, getenv: env(""), wantErr: "-c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOptions(tc.args, tc.getenv, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEngine runs the in-process measurement briefly: the definition must
// compile and every run must end as the server's runs do.
func TestEngine(t *testing.T) {
	svc := startToolService()
	defer svc.Close()
	e, err := measureEngine(context.Background(), svc, 50, 50)
	if err != nil {
		t.Fatal(err)
	}
	if e.steps != agentSteps || e.perStep <= 0 || e.roundTrips != 50 || e.roundTripP50 <= 0 || e.roundTripP99 < e.roundTripP50 {
		t.Errorf("engine result %+v", e)
	}
	if got := svc.Hits.Load(); got != 100 { // 50 warm-up GETs + 50 timed
		t.Errorf("tool service saw %d GETs, want 100", got)
	}
}

// TestEndToEnd builds the server and runs the whole benchmark with a tiny
// load on SQLite. It takes a build of the binary, so it runs only with
// AGENTPLANE_BENCH=1.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to build the server and run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"-store", "sqlite", "-n", "20", "-c", "2", "-warmup", "5",
		"-engine-runs", "100", "-round-trips", "100", "-repo", "../.."}
	if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	for _, want := range []string{"sqlite", "engine per step / tool round trip"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}
