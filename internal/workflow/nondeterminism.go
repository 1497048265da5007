package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/internal/agent"
)

// ErrNondeterministic fails a resumed workflow whose program no longer
// produces the steps its history recorded: serving a recorded answer to a
// different step would be a silent wrong answer.
var ErrNondeterministic = errors.New("nondeterministic workflow")

// nondeterminismError is ErrNondeterministic saying where the program
// left its history.
type nondeterminismError struct{ detail string }

func (e *nondeterminismError) Error() string { return ErrNondeterministic.Error() + ": " + e.detail }

func (e *nondeterminismError) Unwrap() error { return ErrNondeterministic }

func nondeterministic(format string, args ...any) error {
	return &nondeterminismError{detail: fmt.Sprintf(format, args...)}
}

// sameStep checks that a step made again on resume is the recorded one:
// its action, kind (when recorded), tool, operation and status.
func sameStep(s *Step, ev agent.Event) error {
	if s.Action != ev.Action || s.Kind != "" && s.Kind != ev.Kind || s.Tool != ev.Tool || s.Operation != ev.Operation || s.Status != ev.Status {
		return nondeterministic("step %d recorded %s, the program now produces %s", s.Step,
			describeStep(s.Action, s.Kind, s.Tool, s.Operation, s.Status), describeStep(ev.Action, ev.Kind, ev.Tool, ev.Operation, ev.Status))
	}
	return nil
}

// sameCall checks that a call made again on resume is the recorded one: a
// call the history made (not one refused before it was made), of the same
// action, tool and operation, with the same canonical arguments (agent.CanonicalArgs).
func sameCall(step int, s *Step, c agent.ToolCall) error {
	made := s.Status == agent.StatusOK || s.Status == agent.StatusError
	if !made || s.Action != c.Action || s.Tool != c.Tool || s.Operation != c.Operation {
		return nondeterministic("step %d recorded %s, the program now calls %q (%s.%s)", step,
			describeStep(s.Action, s.Kind, s.Tool, s.Operation, s.Status), c.Action, c.Tool, c.Operation)
	}
	now, err := agent.CanonicalArgs(c.Args)
	if err != nil {
		return err
	}
	recorded, err := CanonicalJSON(s.Args)
	if err != nil {
		return fmt.Errorf("step %d: recorded args: %w", step, err)
	}
	if !bytes.Equal(now, recorded) {
		return nondeterministic("step %d recorded %s.%s with args %s, the program now sends %s",
			step, c.Tool, c.Operation, recorded, now)
	}
	return nil
}

// describeStep names a step in a nondeterminism detail:
// "post" (call ledger.postEntry, ok).
func describeStep(action, kind, toolName, operation, status string) string {
	what := kind
	if toolName != "" {
		what += " " + toolName + "." + operation
	}
	return fmt.Sprintf("%q (%s, %s)", action, what, status)
}

// CanonicalJSON returns the canonical form (agent.CanonicalJSON) of a
// recorded JSON value; empty is the empty object (a call without
// arguments).
func CanonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []byte("{}"), nil
	}
	return agent.CanonicalJSON(raw)
}
