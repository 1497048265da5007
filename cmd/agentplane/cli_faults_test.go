package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestCLIReplayFaults injects faults through replay's flags against the
// demo: a time-out into one replay (the step says so), a 503 into every
// replay of a batch whose gated check then fails (exit 5), from a faults
// file too, and a bad fault refused with the field named. (Which items a
// rate under 1 picks is the API tests' concern: the demo's ids are new on
// every run.)
func TestCLIReplayFaults(t *testing.T) {
	e := demoEnv(t)
	first := demoTriageWorkflows(t, e)[0]
	out := e.ok("replay", first, "--target", "fraud-triage@2", "--fault", `{"tool": "payments", "result": {"error": "timeout"}}`)
	if !strings.Contains(out, "faults: 1 given") || !strings.Contains(out, "[fault 0 injected]") {
		t.Errorf("replay --fault:\n%s", out)
	}

	for _, faults := range [][]string{
		{"--fault", "payments.getTransaction=503@1"},
		{"--faults-file", e.write("faults.yaml", "- tool: payments\n  operation: getTransaction\n  rate: 1\n  result: {status: 503, body: {error: down}}\n")},
	} {
		args := append([]string{"replay", "--batch", "--target", "fraud-triage@2", "--agent", "fraud-triage",
			"--check", `no_failure=replay.outcome != "failed"`, "--gate", "no_failure=1"}, faults...)
		out, errs, code := e.run(args...)
		if code != exitChanged || !strings.Contains(out, "verdict: failed") {
			t.Fatalf("replay --batch %v: exit %d\nstdout: %s\nstderr: %s", faults, code, out, errs)
		}
		if m := regexp.MustCompile(`(?m)^no_failure\s+(\S+)%`).FindStringSubmatch(out); m == nil || m[1] != "0.0" {
			t.Errorf("the checks table does not show no_failure failing:\n%s", out)
		}
	}

	_, errs, code := e.run("replay", first, "--target", "fraud-triage@2", "--fault", "payments=503@1.5")
	if code == 0 || !strings.Contains(errs, "faults[0].rate") {
		t.Errorf("a rate over 1: exit %d, stderr %s", code, errs)
	}
	if _, errs, code := e.run("replay", first, "--target", "fraud-triage@2", "--fault", "payments"); code != exitUsage || !strings.Contains(errs, "TOOL[.OPERATION]") {
		t.Errorf("a fault without an answer: exit %d, stderr %s", code, errs)
	}
}
