package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseOptions(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-n", "20001"}, {"-n", "5,x"}, {"-latency", "0s"}, {"-store", "mysql"}} {
		if _, err := parseOptions(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) = nil error, want one", args)
		}
	}
}

// TestEndToEnd runs the whole benchmark with a few workflows on SQLite. It
// builds and starts the server, so it runs only with AGENTPLANE_BENCH=1.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"-store", "sqlite", "-n", "20", "-latency", "100ms", "-async", "-repo", "../.."}
	if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	if !strings.Contains(out.String(), "sqlite") || !strings.Contains(out.String(), "wall/ideal") || !strings.Contains(out.String(), "async") {
		t.Errorf("output lacks the sqlite rows, sync and async:\n%s", &out)
	}
}
