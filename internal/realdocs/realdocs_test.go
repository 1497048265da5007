package realdocs

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLockFileWaitsForTheHolder checks that a second taker of the install
// lock waits while it is held (giving up when its context ends) and gets
// it once it is released.
func TestLockFileWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pkg-1.0.0.lock")
	unlock, err := lockFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v, want it to wait until its deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		unlock2, err := lockFile(t.Context(), path)
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	time.Sleep(150 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("lock after release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not taken after its release")
	}
}
