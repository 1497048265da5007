package httpapi_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/workflow"
)

// withRetention serves DELETE /v1/workflows/{id} from the harness's store.
func withRetention(cfg *httpapi.Config, d *httpapi.Deps) {
	d.Retention = &retention.Service{Store: d.Store.(retention.Store)}
}

// sweeperAt is a sweeper of the harness's store, one workflow a batch,
// whose clock reads at.
//
// Its batches are not held small by time (Target an hour: each doubles
// up to the full batch): with its clock ahead of the store's, the
// checkpoints a trim writes are old to it too, and trims of one record
// each, where a slow machine's timing kept them, removed one and wrote
// one forever.
func sweeperAt(h *harness, p retention.Policy, at time.Time) *retention.Sweeper {
	return &retention.Sweeper{Store: h.DB, Policy: p, Owner: "test", Batch: 1, AuditBatch: 7,
		Target: time.Hour, Now: func() time.Time { return at }}
}

// TestRetentionSweepsOnlyExpiredWorkflowsWhileInvokesRun: workflows that
// finished before the limit go, with their replays and invoke keys, batch
// by batch, while other invocations run; those, a running one and other
// tenants' stay. A finished one can then be deleted at once; a running one
// cannot.
func TestRetentionSweepsOnlyExpiredWorkflowsWhileInvokesRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withRetention)
	w := newFraudWorld(t, h)
	ctx := t.Context()
	invoke := func(key string) string {
		wf := w.invoke(t, w.admin, map[string]any{"goal": "triage", "idempotency_key": key,
			"context": map[string]any{"transaction_id": "tx-" + key}})
		return wf["workflow_id"].(string)
	}
	var old []string
	for i := range 3 {
		old = append(old, invoke(fmt.Sprintf("old-%d", i)))
	}
	replayer := h.token("acme", "workflows:replay tool:*")
	if r := h.do("POST", "/v1/workflows/"+old[0]+"/replay", replayer,
		map[string]any{"target_agent_version": "fraud-triage@1", "dry_run": true}); r.Status != 201 {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	time.Sleep(5 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(5 * time.Millisecond)

	// The sweep runs while invocations do.
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fresh []string
	)
	for i := range 6 {
		wg.Go(func() {
			id := invoke(fmt.Sprintf("new-%d", i))
			mu.Lock()
			fresh = append(fresh, id)
			mu.Unlock()
		})
	}
	res, err := sweeperAt(h, retention.Policy{Default: time.Hour}, cutoff.Add(time.Hour)).Sweep(ctx)
	wg.Wait()
	if err != nil || !res.Held {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	if res.Workflows.Workflows != 3 || res.Workflows.Replays != 1 || res.Workflows.Steps == 0 {
		t.Errorf("sweep deleted %+v, want the 3 old workflows with their steps and replay", res.Workflows)
	}
	for _, id := range old {
		if r := h.do("GET", "/v1/workflows/"+id, w.admin, nil); r.Status != 404 {
			t.Errorf("old workflow %s after the sweep: %d", id, r.Status)
		}
		steps, err := h.DB.Steps(ctx, id, 0)
		if err != nil || len(steps) != 0 {
			t.Errorf("old workflow %s has %d steps left (%v)", id, len(steps), err)
		}
		comps, err := h.DB.Completions(ctx, id)
		if err != nil || len(comps) != 0 {
			t.Errorf("old workflow %s has %d completions left (%v)", id, len(comps), err)
		}
	}
	if _, err := h.DB.WorkflowByKey(ctx, "acme", workflow.IdempotencyKey("alice", "/v1/agents/fraud-triage/invoke", "old-0")); !problem.Is(err, problem.NotFound) {
		t.Errorf("invoke key of a swept workflow: %v, want not found", err)
	}
	for _, id := range fresh {
		if r := h.do("GET", "/v1/workflows/"+id, w.admin, nil); r.Status != 200 {
			t.Errorf("workflow %s that finished after the limit: %d", id, r.Status)
		}
	}
	audTok := h.token("acme", "audit:read")
	var page auditPage
	h.do("GET", "/v1/audit/query?action=retention.sweep", audTok, nil).json(t, &page)
	if len(page.Records) != 3 {
		t.Errorf("retention.sweep records: %d, want one per batch (3)", len(page.Records))
	}

	// A running workflow is never swept, nor deleted.
	release := gate(t, w)
	done := make(chan response, 1)
	go func() {
		done <- h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-run"}})
	}()
	running := runningWorkflow(t, h, w.admin)
	res, err = sweeperAt(h, retention.Policy{Default: time.Hour}, time.Now().Add(2*time.Hour)).Sweep(ctx)
	if err != nil || res.Workflows.Workflows != int64(len(fresh)) {
		t.Errorf("sweep of everything finished: %+v, %v; want the %d finished", res.Workflows, err, len(fresh))
	}
	deleter := h.token("acme", "workflows:delete")
	if r := h.do("DELETE", "/v1/workflows/"+running, deleter, nil); r.Status != 409 {
		t.Errorf("DELETE of a running workflow: %d %s", r.Status, r.Body)
	}
	release()
	<-done
	if r := h.do("DELETE", "/v1/workflows/"+running, w.admin, nil); r.Status != 403 {
		t.Errorf("DELETE without workflows:delete: %d", r.Status)
	}
	if r := h.do("DELETE", "/v1/workflows/"+running, h.token("globex", "workflows:delete"), nil); r.Status != 404 {
		t.Errorf("DELETE of another tenant's workflow: %d", r.Status)
	}
	r := h.do("DELETE", "/v1/workflows/"+running, deleter, nil)
	var deleted map[string]any
	r.json(t, &deleted)
	if r.Status != 200 || deleted["id"] != running || deleted["deleted"] != true || deleted["workflows"] != 1.0 || deleted["steps"].(float64) < 1 {
		t.Fatalf("DELETE of the finished workflow: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/workflows/"+running, w.admin, nil); r.Status != 404 {
		t.Errorf("deleted workflow: %d", r.Status)
	}
	h.do("GET", "/v1/audit/query?action=workflow.delete&outcome=success", audTok, nil).json(t, &page)
	if len(page.Records) != 1 || page.Records[0].Resource.ID != running || string(page.Records[0].Details) == "{}" {
		t.Errorf("workflow.delete records: %+v", page.Records)
	}
}

// TestAuditRetentionKeepsTheChainVerifiable trims the chain behind
// checkpoints: verify passes from the checkpoint, and still finds a record
// tampered with after it.
func TestAuditRetentionKeepsTheChainVerifiable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	tok := h.token("acme", "audit:read")
	for range 20 {
		h.do("GET", "/v1/audit/query", tok, nil)
	}
	h.do("GET", "/v1/nothing-here", "", nil) // the _system chain
	res, err := sweeperAt(h, retention.Policy{Audit: time.Hour}, time.Now().Add(2*time.Hour)).Sweep(ctx)
	if err != nil || res.AuditRecords < 21 {
		t.Fatalf("audit trim: %+v, %v", res, err)
	}
	var rep audit.Report
	h.do("GET", "/v1/audit/verify", tok, nil).json(t, &rep)
	// Batches of 7: the last checkpoint names seq 20 at the earliest.
	if !rep.OK || rep.AnchoredAtSeq < 20 || rep.FirstBadSeq != nil {
		t.Fatalf("verify after the trim: %+v", rep)
	}
	sys, err := audit.Verify(ctx, h.DB, audit.SystemTenant)
	if err != nil || !sys.OK || sys.AnchoredAtSeq == 0 {
		t.Errorf("the _system chain after the trim: %+v, %v", sys, err)
	}

	raw := h.rawDB()
	bad := rep.AnchoredAtSeq + 2
	for _, table := range []string{"audit_records", "audit_tail"} {
		if _, err := raw.Exec(`UPDATE `+table+` SET status = 500 WHERE tenant = 'acme' AND seq = ?`, bad); err != nil {
			t.Fatal(err)
		}
	}
	h.do("GET", "/v1/audit/verify", tok, nil).json(t, &rep)
	if rep.OK || rep.FirstBadSeq == nil || *rep.FirstBadSeq != bad {
		t.Fatalf("verify after tampering with seq %d: %+v", bad, rep)
	}
}
