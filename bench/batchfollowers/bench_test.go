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
	for _, args := range [][]string{{"-n", "0"}, {"-followers", "101"}, {"-followers", "0"}, {"-rounds", "0"}, {"-store", "mysql"}} {
		if _, err := parseOptions(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) = nil error, want one", args)
		}
	}
}

// TestEndToEnd runs the whole benchmark, small, on SQLite. It builds and
// starts the server binary, so it runs only with AGENTPLANE_BENCH=1.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"-store", "sqlite", "-repo", "../..", "-n", "50", "-followers", "5", "-rounds", "1"}
	if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	if !strings.Contains(out.String(), "sqlite") || !strings.Contains(out.String(), "followers that saw it run / end") {
		t.Errorf("output lacks the sqlite rows:\n%s", &out)
	}
}
