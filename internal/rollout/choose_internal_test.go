package rollout

import (
	"fmt"
	"testing"
)

// TestStickyProgramsAreBounded: a PUT compiles its sticky whether or not
// its rollout starts, so a caller sending ever new expressions must not
// grow the compiled ones without bound.
func TestStickyProgramsAreBounded(t *testing.T) {
	var p programs
	for i := range 3 * maxPrograms {
		if _, msg := p.compile(fmt.Sprintf("goal + '%d'", i)); msg != "" {
			t.Fatalf("compile %d: %s", i, msg)
		}
	}
	p.mu.Lock()
	n := len(p.m)
	p.mu.Unlock()
	if n > maxPrograms {
		t.Errorf("%d sticky programs kept, want at most %d", n, maxPrograms)
	}
	if prg, msg := p.compile("goal + '1'"); prg == nil || msg != "" {
		t.Errorf("a sticky compiled again: %v %q", prg, msg)
	}
}
