package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

func testWorkflowLeaseEnforced(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "triage", "replica-a", 0))
	rec := record("acme", "workflow.step", 1)
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-b", written(newStep(w.ID, 1), rec)), "another owner's step")
	wantLeaseLost(t, s.RecordIntent(ctx, "replica-b", workflow.Intent{WorkflowID: w.ID, Step: 1, At: base}), "another owner's intent")
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-b", answered(completion(w, 1, `{}`), 1)), "another owner's completion")
	done := *w
	done.Status, done.Outcome = workflow.Completed, "ok"
	wantLeaseLost(t, s.FinishWorkflow(ctx, "replica-b", &done, []*audit.Record{record("acme", "workflow.finish", 2)}), "another owner's finish")
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-a", written(newStep("wf_nope", 1))), "step of an unknown workflow")

	steps, err := s.Steps(ctx, w.ID, 0)
	must(t, err, "steps")
	ins, err := s.Intents(ctx, w.ID)
	must(t, err, "intents")
	comps, err := s.Completions(ctx, w.ID)
	must(t, err, "completions")
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if len(steps)+len(ins)+len(comps) != 0 || got.Status != workflow.Running || got.Owner != "replica-a" {
		t.Errorf("refused writes left %d steps, %d intents, %d completions, status %q, owner %q",
			len(steps), len(ins), len(comps), got.Status, got.Owner)
	}
	verifyOK(t, s, "acme", 0)

	// The owner's writes go through.
	must(t, s.AppendSteps(ctx, "replica-a", written(newStep(w.ID, 1), rec)), "owner's step")
	finish(t, s, "replica-a", w)
}

func testWorkflowRenewCancelRelease(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	mine := create(t, s, newWorkflow("acme", "triage", "replica-a", 0))
	cancelled := create(t, s, newWorkflow("acme", "triage", "replica-a", 1))
	done := create(t, s, newWorkflow("acme", "triage", "replica-a", 2))
	theirs := create(t, s, newWorkflow("acme", "triage", "replica-b", 3))
	finish(t, s, "replica-a", done)

	lease := base.Add(time.Hour)
	got, taken, err := s.RequestCancel(ctx, "acme", cancelled.ID, "replica-c", lease)
	must(t, err, "request cancel")
	if !got.CancelRequested || got.Status != workflow.Running || got.ID != cancelled.ID || taken || got.Owner != "replica-a" {
		t.Errorf("RequestCancel returned cancel %v status %q; want a running workflow marked", got.CancelRequested, got.Status)
	}
	got, taken, err = s.RequestCancel(ctx, "acme", done.ID, "replica-c", lease)
	must(t, err, "request cancel of a finished workflow")
	if diff := cmp.Diff(done, got); diff != "" || taken {
		t.Errorf("RequestCancel changed a finished workflow (-want +got):\n%s", diff)
	}
	_, _, err = s.RequestCancel(ctx, "globex", mine.ID, "replica-c", lease)
	wantCode(t, err, problem.NotFound, "cancel another tenant's workflow")
	_, _, err = s.RequestCancel(ctx, "acme", "wf_nope", "replica-c", lease)
	wantCode(t, err, problem.NotFound, "cancel an unknown workflow")

	until := base.Add(2 * time.Hour)
	st, err := s.RenewLease(ctx, "replica-a", []string{mine.ID, cancelled.ID, done.ID, theirs.ID, "wf_gone"}, until)
	must(t, err, "renew")
	want := workflow.LeaseStatus{Lost: []string{theirs.ID, "wf_gone"}, CancelRequested: []string{cancelled.ID}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("RenewLease (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		w     *workflow.Workflow
		lease time.Time
	}{{mine, until}, {cancelled, until}, {theirs, base.Add(time.Hour)}} {
		got, err := s.Workflow(ctx, "acme", tc.w.ID)
		must(t, err, "workflow")
		if !got.LeaseUntil.Equal(tc.lease) {
			t.Errorf("%s lease until %v, want %v", tc.w.Goal, got.LeaseUntil, tc.lease)
		}
	}
	if st, err := s.RenewLease(ctx, "replica-a", nil, until); err != nil || len(st.Lost)+len(st.CancelRequested) != 0 {
		t.Errorf("RenewLease of nothing = %+v, %v", st, err)
	}

	// Only the owner can release; a released workflow is claimable at once.
	must(t, s.ReleaseLease(ctx, "replica-b", mine.ID), "release by another replica")
	if got, _ := s.Workflow(ctx, "acme", mine.ID); got == nil || got.Owner != "replica-a" {
		t.Fatalf("another replica released replica-a's lease: %+v", got)
	}
	must(t, s.ReleaseLease(ctx, "replica-a", mine.ID), "release")
	st, err = s.RenewLease(ctx, "replica-a", []string{mine.ID}, until)
	must(t, err, "renew after release")
	if diff := cmp.Diff(workflow.LeaseStatus{Lost: []string{mine.ID}}, st); diff != "" {
		t.Errorf("RenewLease after release (-want +got):\n%s", diff)
	}
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-a", written(newStep(mine.ID, 1))), "step after release")

	claimed, err := s.ClaimExpired(ctx, "replica-c", base, base.Add(time.Minute), 10)
	must(t, err, "claim")
	if diff := cmp.Diff([]string{mine.ID}, workflowIDs(claimed)); diff != "" {
		t.Fatalf("ClaimExpired after release (-want +got):\n%s", diff)
	}
	if c := claimed[0]; c.Owner != "replica-c" || !c.LeaseUntil.Equal(base.Add(time.Minute)) || c.Goal != mine.Goal {
		t.Errorf("claimed workflow: owner %q lease %v goal %q", c.Owner, c.LeaseUntil, c.Goal)
	}
	must(t, s.AppendSteps(ctx, "replica-c", written(newStep(mine.ID, 1))), "new owner's step")
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-a", written(newStep(mine.ID, 2))), "old owner's step")
}

func testWorkflowClaimExpired(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	now := base.Add(time.Hour)
	lapsed := func(w *workflow.Workflow, ago time.Duration) *workflow.Workflow {
		w.LeaseUntil = now.Add(-ago)
		return create(t, s, w)
	}
	old := lapsed(newWorkflow("acme", "triage", "dead", 0), time.Minute)
	other := lapsed(newWorkflow("globex", "triage", "dead", 1), time.Second)
	edge := lapsed(newWorkflow("acme", "triage", "dead", 2), time.Microsecond)
	lapsed(newWorkflow("acme", "triage", "alive", 3), -time.Minute) // still held
	lapsed(newWorkflow("acme", "triage", "alive", 4), 0)            // lapses only after now
	done := lapsed(newWorkflow("acme", "triage", "dead", 5), time.Hour)
	finish(t, s, "dead", done)

	until := now.Add(15 * time.Second)
	first, err := s.ClaimExpired(ctx, "replica-c", now, until, 2)
	must(t, err, "claim two")
	second, err := s.ClaimExpired(ctx, "replica-c", now, until, 2)
	must(t, err, "claim the rest")
	if len(first) != 2 || len(second) != 1 {
		t.Fatalf("claims of limit 2 took %d then %d, want 2 then 1", len(first), len(second))
	}
	got := workflowIDs(append(first, second...))
	slices.Sort(got)
	want := []string{old.ID, other.ID, edge.ID}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
	if !slices.IsSortedFunc(first, func(a, b *workflow.Workflow) int { return strings.Compare(a.ID, b.ID) }) {
		t.Errorf("claimed workflows not by id: %v", workflowIDs(first))
	}
	for _, w := range append(first, second...) {
		if w.Owner != "replica-c" || !w.LeaseUntil.Equal(until) || w.Status != workflow.Running {
			t.Errorf("claimed %s: owner %q lease %v status %q", w.ID, w.Owner, w.LeaseUntil, w.Status)
		}
	}
	again, err := s.ClaimExpired(ctx, "replica-d", now, until, 10)
	must(t, err, "claim again")
	if len(again) != 0 {
		t.Errorf("a second replica claimed live leases: %v", workflowIDs(again))
	}
	none, err := s.ClaimExpired(ctx, "replica-d", now, until, 0)
	if err != nil || len(none) != 0 {
		t.Errorf("ClaimExpired limit 0 = %v, %v", workflowIDs(none), err)
	}
}

func testWorkflowClaimConcurrent(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	const n, replicas = 40, 4
	for i := range n {
		w := newWorkflow("acme", "triage", "dead", i)
		w.LeaseUntil = base
		create(t, s, w)
	}
	now := base.Add(time.Second)
	claims := make([][]string, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for r := range replicas {
		wg.Go(func() {
			owner := fmt.Sprintf("replica-%d", r)
			for {
				wfs, err := s.ClaimExpired(ctx, owner, now, now.Add(time.Minute), 3)
				if err != nil {
					errs[r] = err
					return
				}
				for _, w := range wfs {
					if w.Owner != owner {
						errs[r] = fmt.Errorf("claimed %s but it is owned by %q", w.ID, w.Owner)
						return
					}
					claims[r] = append(claims[r], w.ID)
				}
				if len(wfs) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]string{}
	for r, ids := range claims {
		must(t, errs[r], fmt.Sprintf("replica %d", r))
		for _, id := range ids {
			if prev, ok := seen[id]; ok {
				t.Errorf("%s claimed by %s and replica-%d", id, prev, r)
			}
			seen[id] = fmt.Sprintf("replica-%d", r)
		}
	}
	if len(seen) != n {
		t.Errorf("%d workflows claimed, want %d", len(seen), n)
	}
	for id, owner := range seen {
		w, err := s.Workflow(ctx, "acme", id)
		must(t, err, "workflow")
		if w.Owner != owner {
			t.Errorf("%s claimed by %s is owned by %s", id, owner, w.Owner)
		}
	}
}
