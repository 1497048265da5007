package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/workflow"
)

// finishedAt creates a workflow of tenant with a step, a completion and an
// invoke key, and ends it at the given time.
func finishedAt(t *testing.T, s Store, tenant string, i int, at time.Time) *workflow.Workflow {
	t.Helper()
	ctx := ctxOf(t)
	w := newWorkflow(tenant, "triage", "replica-a", i)
	w.IdempotencyKey, w.RequestHash = workflow.IdempotencyKey("user-1", "/v1/agents/triage/invoke", w.ID), "hash"
	create(t, s, w)
	must(t, s.AppendSteps(ctx, "replica-a", answered(completion(w, 1, `{"text": "hi"}`), 1)), "append a step with its completion")
	w.Status, w.Outcome, w.FinishedAt = workflow.Completed, "routed", at
	must(t, s.FinishWorkflow(ctx, "replica-a", w, nil), "finish "+w.ID)
	return w
}

func sweepRecord(tenant string, c retention.Counts) *audit.Record {
	return &audit.Record{Tenant: tenant, Actor: audit.Actor{Sub: "agentplane"}, Action: retention.ActionSweep,
		Resource: audit.Resource{Type: "workflow"}, Outcome: audit.Success, Details: audit.Details(c)}
}

// checkpoint is the audit.checkpoint record of a trim.
func checkpoint(tenant string, seq int64, hash string, n int64) *audit.Record {
	return &audit.Record{Tenant: tenant, Actor: audit.Actor{Sub: "agentplane"}, Action: audit.ActionCheckpoint,
		Resource: audit.Resource{Type: "audit"}, Outcome: audit.Success,
		Details: audit.Details(audit.Checkpoint{ThroughSeq: seq, ThroughHash: hash, Removed: n})}
}

// wantGone fails t unless w and everything recorded of it is gone; wantKept
// unless it is all there.
func wantGone(t *testing.T, s Store, w *workflow.Workflow, gone bool) {
	t.Helper()
	ctx := ctxOf(t)
	_, err := s.Workflow(ctx, w.Tenant, w.ID)
	_, kerr := s.WorkflowByKey(ctx, w.Tenant, w.IdempotencyKey)
	steps, serr := s.Steps(ctx, w.ID, 0)
	must(t, serr, "steps")
	comps, cerr := s.Completions(ctx, w.ID)
	must(t, cerr, "completions")
	if gone && (!problem.Is(err, problem.NotFound) || !problem.Is(kerr, problem.NotFound) || len(steps) != 0 || len(comps) != 0) {
		t.Errorf("%s: workflow err %v, by key err %v, %d steps, %d completions; want all gone", w.ID, err, kerr, len(steps), len(comps))
	}
	if !gone && (err != nil || kerr != nil || len(steps) != 1 || len(comps) != 1) {
		t.Errorf("%s: workflow err %v, by key err %v, %d steps, %d completions; want all kept", w.ID, err, kerr, len(steps), len(comps))
	}
}

// testRetentionSweep sweeps a tenant's finished workflows older than a
// limit, then every other tenant's: exactly those go, with their steps,
// completions, keys and replays; running, recent and other tenants' stay.
func testRetentionSweep(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	old, recent := base.Add(time.Minute), base.Add(3*time.Hour)
	cutoff := base.Add(time.Hour)
	a1 := finishedAt(t, s, "acme", 1, old)
	a2 := finishedAt(t, s, "acme", 2, old.Add(time.Second))
	a3 := finishedAt(t, s, "acme", 3, recent)
	running := create(t, s, newWorkflow("acme", "triage", "replica-a", 4))
	g1 := finishedAt(t, s, "globex", 5, old)
	r := newReplay("acme", a1.ID, "triage@2", 6)
	must(t, s.CreateReplay(ctx, r, replayRecord(r, 6)), "create replay")

	// A batch of one takes the oldest.
	swept, err := s.SweepWorkflows(ctx, retention.Scope{Tenant: "acme", Before: cutoff}, 1, sweepRecord)
	got := swept.Counts
	must(t, err, "sweep one")
	if got["acme"].Workflows != 1 || got["acme"].Replays != 1 || got["acme"].Steps != 1 || got["acme"].Completions != 1 {
		t.Errorf("first sweep counts = %+v, want the one oldest workflow with its step, completion and replay", got)
	}
	wantGone(t, s, a1, true)
	_, err = s.Replay(ctx, "acme", r.ID)
	wantCode(t, err, problem.NotFound, "replay of a swept workflow")
	wantGone(t, s, a2, false)

	swept, err = s.SweepWorkflows(ctx, retention.Scope{Tenant: "acme", Before: cutoff}, 100, sweepRecord)
	got = swept.Counts
	must(t, err, "sweep acme")
	if diff := cmp.Diff(map[string]int64{"acme": 1}, workflowsOf(got)); diff != "" {
		t.Errorf("second sweep (-want +got):\n%s", diff)
	}
	wantGone(t, s, a2, true)
	wantGone(t, s, a3, false)
	if _, err := s.Workflow(ctx, "acme", running.ID); err != nil {
		t.Errorf("running workflow after the sweep: %v", err)
	}
	wantGone(t, s, g1, false)

	// Every tenant but acme: globex's old one goes.
	swept, err = s.SweepWorkflows(ctx, retention.Scope{Except: []string{"acme"}, Before: cutoff}, 100, sweepRecord)
	got = swept.Counts
	must(t, err, "sweep the others")
	if diff := cmp.Diff(map[string]int64{"globex": 1}, workflowsOf(got)); diff != "" {
		t.Errorf("sweep of the other tenants (-want +got):\n%s", diff)
	}
	wantGone(t, s, g1, true)
	wantGone(t, s, a3, false)

	swept, err = s.SweepWorkflows(ctx, retention.Scope{Tenant: "acme", Before: cutoff}, 100, sweepRecord)
	got = swept.Counts
	must(t, err, "sweep again")
	if len(got) != 0 {
		t.Errorf("a sweep with nothing to delete deleted %+v", got)
	}
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: retention.ActionSweep})
	must(t, err, "query sweep records")
	if len(recs) != 2 {
		t.Fatalf("acme has %d retention.sweep records, want 2 (one per batch that deleted)", len(recs))
	}
	var c retention.Counts
	must(t, json.Unmarshal(recs[1].Details, &c), "sweep details")
	if c.Workflows != 1 || c.Replays != 1 {
		t.Errorf("first sweep record details = %+v", c)
	}
	verifyOK(t, s, "acme", 2+1) // two sweeps and the replay's record
}

func workflowsOf(m map[string]retention.Counts) map[string]int64 {
	out := map[string]int64{}
	for t, c := range m {
		out[t] = c.Workflows
	}
	return out
}

// testDeleteWorkflow deletes one finished workflow now; a running one is a
// conflict, another tenant's is not found.
func testDeleteWorkflow(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := finishedAt(t, s, "acme", 1, base.Add(time.Minute))
	running := create(t, s, newWorkflow("acme", "triage", "replica-a", 2))
	del := func(tenant, id string) (retention.Counts, error) {
		return s.DeleteWorkflow(ctx, tenant, id, record(tenant, retention.ActionDelete, 9))
	}
	_, err := del("acme", running.ID)
	wantCode(t, err, problem.Conflict, "delete a running workflow")
	_, err = del("globex", w.ID)
	wantCode(t, err, problem.NotFound, "delete another tenant's workflow")
	wantGone(t, s, w, false)
	c, err := del("acme", w.ID)
	must(t, err, "delete")
	if c.Workflows != 1 || c.Steps != 1 || c.Completions != 1 {
		t.Errorf("delete counts = %+v", c)
	}
	wantGone(t, s, w, true)
	_, err = del("acme", w.ID)
	wantCode(t, err, problem.NotFound, "delete again")
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: retention.ActionDelete})
	must(t, err, "query")
	if len(recs) != 1 || !json.Valid(recs[0].Details) || string(recs[0].Details) == "{}" {
		t.Errorf("workflow.delete records = %+v, want one with the counts", recs)
	}
}

// testRetentionLease: one owner holds a named lease until it lapses.
func testRetentionLease(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	held := func(owner string, now time.Time) bool {
		ok, err := s.TakeLease(ctx, "retention", owner, now, now.Add(time.Minute))
		must(t, err, "take lease")
		return ok
	}
	if !held("a", base) || held("b", base.Add(30*time.Second)) || !held("a", base.Add(30*time.Second)) {
		t.Fatal("a did not take and keep the lease, or b took it while a held it")
	}
	if !held("b", base.Add(2*time.Minute)) || held("a", base.Add(2*time.Minute)) {
		t.Error("b did not take the lapsed lease from a")
	}
}

// testCommittedWrites: every committed write moves the count of committed
// writes the retention sweeper paces itself by, by one, a sweep batch and
// an audit trim as much as a lease (the sweeper leaves its own out by
// counting them).
func testCommittedWrites(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	finishedAt(t, s, "acme", 1, base)
	must(t, s.AppendAudit(ctx, record("acme", "a", 1)), "append")
	writes := []struct {
		name string
		do   func() error
	}{
		{"take lease", func() error {
			_, err := s.TakeLease(ctx, "retention", "a", base, base.Add(time.Minute))
			return err
		}},
		{"sweep", func() error {
			_, err := s.SweepWorkflows(ctx, retention.Scope{Tenant: "acme", Before: base.Add(time.Hour)}, 10, sweepRecord)
			return err
		}},
		{"sweep with nothing to delete", func() error {
			_, err := s.SweepWorkflows(ctx, retention.Scope{Tenant: "acme", Before: base.Add(time.Hour)}, 10, sweepRecord)
			return err
		}},
		{"trim audit", func() error {
			_, err := s.TrimAudit(ctx, "acme", time.Now().Add(time.Hour), 1, checkpoint)
			return err
		}},
	}
	for _, w := range writes {
		before := s.CommittedWrites()
		must(t, w.do(), w.name)
		if after := s.CommittedWrites(); after != before+1 {
			t.Errorf("%s: CommittedWrites() = %d, %d before; want it one more", w.name, after, before)
		}
	}
}

// testAuditTrim removes old audit records behind checkpoints: the chain
// still verifies from the checkpoint anchoring its oldest record, and a
// record tampered with after it is still found.
func testAuditTrim(t *testing.T, s Store, h Hooks) {
	ctx := ctxOf(t)
	for i := 1; i <= 10; i++ {
		must(t, s.AppendAudit(ctx, record("acme", "a", i)), "append")
	}
	must(t, s.AppendAudit(ctx, record("globex", "a", 1)), "append other tenant")
	// record(i) is i seconds after base: 1..5 are older than 5.5 s.
	trimmed, err := s.TrimAudit(ctx, "acme", base.Add(5500*time.Millisecond), 100, checkpoint)
	n := trimmed.Removed
	must(t, err, "trim")
	if n != 5 {
		t.Fatalf("trim removed %d records, want 5", n)
	}
	rep, err := audit.Verify(ctx, s, "acme")
	must(t, err, "verify")
	if diff := cmp.Diff(audit.Report{OK: true, RecordsChecked: 6, AnchoredAtSeq: 5}, rep); diff != "" {
		t.Errorf("Verify after the trim (-want +got):\n%s", diff)
	}
	// A second trim in a batch of two: 6 and 7 go; the first checkpoint
	// (seq 11) stays, and the second (12) anchors the chain.
	trimmed, err = s.TrimAudit(ctx, "acme", base.Add(time.Hour), 2, checkpoint)
	n = trimmed.Removed
	must(t, err, "trim again")
	if n != 2 {
		t.Fatalf("second trim removed %d, want 2", n)
	}
	rep, err = audit.Verify(ctx, s, "acme")
	must(t, err, "verify")
	if diff := cmp.Diff(audit.Report{OK: true, RecordsChecked: 5, AnchoredAtSeq: 7}, rep); diff != "" {
		t.Errorf("Verify after the second trim (-want +got):\n%s", diff)
	}
	trimmed, err = s.TrimAudit(ctx, "acme", base, 100, checkpoint)
	n = trimmed.Removed
	must(t, err, "trim nothing")
	if n != 0 {
		t.Errorf("a trim with nothing old removed %d", n)
	}
	verifyOK(t, s, "globex", 1)
	tenants, err := s.AuditTenants(ctx)
	must(t, err, "audit tenants")
	if diff := cmp.Diff([]string{"acme", "globex"}, tenants); diff != "" {
		t.Errorf("AuditTenants (-want +got):\n%s", diff)
	}
	if h.TamperAudit == nil {
		return
	}
	h.TamperAudit(t, s, "acme", 9)
	rep, err = audit.Verify(ctx, s, "acme")
	must(t, err, "verify")
	bad := int64(9)
	if diff := cmp.Diff(audit.Report{OK: false, RecordsChecked: 2, FirstBadSeq: &bad, AnchoredAtSeq: 7}, rep); diff != "" {
		t.Errorf("Verify after tampering with seq 9 (-want +got):\n%s", diff)
	}
}
