package tool

import (
	"strings"
	"testing"
)

func TestFirstLine(t *testing.T) {
	long := strings.Repeat("é", 250)
	for in, want := range map[string]string{
		"":                          "",
		"  Lists pets.  \nMore.\n":  "Lists pets.",
		"one line":                  "one line",
		long:                        strings.Repeat("é", 199) + "…",
		"\n\n  starts late\nsecond": "starts late",
	} {
		if got := FirstLine(in); got != want {
			t.Errorf("FirstLine(%q) = %q, want %q", in, got, want)
		}
	}
}
