package main

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/internal/workflow"
)

func TestParseOptions(t *testing.T) {
	env := func(string) string { return "" }
	got, err := parseOptions(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := options{stores: []string{"sqlite", "postgres"}, n: 100000, requests: 300, databaseURL: benchserver.DefaultDatabaseURL, repo: "."}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	for _, args := range [][]string{{"-n", "99"}, {"-requests", "0"}, {"-store", "mysql"}} {
		if _, err := parseOptions(args, env, io.Discard); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: err = %v, want one naming %s", args, err, args[0])
		}
	}
}

func TestQuery(t *testing.T) {
	f := workflow.ListFilter{Agent: "triage", Version: "2", Words: []string{"refund", "100%"}, Before: "wf_1", Limit: 50}
	got, err := url.ParseQuery(query(f))
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"agent": {"triage"}, "version": {"2"}, "q": {"refund 100%"}, "cursor": {"wf_1"}, "limit": {"50"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("query (-want +got):\n%s", diff)
	}
}

// TestGenerate checks the seeded mix the cases rely on: ids newest last,
// about one goal in five a refund and one in two hundred a chargeback.
func TestGenerate(t *testing.T) {
	rows := generate(20000)
	refunds, chargebacks := 0, 0
	for i, r := range rows {
		if i > 0 && r.id <= rows[i-1].id {
			t.Fatalf("id %d (%s) is not after %s", i, r.id, rows[i-1].id)
		}
		if strings.HasPrefix(r.goal, "Refund ") {
			refunds++
		}
		if strings.Contains(r.goal, "chargeback") {
			chargebacks++
		}
	}
	if refunds < 3600 || refunds > 4400 || chargebacks < 60 || chargebacks > 140 {
		t.Errorf("%d refunds and %d chargebacks in 20,000 goals", refunds, chargebacks)
	}
}

// TestEndToEnd builds the server and runs the whole benchmark with 2,000
// workflows on SQLite (and PostgreSQL when AGENTPLANE_TEST_DATABASE_URL is
// set). It takes a build of the binary, so it runs only with
// AGENTPLANE_BENCH=1.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") != "1" {
		t.Skip("set AGENTPLANE_BENCH=1 to build the server and run the benchmark end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store := "sqlite"
	if os.Getenv("AGENTPLANE_TEST_DATABASE_URL") != "" {
		store = "both"
	}
	var out, errOut bytes.Buffer
	args := []string{"-store", store, "-n", "2000", "-requests", "5", "-repo", "../.."}
	if err := run(ctx, args, os.Getenv, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	for _, want := range []string{"first page", "goal: chargeback (1 in 200)", "workflow_goals"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}
