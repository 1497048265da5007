package main

import (
	"bytes"
	"os"
	"testing"
)

// TestShortRunLosesNothing is the harness's CI run: two replicas as real
// processes on the test PostgreSQL and Redis, one killed and restarted,
// one's database connections cut and restored, Redis cut, the tool
// service misbehaving, under load; every check must pass.
func TestShortRunLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault harness runs real replicas for about a minute: skipped with -short")
	}
	for _, env := range []string{"AGENTPLANE_TEST_DATABASE_URL", "AGENTPLANE_TEST_REDIS_URL"} {
		if os.Getenv(env) == "" {
			t.Skip(env + " not set: skipping the fault harness")
		}
	}
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"-short", "-repo", "../.."}, os.Getenv, &out, &log)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
}
