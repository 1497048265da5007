package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEndToEnd builds the server and runs the whole benchmark with a tiny
// backlog on SQLite, and on PostgreSQL when AGENTPLANE_TEST_DATABASE_URL is
// set. It takes a build of the binary, so it runs only with
// AGENTPLANE_BENCH=1.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to build the server and run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stores := "sqlite"
	if os.Getenv("AGENTPLANE_TEST_DATABASE_URL") != "" {
		stores = "both"
	}
	var out, errOut bytes.Buffer
	args := []string{"-store", stores, "-n", "500", "-c", "2", "-baseline", "2s", "-limit", "2m", "-repo", "../.."}
	if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	if !strings.Contains(out.String(), "sqlite") || !strings.Contains(out.String(), "swept workflows/s") {
		t.Errorf("output:\n%s", &out)
	}
}

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	if p(lat, 99) != 99*time.Millisecond || p(lat, 50) != 50*time.Millisecond || p(nil, 99) != 0 {
		t.Errorf("p99 %v, p50 %v", p(lat, 99), p(lat, 50))
	}
}
