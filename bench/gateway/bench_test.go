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
	for _, args := range [][]string{{"-n", "0"}, {"-n", "5001"}, {"-n", "5,x"}, {"-latency", "0s"}, {"-rounds", "0"}, {"-rounds", "21"}, {"-rounds", "2", "-profile-round", "3"}, {"-profile-round", "0"}, {"-store", "mysql"}} {
		if _, err := parseOptions(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) = nil error, want one", args)
		}
	}
}

// TestEndToEnd runs the whole benchmark with a few runs on SQLite. It
// builds and starts the server, so it runs only with AGENTPLANE_BENCH=1.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"-store", "sqlite", "-n", "20", "-latency", "100ms", "-rounds", "2", "-repo", "../.."}
	if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	for _, want := range []string{"external", "defined", "wall/ideal", "external ÷ defined"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}
