package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/workflow"
)

// hookedStore is the server's store telling a test what the server did
// with idempotency keys, which no response shows while a request runs.
type hookedStore struct {
	httpapi.Store
	// begun receives what BeginIdempotent found when it found a live entry.
	begun chan idempotency.Entry
	// extended receives the new LockedUntil of each renewed lock.
	extended chan time.Time
	// found receives each workflow the server found by an idempotency key.
	found chan *workflow.Workflow
}

// hookedWorkflows is the server's workflow store telling a hookedStore
// which workflows it found by their keys.
type hookedWorkflows struct {
	workflow.Store
	found chan<- *workflow.Workflow
}

func (s hookedWorkflows) WorkflowByKey(ctx context.Context, tenant, key string) (*workflow.Workflow, error) {
	wf, err := s.Store.WorkflowByKey(ctx, tenant, key)
	if err == nil {
		tell(s.found, wf)
	}
	return wf, err
}

// hookStore wraps the harness's store. Each channel holds a hundred calls;
// calls beyond them are not told, so a test never holds the server up.
func hookStore(s *hookedStore) option {
	s.begun = make(chan idempotency.Entry, 100)
	s.extended = make(chan time.Time, 100)
	s.found = make(chan *workflow.Workflow, 100)
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		s.Store = d.Store
		d.Store = s
		d.Workflows = hookedWorkflows{Store: d.Workflows, found: s.found}
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

// waitAttached waits until the server has found the workflow alice's
// invoke created with key: the request that found it attaches to it.
func waitAttached(t *testing.T, s *hookedStore, key string) {
	t.Helper()
	for {
		wf := receive(t, s.found, "repeat of key "+key)
		if strings.HasSuffix(wf.IdempotencyKey, "\n"+key) {
			return
		}
	}
}

// waitLinked waits until alice's invoke of fraud-triage with key has
// created its workflow, so a repeat can attach to it.
func waitLinked(t *testing.T, h *harness, key string) {
	t.Helper()
	k := workflow.IdempotencyKey("alice", "/v1/agents/fraud-triage/invoke", key)
	waitFor(t, func() bool {
		_, err := h.DB.WorkflowByKey(t.Context(), "acme", k)
		return err == nil
	})
}
