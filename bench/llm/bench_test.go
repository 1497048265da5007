package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

func TestParseOptions(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-n", "20001"}, {"-n", "5,x"}, {"-latency", "0s"}, {"-store", "mysql"}} {
		if _, err := parseOptions(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) = nil error, want one", args)
		}
	}
}

// TestEndToEnd runs the whole benchmark with a few workflows on SQLite,
// the model over HTTP/1.1 and then over h2c. It builds and starts the
// server, so it runs only with AGENTPLANE_BENCH=1.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := benchserver.Build(ctx, "../..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, h2c := range []bool{false, true} {
		var out, errOut bytes.Buffer
		args := []string{"-store", "sqlite", "-n", "20", "-latency", "100ms", "-async", "-binary", bin, "-h2c=" + strconv.FormatBool(h2c)}
		if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
			t.Fatalf("run %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, &out, &errOut)
		}
		if !strings.Contains(out.String(), "sqlite") || !strings.Contains(out.String(), "wall/ideal") || !strings.Contains(out.String(), "async") {
			t.Errorf("output lacks the sqlite rows, sync and async:\n%s", &out)
		}
		if h2c != strings.Contains(out.String(), "over unencrypted HTTP/2") {
			t.Errorf("-h2c=%t, output:\n%s", h2c, &out)
		}
	}
}
