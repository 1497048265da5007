package storetest

import (
	"testing"
	"time"
)

// WaitUntil polls cond every millisecond until it holds, failing t after
// ten seconds: a store's tests wait for what happens inside it this way
// (writes queued, say), never for a length of time.
func WaitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("not %s after 10 s", what)
		}
	}
}
