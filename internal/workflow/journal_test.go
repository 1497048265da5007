package workflow

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// gatedSteps is a Store whose AppendSteps records each batch's steps and,
// for the first batch, waits for gate before answering err.
type gatedSteps struct {
	Store
	gate chan struct{}
	err  error

	mu      sync.Mutex
	batches [][]int
}

func (g *gatedSteps) AppendSteps(_ context.Context, _ string, steps ...StepWrite) error {
	var nums []int
	for _, sw := range steps {
		nums = append(nums, sw.Step.Step)
	}
	g.mu.Lock()
	first := len(g.batches) == 0
	g.batches = append(g.batches, nums)
	g.mu.Unlock()
	if first {
		<-g.gate
	}
	return g.err
}

func (g *gatedSteps) written() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.batches)
}

func newJournal(st Store) *journal {
	r := New(Options{Store: st, Owner: "replica-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &journal{r: r, wf: &Workflow{ID: "wf_1"}, ctx: context.Background()}
}

func journalStep(n int) *Step { return &Step{WorkflowID: "wf_1", Seq: n, Step: n} }

// eventually polls cond every millisecond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

// TestJournalWritesInTheBackgroundAndHandsTheRestToTheEnd checks the
// journal's order of writes: the newest step is held; a released step is
// written in the background, and steps released meanwhile wait for that
// write, then go with the end.
func TestJournalWritesInTheBackgroundAndHandsTheRestToTheEnd(t *testing.T) {
	t.Parallel()
	st := &gatedSteps{gate: make(chan struct{})}
	j := newJournal(st)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.add(journalStep(1), nil, nil))
	if got := st.written(); len(got) != 0 {
		t.Fatalf("the held step was written: %v", got)
	}
	must(j.release()) // a read goes out: step 1 is written meanwhile
	must(j.add(journalStep(2), nil, nil))
	must(j.release()) // step 2 waits for step 1's write
	must(j.add(journalStep(3), nil, nil))
	eventually(t, "step 1's write", func() bool { return len(st.written()) == 1 })

	type taken struct {
		stored []Step
		last   []StepWrite
		err    error
	}
	ended := make(chan taken, 1)
	go func() {
		stored, last, err := j.take()
		ended <- taken{stored, last, err}
	}()
	eventually(t, "the end to take step 2", func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return len(j.queued) == 0
	})
	select {
	case <-ended:
		t.Fatal("the end did not wait for the write in flight")
	case <-time.After(10 * time.Millisecond):
	}
	close(st.gate)
	got := <-ended
	must(got.err)
	if diff := cmp.Diff([][]int{{1}}, st.written()); diff != "" {
		t.Errorf("batches written (-want +got):\n%s", diff)
	}
	if len(got.stored) != 1 || got.stored[0].Step != 1 {
		t.Errorf("stored before the end: %+v, want step 1", got.stored)
	}
	var last []int
	for _, sw := range got.last {
		last = append(last, sw.Step.Step)
	}
	if diff := cmp.Diff([]int{2, 3}, last); diff != "" {
		t.Errorf("steps left to the end (-want +got):\n%s", diff)
	}
}

// TestJournalStepsReleasedMeanwhileGoWithTheNextRelease checks that steps
// released while a write is in flight wait for the execution's next
// release and are written with its step, in one batch; or on their own
// once the linger has passed.
func TestJournalStepsReleasedMeanwhileGoWithTheNextRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		linger time.Duration
		want   [][]int
	}{
		{"next release", time.Hour, [][]int{{1}, {2, 3}}},
		{"linger", time.Millisecond, [][]int{{1}, {2}, {3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &gatedSteps{gate: make(chan struct{})}
			j := newJournal(st)
			j.lingerFor = tc.linger
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(j.add(journalStep(1), nil, nil))
			must(j.release()) // step 1's write is in flight
			must(j.add(journalStep(2), nil, nil))
			must(j.release()) // step 2 is queued behind it
			close(st.gate)
			eventually(t, "step 1's write", func() bool {
				j.mu.Lock()
				defer j.mu.Unlock()
				return len(j.steps) >= 1
			})
			if tc.linger == time.Millisecond {
				eventually(t, "step 2 written after the linger", func() bool { return len(st.written()) == 2 })
			} else if got := st.written(); len(got) != 1 {
				t.Fatalf("step 2 was written before the next release: %v", got)
			}
			must(j.add(journalStep(3), nil, nil))
			must(j.flush())
			if diff := cmp.Diff(tc.want, st.written()); diff != "" {
				t.Errorf("batches written (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJournalFlushStoresEverything checks that flush, which comes before a
// call unsafe to repeat, returns once every step is stored.
func TestJournalFlushStoresEverything(t *testing.T) {
	t.Parallel()
	st := &gatedSteps{gate: make(chan struct{})}
	j := newJournal(st)
	if err := j.add(journalStep(1), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.release(); err != nil {
		t.Fatal(err)
	}
	if err := j.add(journalStep(2), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := heldUntilOpened(t, st.gate, "flush returned", j.flush); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{1}, {2}}, st.written()); diff != "" {
		t.Errorf("batches written (-want +got):\n%s", diff)
	}
	if len(j.steps) != 2 {
		t.Errorf("%d steps stored, want 2", len(j.steps))
	}
}

// TestJournalStoresACompletionBeforeARead checks beforeRead: a read after
// a step that carries a completion waits until that step is stored; a read
// after any other step goes out while it is written.
func TestJournalStoresACompletionBeforeARead(t *testing.T) {
	t.Parallel()
	st := &gatedSteps{gate: make(chan struct{})}
	j := newJournal(st)
	if err := j.add(journalStep(1), nil, &Completion{WorkflowID: "wf_1", N: 1, Step: 1}); err != nil {
		t.Fatal(err)
	}
	if err := heldUntilOpened(t, st.gate, "the read went out", j.beforeRead); err != nil {
		t.Fatal(err)
	}
	if j.answers != 0 {
		t.Errorf("%d completions counted as not stored, want 0", j.answers)
	}

	plain := &gatedSteps{gate: make(chan struct{})}
	j = newJournal(plain)
	if err := j.add(journalStep(1), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.beforeRead(); err != nil { // returns with step 1's write in flight
		t.Fatal(err)
	}
	close(plain.gate)
	if err := j.flush(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{1}}, plain.written()); diff != "" {
		t.Errorf("batches written (-want +got):\n%s", diff)
	}
}

// TestJournalStopsAfterAFailedWrite checks that a write failing in the
// background stops the execution at its next step, and at its end.
func TestJournalStopsAfterAFailedWrite(t *testing.T) {
	t.Parallel()
	st := &gatedSteps{gate: make(chan struct{}), err: errors.New("disk full")}
	close(st.gate)
	j := newJournal(st)
	if err := j.add(journalStep(1), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.release(); err != nil {
		t.Fatal(err)
	}
	if err := j.wait(); err == nil {
		t.Fatal("a failed write was not reported")
	}
	if err := j.add(journalStep(2), nil, nil); err == nil {
		t.Error("a step was added after a failed write")
	}
	if _, _, err := j.take(); err == nil {
		t.Error("the end was taken after a failed write")
	}
	if diff := cmp.Diff([][]int{{1}}, st.written()); diff != "" {
		t.Errorf("batches written (-want +got):\n%s", diff)
	}
}

// renewals is a Store that notes the workflows whose leases are renewed.
type renewals struct {
	Store
	ids []string
}

func (s *renewals) RenewLease(_ context.Context, _ string, ids []string, _ time.Time) (LeaseStatus, error) {
	s.ids = append(s.ids, ids...)
	return LeaseStatus{}, nil
}

// TestLeasesOfWorkflowsBeingStoredAreNotRenewed checks that a workflow
// whose execution began while Start stores it is left out of lease
// renewals until stored: renewing a lease not yet stored would report it
// lost and stop the execution.
func TestLeasesOfWorkflowsBeingStoredAreNotRenewed(t *testing.T) {
	t.Parallel()
	st := &renewals{}
	r := New(Options{Store: st, Owner: "replica-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.running["wf_stored"] = func(error) {}
	r.running["wf_being_stored"] = func(error) {}
	r.creating["wf_being_stored"] = true
	r.renew(context.Background())
	if diff := cmp.Diff([]string{"wf_stored"}, st.ids); diff != "" {
		t.Errorf("renewed (-want +got):\n%s", diff)
	}
}

// heldUntilOpened runs fn while a write waits on gate, checks that fn has
// not returned 10 ms later (saying what it did if it has), then opens the
// gate and returns fn's error.
func heldUntilOpened(t *testing.T, gate chan struct{}, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		t.Fatalf("%s (%v) while the step was being written", what, err)
	case <-time.After(10 * time.Millisecond):
	}
	close(gate)
	return <-done
}
