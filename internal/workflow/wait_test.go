package workflow

import (
	"context"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// emptyStore holds no workflows.
type emptyStore struct{ Store }

func (emptyStore) Workflow(_ context.Context, _, id string) (*Workflow, error) {
	return nil, problem.New(problem.NotFound, "no workflow %s", id)
}

// TestWaitHandsAnEndOnlyToItsTenant checks that a workflow ending on this
// replica is handed to waiters of its tenant only.
func TestWaitHandsAnEndOnlyToItsTenant(t *testing.T) {
	t.Parallel()
	r := New(Options{Store: emptyStore{}})
	const id = "wf_1"
	r.running[id] = func(error) {}
	type waited struct {
		wf  *Workflow
		err error
	}
	wait := func(tenant string) <-chan waited {
		c := make(chan waited, 1)
		go func() {
			wf, err := r.Wait(context.Background(), tenant, id)
			c <- waited{wf, err}
		}()
		return c
	}
	acme, globex := wait("acme"), wait("globex")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		r.hub.mu.Lock()
		n := len(r.hub.subs[id])
		r.hub.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters subscribed after 30 s, want 2", n)
		}
	}
	r.mu.Lock()
	delete(r.running, id)
	r.mu.Unlock()
	r.hub.finish(id, &ending{wf: &Workflow{ID: id, Tenant: "acme", Status: Completed}})

	if got := <-acme; got.err != nil || got.wf.Status != Completed {
		t.Errorf("acme: %+v, %v", got.wf, got.err)
	}
	if got := <-globex; !problem.Is(got.err, problem.NotFound) {
		t.Errorf("globex: %+v, %v; want not found", got.wf, got.err)
	}
}
