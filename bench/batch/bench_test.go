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
	for _, args := range [][]string{{"-n", "0"}, {"-n", "10001"}, {"-llm", "sometimes"}, {"-concurrency", "65"},
		{"-external", "-concurrency", "0"}, {"-model-delay", "0s"}, {"-store", "mysql"}} {
		if _, err := parseOptions(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) = nil error, want one", args)
		}
	}
}

// TestExternalEndToEnd runs the external mode with a few workflows on
// SQLite. It builds and starts the server, so it runs only with
// AGENTPLANE_BENCH=1.
func TestExternalEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"-external", "-store", "sqlite", "-n", "12", "-concurrency", "4", "-model-delay", "50ms", "-repo", "../.."}
	if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	for _, want := range []string{"external batch: 12 workflows", "wall/ideal", "sqlite  "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}
