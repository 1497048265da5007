package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

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

// TestCollectAfterBurstsSamplesTheRunner drives the sampling loop with a
// runner whose executions rise past the floor and drain: one collection
// runs, and the loop ends with its context.
func TestCollectAfterBurstsSamplesTheRunner(t *testing.T) {
	var running atomic.Int64
	running.Store(1000)
	collected := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		collectAfterBursts(ctx, time.Millisecond, runningOf(func() (int, int) { return int(running.Load()), 0 }), func() { collected <- struct{}{} })
	}()
	time.Sleep(20 * time.Millisecond) // the peak is seen
	select {
	case <-collected:
		t.Fatal("collected while the burst ran")
	default:
	}
	running.Store(0)
	select {
	case <-collected:
	case <-time.After(5 * time.Second):
		t.Fatal("no collection after the burst drained")
	}
	time.Sleep(20 * time.Millisecond)
	if len(collected) != 0 {
		t.Errorf("%d more collections after one burst, want none", len(collected))
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
}
