package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// demoEnv starts serve --demo and returns a client environment with its token.
func demoEnv(t *testing.T) *cliEnv {
	t.Helper()
	srv := startChild(t, demoAddr(t), "--demo", "--data", t.TempDir())
	const prefix = "export AGENTPLANE_TOKEN="
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out := srv.output(); strings.Contains(out, "# 3. open the viewer_url") {
			tok := strings.Fields(out[strings.Index(out, prefix)+len(prefix):])[0]
			return &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: tok}
		}
	}
	t.Fatal("serve --demo printed no ready block within 60 s")
	return nil
}

// demoTriageWorkflows are the ids of the demo's completed fraud-triage
// workflows, newest first (at least one).
func demoTriageWorkflows(t *testing.T, e *cliEnv) []string {
	t.Helper()
	var wfs struct {
		Workflows []struct {
			ID string `json:"workflow_id"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal([]byte(e.ok("workflows", "list", "--agent", "fraud-triage", "--status", "completed", "-o", "json")), &wfs); err != nil {
		t.Fatal(err)
	}
	if len(wfs.Workflows) == 0 {
		t.Fatal("the demo has no fraud-triage workflows")
	}
	ids := make([]string, len(wfs.Workflows))
	for i, w := range wfs.Workflows {
		ids[i] = w.ID
	}
	return ids
}

// TestCLIDatasetsChecksJUnit makes a dataset of the demo's history with an
// expectation that v2 cannot meet, replays it with checks (exit 5 on the
// failed verdict), and validates the JUnit report against a JUnit XML
// schema with xmllint; a gate the batch meets exits 0.
func TestCLIDatasetsChecksJUnit(t *testing.T) {
	t.Parallel()
	e := demoEnv(t)
	// A dataset holds finished workflows: the demo's refund waiting for
	// approval is not one of them.
	ids := demoTriageWorkflows(t, e)
	n := len(ids)
	first := ids[0]
	expect := e.write("expect.json", `{"`+first+`": {"outcome": "never-reached"}}`)
	out := e.ok("datasets", "create", "demo-suite", "--agent", "fraud-triage", "--since", "7d", "--expect", expect, "--description", "the demo's history")
	if !strings.Contains(out, "dataset demo-suite@1") || !strings.Contains(out, "never-reached") {
		t.Errorf("datasets create:\n%s", out)
	}
	if out := e.ok("datasets", "create", "demo-suite", "--next", "--workflow-ids", first); !strings.Contains(out, "demo-suite@2") {
		t.Errorf("datasets create --next:\n%s", out)
	}
	if out := e.ok("datasets", "list"); !strings.Contains(out, "demo-suite@2") {
		t.Errorf("datasets list:\n%s", out)
	}
	if out := e.ok("datasets", "get", "demo-suite@1"); strings.Count(out, "wf_") != n {
		t.Errorf("datasets get demo-suite@1 lists %d workflows, want %d:\n%s", strings.Count(out, "wf_"), n, out)
	}

	junit := filepath.Join(e.dir, "replay.xml")
	out, errs, code := e.run("replay", "--batch", "--target", "fraud-triage@2", "--dataset", "demo-suite@1",
		"--check", "expected_outcome", "--check", `finished=replay.status != ""`, "--junit", junit)
	if code != exitChanged || !strings.Contains(out, "verdict: failed") || !strings.Contains(errs, "failed its checks") {
		t.Fatalf("replay --batch with a failing check: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !regexp.MustCompile(`(?m)^finished\s+100\.0%\s+-\s`).MatchString(out) {
		t.Errorf("the checks table lacks finished at a 100.0%% pass rate, ungated:\n%s", out)
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name      string `xml:"name,attr"`
			ClassName string `xml:"classname,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(raw, &suite); err != nil {
		t.Fatalf("the JUnit report is not XML: %v\n%s", err, raw)
	}
	var failed []string
	for _, c := range suite.Cases {
		if c.Failure != nil {
			failed = append(failed, c.ClassName+"/"+c.Name)
			if !strings.Contains(c.Failure.Message, c.ClassName) || !strings.Contains(c.Failure.Message, c.Name) {
				t.Errorf("failure message %q names neither workflow nor check", c.Failure.Message)
			}
		}
	}
	if suite.Tests != 2*n || len(suite.Cases) != 2*n || suite.Failures != 1 || len(failed) != 1 || failed[0] != first+"/expected_outcome" {
		t.Errorf("JUnit: %d tests (want %d), failures %d %v (want %s/expected_outcome)", suite.Tests, 2*n, suite.Failures, failed, first)
	}
	defer validateJUnit(t, junit) // last: it skips without xmllint

	// A gate the batch meets passes, whatever the ungated checks say.
	out, errs, code = e.run("replay", "--batch", "--target", "fraud-triage@2", "--dataset", "demo-suite@1",
		"--check", "expected_outcome", "--check", "outcome_unchanged", "--gate", "expected_outcome=0.5")
	if code != 0 || !strings.Contains(out, "verdict: passed") {
		t.Errorf("replay --batch with a gate met: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !regexp.MustCompile(`(?m)^expected_outcome\s+\d+\.\d%\s+50\.0%\s`).MatchString(out) {
		t.Errorf("the checks table lacks expected_outcome's gate of 50.0%%:\n%s", out)
	}
	for _, bad := range [][]string{
		{"--gate", "expected_outcome=2"},
		{"--check", "=true"},
		{"--judge-model", "m"},
		{"--dataset", "demo-suite", "--agent", "fraud-triage"},
	} {
		args := append([]string{"replay", "--batch", "--target", "fraud-triage@2", "--dataset", "demo-suite"}, bad...)
		if bad[0] == "--dataset" {
			args = append([]string{"replay", "--batch", "--target", "fraud-triage@2"}, bad...)
		}
		if _, errs, code := e.run(args...); code != exitUsage {
			t.Errorf("replay %v: exit %d, want %d (usage)\n%s", bad, code, exitUsage, errs)
		}
	}
}

// validateJUnit checks a JUnit report against testdata/junit.xsd with
// xmllint (Debian package libxml2-utils), and skips the test without it.
func validateJUnit(t *testing.T, path string) {
	t.Helper()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Skip("xmllint is not installed (apt-get install libxml2-utils): the JUnit report was not validated against the schema")
	}
	out, err := exec.Command(xmllint, "--noout", "--schema", "testdata/junit.xsd", path).CombinedOutput()
	if err != nil {
		t.Errorf("the JUnit report does not validate: %v\n%s", err, out)
	}
}
