package page

import (
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
)

func TestSize(t *testing.T) {
	for in, want := range map[int]int{-1: Default, 0: Default, 1: 1, Max: Max, Max + 1: Max} {
		if got := Size(in); got != want {
			t.Errorf("Size(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"": Default, "1": 1, "200": 200} {
		if got, err := ParseSize("limit", in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"0", "201", "-3", "ten", "1.5"} {
		if _, err := ParseSize("limit", in); !problem.Is(err, problem.ValidationFailed) {
			t.Errorf("ParseSize(%q) = %v, want validation-failed", in, err)
		}
	}
}
