package main

import (
	"context"
	"time"
)

// After a burst of executions (at least burstFloor running at once) drains
// to an eighth of its peak, the server asks the Go runtime for one
// collection. At --gc-percent 400 the collector's next goal, set while the
// burst's stacks and objects were live, stands far above what remains, so
// without this no collection runs before the next burst, which then grows
// into fresh memory instead of reusing the last one's: at 5,000 LLM
// workflows, 1.6 to 1.9 times the memory, every page of it faulted anew
// (docs/performance.md, "Page faults"). A steady stream never reaches the
// floor and is left to the collector's own pacing.
const (
	burstFloor = 500
	burstEvery = 250 * time.Millisecond
)

// burstWatch follows the executions running and says when a burst has
// drained.
type burstWatch struct {
	peak int
}

// observe takes the executions running now and reports whether a burst
// has just drained to an eighth of its peak.
func (b *burstWatch) observe(running int) bool {
	b.peak = max(b.peak, running)
	if b.peak < burstFloor || running > b.peak/8 {
		return false
	}
	b.peak = 0
	return true
}

// collectAfterBursts samples running at each interval until ctx ends and
// runs collect, on a goroutine of its own, each time a burst drains.
func collectAfterBursts(ctx context.Context, every time.Duration, running func() int, collect func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	var w burstWatch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if w.observe(running()) {
				go collect()
			}
		}
	}
}

// runningOf adapts the runner's Executions to the executions running here,
// queued ones included (they hold memory too).
func runningOf(executions func() (running, queued int)) func() int {
	return func() int {
		r, q := executions()
		return r + q
	}
}
