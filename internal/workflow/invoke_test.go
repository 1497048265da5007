package workflow_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

// newInvoker is an invoker over a runner of db whose key clock is now.
func newInvoker(t *testing.T, db *sqlite.DB, now func() time.Time) *workflow.Invoker {
	t.Helper()
	r := newRunner(db, "replica-a", &ledger{})
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &workflow.Invoker{Runner: r, Workflows: db, Now: now}
}

// keyed is an invocation of settle by alice, keyed by key, for the request
// of fingerprint fp; its tenant is left to the caller's.
func keyed(key, fp string) workflow.Invocation {
	req := request("settle")
	req.Tenant = ""
	req.IdempotencyKey = workflow.IdempotencyKey("alice", "/v1/agents/settle/invoke", key)
	req.RequestHash = fp
	return workflow.Invocation{StartRequest: req, TTL: time.Hour}
}

// invoke invokes in and waits for its workflow to end.
func invoke(t *testing.T, iv *workflow.Invoker, in workflow.Invocation) workflow.Invoked {
	t.Helper()
	got, err := iv.Invoke(context.Background(), in)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if _, err := iv.Runner.Wait(context.Background(), "acme", got.Workflow.ID); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestInvokeWithAKey(t *testing.T) {
	ctx := context.Background()

	t.Run("a repeat attaches to the first workflow", func(t *testing.T) {
		iv := newInvoker(t, setup(t), time.Now)
		first := invoke(t, iv, keyed("k-1", "fp-a"))
		if first.Repeat {
			t.Errorf("first invocation: repeat, want a new workflow")
		}
		again := invoke(t, iv, keyed("k-1", "fp-a"))
		if !again.Repeat || again.Workflow.ID != first.Workflow.ID {
			t.Errorf("repeat = %s (repeat %t), want %s (repeat true)", again.Workflow.ID, again.Repeat, first.Workflow.ID)
		}
		other := invoke(t, iv, keyed("k-2", "fp-a"))
		if other.Repeat || other.Workflow.ID == first.Workflow.ID {
			t.Errorf("another key: %s (repeat %t), want a new workflow", other.Workflow.ID, other.Repeat)
		}
	})

	t.Run("another fingerprint is refused", func(t *testing.T) {
		iv := newInvoker(t, setup(t), time.Now)
		invoke(t, iv, keyed("k-1", "fp-a"))
		_, err := iv.Invoke(ctx, keyed("k-1", "fp-b"))
		if !errors.Is(err, workflow.ErrKeyReused) || !problem.Is(err, problem.IdempotencyKeyReused) {
			t.Errorf("invoke with another fingerprint: %v, want idempotency-key-reused", err)
		}
	})

	t.Run("an expired key starts a new workflow", func(t *testing.T) {
		db := setup(t)
		iv := newInvoker(t, db, time.Now)
		late := &workflow.Invoker{Runner: iv.Runner, Workflows: db, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
		first := invoke(t, iv, keyed("k-1", "fp-a"))
		// Past the TTL the key no longer binds: even another request may take it.
		second := invoke(t, late, keyed("k-1", "fp-b"))
		if second.Repeat || second.Workflow.ID == first.Workflow.ID {
			t.Errorf("after the TTL: %s (repeat %t), want a new workflow", second.Workflow.ID, second.Repeat)
		}
		got, err := db.WorkflowByKey(ctx, "acme", keyed("k-1", "").IdempotencyKey)
		if err != nil || got.ID != second.Workflow.ID {
			t.Errorf("the key's workflow = %v, %v; want %s", got, err, second.Workflow.ID)
		}
	})

	t.Run("a zero TTL never expires", func(t *testing.T) {
		db := setup(t)
		in := keyed("k-1", "fp-a")
		in.TTL = 0
		iv := newInvoker(t, db, time.Now)
		first := invoke(t, iv, in)
		late := &workflow.Invoker{Runner: iv.Runner, Workflows: db, Now: func() time.Time { return time.Now().Add(24 * 365 * time.Hour) }}
		again := invoke(t, late, in)
		if !again.Repeat || again.Workflow.ID != first.Workflow.ID {
			t.Errorf("a year on: %s (repeat %t), want %s", again.Workflow.ID, again.Repeat, first.Workflow.ID)
		}
	})

	t.Run("a start that loses its key attaches", func(t *testing.T) {
		iv := newInvoker(t, setup(t), time.Now)
		first := invoke(t, iv, keyed("k-1", "fp-a"))
		// Start does not look the key up: the store refuses it, as it
		// refuses the loser of a race.
		got, err := iv.Start(ctx, keyed("k-1", "fp-a"))
		if err != nil || !got.Repeat || got.Workflow.ID != first.Workflow.ID {
			t.Errorf("start with a taken key = %+v, %v; want a repeat of %s", got, err, first.Workflow.ID)
		}
		if _, err := iv.Start(ctx, keyed("k-1", "fp-b")); !errors.Is(err, workflow.ErrKeyReused) {
			t.Errorf("start with a taken key and another fingerprint: %v, want ErrKeyReused", err)
		}
	})

	t.Run("concurrent invocations make one workflow", func(t *testing.T) {
		db := setup(t)
		iv := newInvoker(t, db, time.Now)
		const n = 8
		got := make([]workflow.Invoked, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i], errs[i] = iv.Invoke(ctx, keyed("k-1", "fp-a")) })
		}
		wg.Wait()
		created := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("invocation %d: %v", i, errs[i])
			}
			if got[i].Workflow.ID != got[0].Workflow.ID {
				t.Errorf("invocation %d got %s, invocation 0 %s", i, got[i].Workflow.ID, got[0].Workflow.ID)
			}
			if !got[i].Repeat {
				created++
			}
		}
		if created != 1 {
			t.Errorf("%d invocations started a workflow, want 1", created)
		}
		if _, err := iv.Runner.Wait(ctx, "acme", got[0].Workflow.ID); err != nil {
			t.Fatal(err)
		}
		all, err := db.ListWorkflows(ctx, "acme", workflow.ListFilter{Limit: 100})
		if err != nil || len(all) != 1 {
			t.Errorf("stored workflows: %d, %v; want 1", len(all), err)
		}
	})
}

func TestFingerprintIgnoresSpacingAndKeyOrder(t *testing.T) {
	a := workflow.Fingerprint([]byte(`{"goal": "settle", "context": {"a": 1, "b": 2}}`))
	b := workflow.Fingerprint([]byte(`{"context":{"b":2,"a":1},"goal":"settle"}`))
	if a != b {
		t.Errorf("fingerprints of one JSON value differ: %s, %s", a, b)
	}
	if c := workflow.Fingerprint([]byte(`{"goal": "settle up"}`)); c == a {
		t.Errorf("fingerprints of different values agree: %s", c)
	}
	if workflow.Fingerprint([]byte("not json")) == workflow.Fingerprint([]byte("not json!")) {
		t.Errorf("fingerprints of different bytes agree")
	}
}

// TestFingerprintKeepsEveryDigit: two bodies alike but for an integer
// past 2^53 that shares its double with the other's are two requests to
// an idempotency key, while a body of float64s keeps the fingerprint of
// its RFC 8785 form, which the key was stored with.
func TestFingerprintKeepsEveryDigit(t *testing.T) {
	body := func(account string) []byte {
		return []byte(`{"goal":"settle","context":{"account":` + account + `,"amount":2.50}}`)
	}
	if a, b := workflow.Fingerprint(body("1234567890123456789")), workflow.Fingerprint(body("1234567890123456788")); a == b {
		t.Errorf("the two bodies share a fingerprint: %s", a)
	}
	floats := body("1234567890123456800")
	canon, err := jcs.Transform(floats)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	if got, want := workflow.Fingerprint(floats), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint(%s) = %s, want %s, its RFC 8785 form's", floats, got, want)
	}
}
