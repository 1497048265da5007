package replay_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/tool"
)

var update = flag.Bool("update", false, "rewrite the want of every golden history in testdata/")

// golden is one checked-in history with the definition it is replayed
// against and what the replay must give (or the error it must fail with).
type golden struct {
	Description string          `json:"description"`
	Tools       []goldenTool    `json:"tools"`
	Target      json.RawMessage `json:"target"`
	History     replay.History  `json:"history"`
	// Faults, when set, are injected into the replay.
	Faults []fault.Fault `json:"faults,omitempty"`
	// WantError is a part of the error a bad history must fail with.
	WantError string      `json:"want_error,omitempty"`
	Want      *goldenWant `json:"want,omitempty"`
}

type goldenTool struct {
	Name        string           `json:"name"`
	PolicyClass string           `json:"policy_class"`
	Operations  []tool.Operation `json:"operations"`
}

type goldenWant struct {
	ReplayOutcome string         `json:"replay_outcome"`
	ReplayError   string         `json:"replay_error,omitempty"`
	Delta         replay.Delta   `json:"delta"`
	Steps         []replay.Entry `json:"steps"`
}

func compileTarget(t testing.TB, g *golden) *agent.Program {
	t.Helper()
	cat := agent.NewCatalog()
	for _, gt := range g.Tools {
		cat.Add(&tool.Tool{Name: gt.Name, PolicyClass: gt.PolicyClass}, gt.Operations)
	}
	def, errs := agent.DecodeDefinition(g.Target)
	if errs != nil {
		t.Fatalf("decode target: %v", errs)
	}
	prog, errs := agent.Compile(def, cat)
	if errs != nil {
		t.Fatalf("compile target: %v", errs)
	}
	return prog
}

func replayGolden(t testing.TB, g *golden) (*goldenWant, error) {
	prog := compileTarget(t, g)
	var live *replay.Live
	if len(g.Faults) > 0 {
		live = &replay.Live{Faults: g.Faults}
	}
	run, err := replay.Rerun(context.Background(), prog, &g.History, live)
	if err != nil {
		return nil, err
	}
	entries, delta := replay.Diff(g.History.Steps, run.Steps)
	return &goldenWant{ReplayOutcome: run.Outcome, ReplayError: run.Error, Delta: delta, Steps: entries}, nil
}

// TestGoldenHistories replays every history in testdata/ against its target
// definition. go test ./internal/replay -update rewrites the wants.
func TestGoldenHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden histories: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var g golden
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Fatalf("decode %s: %v", file, err)
			}
			got, err := replayGolden(t, &g)
			if g.WantError != "" {
				if err == nil || !strings.Contains(err.Error(), g.WantError) {
					t.Fatalf("err = %v, want one containing %q", err, g.WantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Deterministic: the same replay again is byte-identical.
			again, err := replayGolden(t, &g)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := json.Marshal(got)
			second, _ := json.Marshal(again)
			if string(first) != string(second) {
				t.Errorf("a second replay differs:\n%s\n%s", first, second)
			}
			if *update {
				g.Want = got
				out, err := json.MarshalIndent(&g, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, append(out, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if g.Want == nil {
				t.Fatalf("%s has no want: run go test ./internal/replay -update", file)
			}
			if diff := cmp.Diff(canonical(t, g.Want), canonical(t, got)); diff != "" {
				t.Errorf("replay (-want +got):\n%s", diff)
			}
		})
	}
}

// canonical is v as indented JSON with sorted keys, so recorded JSON
// compares by value whatever its spacing in the file.
func canonical(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(generic, "", "  ")
	return string(out)
}
