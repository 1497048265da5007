package main

import "testing"

func TestABurstIsCollectedOnceWhenItDrains(t *testing.T) {
	var w burstWatch
	steps := []struct {
		running int
		collect bool
	}{
		{16, false}, {40, false}, {0, false}, // a steady stream never reaches the floor
		{3000, false}, {5000, false}, {2000, false}, {626, false}, // draining, not yet an eighth
		{625, true},             // an eighth of 5,000
		{0, false}, {10, false}, // once per burst
		{499, false}, {0, false}, // under the floor
		{1200, false}, {150, true}, // the next burst
	}
	for i, s := range steps {
		if got := w.observe(s.running); got != s.collect {
			t.Fatalf("step %d (%d running): collect %t, want %t", i, s.running, got, s.collect)
		}
	}
}
