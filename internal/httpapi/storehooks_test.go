package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/idempotency"
)

// hookedStore is the server's store telling a test what the server did
// with idempotency keys, which no response shows while a request runs.
type hookedStore struct {
	httpapi.Store
	// begun receives what BeginIdempotent found when it found a live entry.
	begun chan idempotency.Entry
	// extended receives the new LockedUntil of each renewed lock.
	extended chan time.Time
}

// hookStore wraps the harness's store. Each channel holds a hundred calls;
// calls beyond them are not told, so a test never holds the server up.
func hookStore(s *hookedStore) option {
	s.begun = make(chan idempotency.Entry, 100)
	s.extended = make(chan time.Time, 100)
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		s.Store = d.Store
		d.Store = s
	}
}

func (s *hookedStore) BeginIdempotent(ctx context.Context, e idempotency.Entry) (idempotency.Entry, bool, error) {
	got, created, err := s.Store.BeginIdempotent(ctx, e)
	if err == nil && !created {
		tell(s.begun, got)
	}
	return got, created, err
}

func (s *hookedStore) ExtendIdempotent(ctx context.Context, k idempotency.Key, until time.Time) error {
	err := s.Store.ExtendIdempotent(ctx, k, until)
	if err == nil {
		tell(s.extended, until)
	}
	return err
}

func tell[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// receive returns the next value of ch, failing t after ten seconds.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
		var zero T
		return zero
	}
}

// waitAttached waits until the server has found key running and linked to
// a workflow: the request that found it attaches to that workflow.
func waitAttached(t *testing.T, s *hookedStore, key string) {
	t.Helper()
	for {
		e := receive(t, s.begun, "repeat of key "+key)
		if e.Key.Key == key && e.State == idempotency.Running && e.WorkflowID != "" {
			return
		}
	}
}

// waitLinked waits until alice's invoke of fraud-triage with key has
// linked the key to its workflow, so a repeat can attach to it.
func waitLinked(t *testing.T, h *harness, key string) {
	t.Helper()
	k := idempotency.Key{Tenant: "acme", Principal: "alice", Method: "POST", Path: "/v1/agents/fraud-triage/invoke", Key: key}
	waitFor(t, func() bool {
		e, created, err := h.DB.BeginIdempotent(t.Context(), idempotency.Entry{Key: k, Fingerprint: "peek", CreatedAt: time.Now()})
		return err == nil && !created && e.WorkflowID != ""
	})
}
