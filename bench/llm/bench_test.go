package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

func TestParseOptions(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-n", "20001"}, {"-n", "5,x"}, {"-latency", "0s"}, {"-store", "mysql"},
		{"-sync=false"}, {"-invoke-conns", "4"}, {"-async", "-invoke-conns", "-1"}} {
		if _, err := parseOptions(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) = nil error, want one", args)
		}
	}
}

func TestPeakInFlight(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1_800_000_000+int64(s), 0) }
	for _, c := range []struct {
		starts, ends []int
		want         int
	}{
		{[]int{0, 1, 2}, []int{10, 10, 10}, 3},
		{[]int{0, 5, 10}, []int{5, 10, 15}, 1}, // each ends as the next starts
		{[]int{0, 1, 6, 7}, []int{5, 6, 9, 8}, 2},
		{nil, nil, 0},
	} {
		var starts, ends []time.Time
		for i := range c.starts {
			starts, ends = append(starts, at(c.starts[i])), append(ends, at(c.ends[i]))
		}
		if got := peakInFlight(starts, ends); got != c.want {
			t.Errorf("peakInFlight(%v, %v) = %d, want %d", c.starts, c.ends, got, c.want)
		}
	}
}

// TestFileNeed checks that 20,000 asynchronous invokes on 1,000 shared
// connections, with the model over h2c, fit a limit of 20,000 open files,
// and that a synchronous burst still counts three sockets a workflow.
func TestFileNeed(t *testing.T) {
	for _, c := range []struct {
		o     options
		n     int
		async bool
		want  uint64
	}{
		{options{}, 5000, false, 3*5000 + 1024},
		{options{async: true}, 5000, true, 3*5000 + 1024},
		{options{async: true, h2c: true, invokeConns: 1000}, 20000, true, 2*1000 + 81 + 1024},
		{options{async: true, invokeConns: 1000}, 500, true, 3*500 + 1024},
	} {
		if got := fileNeed(c.o, c.n, c.async); got != c.want {
			t.Errorf("fileNeed(%+v, %d, %t) = %d, want %d", c.o, c.n, c.async, got, c.want)
		}
	}
}

// TestEndToEnd runs the whole benchmark with a few workflows on SQLite,
// the model over HTTP/1.1 (synchronous and asynchronous invokes) and then
// over h2c (asynchronous invokes alone, sharing a few connections). It
// builds and starts the server, so it runs only with AGENTPLANE_BENCH=1.
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
		if h2c {
			args = append(args, "-sync=false", "-invoke-conns", "4")
		}
		if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
			t.Fatalf("run %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, &out, &errOut)
		}
		syncRow := regexp.MustCompile(`(?m)^ *sqlite +sync +20 `).MatchString(out.String())
		asyncRow := regexp.MustCompile(`(?m)^ *sqlite +async +20 `).MatchString(out.String())
		if !strings.Contains(out.String(), "wall/ideal") || !asyncRow || syncRow == h2c {
			t.Errorf("args %v: want the async row and the sync row only without -sync=false; output:\n%s", args, &out)
		}
		if h2c != strings.Contains(out.String(), "over unencrypted HTTP/2") {
			t.Errorf("-h2c=%t, output:\n%s", h2c, &out)
		}
	}
}
