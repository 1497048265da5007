package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

func newWebhook(t *testing.T, s Store, tenant, agentName string, events ...string) *webhook.Webhook {
	t.Helper()
	w := &webhook.Webhook{ID: ids.New(ids.Webhook), Tenant: tenant, URL: "https://hooks.example/in", Events: events,
		Agent: agentName, Description: "d", Secret: webhook.NewSecret(), CreatedAt: base}
	must(t, s.CreateWebhook(ctxOf(t), w, nil), "create webhook")
	return w
}

func testWebhookCRUD(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := newWebhook(t, s, "acme", "", webhook.WorkflowCompleted, webhook.ApprovalDecided)
	got, err := s.Webhook(ctx, "acme", w.ID)
	must(t, err, "get")
	if got.URL != w.URL || got.Secret != w.Secret || len(got.Events) != 2 || !got.CreatedAt.Equal(base) {
		t.Fatalf("webhook read back = %+v", got)
	}
	_, err = s.Webhook(ctx, "other", w.ID)
	wantCode(t, err, problem.NotFound, "another tenant's webhook")
	until := base.Add(24 * time.Hour)
	next := webhook.NewSecret()
	must(t, s.RotateSecret(ctx, "acme", w.ID, next, until, nil), "rotate")
	got, err = s.Webhook(ctx, "acme", w.ID)
	must(t, err, "get rotated")
	if got.Secret != next || got.PreviousSecret != w.Secret || !got.PreviousUntil.Equal(until) {
		t.Fatalf("rotated webhook = %+v", got)
	}
	list, err := s.ListWebhooks(ctx, "acme")
	must(t, err, "list")
	if len(list) != 1 {
		t.Fatalf("list = %d webhooks", len(list))
	}
	wantCode(t, s.DeleteWebhook(ctx, "other", w.ID, nil), problem.NotFound, "delete in another tenant")
	must(t, s.DeleteWebhook(ctx, "acme", w.ID, nil), "delete")
	_, err = s.Webhook(ctx, "acme", w.ID)
	wantCode(t, err, problem.NotFound, "deleted webhook")
}

func testWebhookOutbox(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	all := newWebhook(t, s, "acme", "", webhook.WorkflowCompleted, webhook.WorkflowFailed)
	other := newWebhook(t, s, "acme", "other-agent", webhook.WorkflowCompleted)
	elsewhere := newWebhook(t, s, "globex", "", webhook.WorkflowCompleted)

	a, b := newWorkflow("acme", "triage", "o", 1), newWorkflow("acme", "triage", "o", 2)
	// A webhook of one workflow (an A2A push config) gets b's events only.
	onlyB := &webhook.Webhook{ID: ids.New(ids.Webhook), Tenant: "acme", URL: "https://hooks.example/task", WorkflowID: b.ID,
		Events: []string{webhook.WorkflowCompleted, webhook.WorkflowFailed}, Secret: webhook.NewSecret(), CreatedAt: base}
	must(t, s.CreateWebhook(ctx, onlyB, nil), "create a workflow's webhook")
	if got, err := s.Webhook(ctx, "acme", onlyB.ID); err != nil || got.WorkflowID != b.ID {
		t.Fatalf("a workflow's webhook reads back as %+v, %v", got, err)
	}
	create(t, s, a)
	create(t, s, b)
	finish(t, s, "o", a)
	b.Status, b.Outcome, b.Error, b.FinishedAt = workflow.Failed, workflow.OutcomeFailed, json.RawMessage(`{"code":"x"}`), base.Add(time.Minute)
	must(t, s.FinishWorkflow(ctx, "o", b, nil), "fail b")

	for _, w := range []*webhook.Webhook{other, elsewhere} {
		ds, err := s.Deliveries(ctx, w.Tenant, w.ID, "", 10)
		must(t, err, "deliveries")
		if len(ds) != 0 {
			t.Errorf("webhook %s (agent %q, tenant %s) got %d deliveries", w.ID, w.Agent, w.Tenant, len(ds))
		}
	}
	ds, err := s.Deliveries(ctx, "acme", onlyB.ID, "", 10)
	must(t, err, "deliveries of a workflow's webhook")
	if len(ds) != 1 || ds[0].OrderKey != b.ID || ds[0].Type != webhook.WorkflowFailed {
		t.Errorf("a workflow's webhook got %+v, want b's failure only", ds)
	}
	must(t, s.DeleteWebhook(ctx, "acme", onlyB.ID, nil), "delete a workflow's webhook")
	ds, err = s.Deliveries(ctx, "acme", all.ID, webhook.Pending, 10)
	must(t, err, "deliveries")
	if len(ds) != 2 || ds[0].Type != webhook.WorkflowFailed || ds[1].Type != webhook.WorkflowCompleted || ds[1].OrderKey != a.ID {
		t.Fatalf("deliveries = %+v, want b's failure then a's completion (newest first)", ds)
	}
	var body struct {
		Type string `json:"type"`
		Data struct {
			WorkflowID string `json:"workflow_id"`
			Outcome    string `json:"outcome"`
		} `json:"data"`
	}
	must(t, json.Unmarshal(ds[1].Body, &body), "payload")
	if body.Type != webhook.WorkflowCompleted || body.Data.WorkflowID != a.ID || body.Data.Outcome != "routed" {
		t.Errorf("payload = %s", ds[1].Body)
	}

	// One claim takes both (different workflows); a second finds them leased.
	now := base.Add(2 * time.Minute)
	got, err := s.ClaimDeliveries(ctx, "r1", now, now.Add(time.Minute), 10)
	must(t, err, "claim")
	if len(got) != 2 {
		t.Fatalf("claimed %d, want 2", len(got))
	}
	again, err := s.ClaimDeliveries(ctx, "r2", now, now.Add(time.Minute), 10)
	must(t, err, "claim again")
	if len(again) != 0 {
		t.Fatalf("claimed %d leased deliveries", len(again))
	}
	d := got[0]
	held, err := s.FinishAttempt(ctx, "r2", d.ID, webhook.Outcome{Status: webhook.Delivered, Attempts: 1, HTTPStatus: 200, At: now})
	must(t, err, "finish by another")
	if held {
		t.Fatal("an attempt recorded by a replica without the lease")
	}
	retryAt := now.Add(10 * time.Second)
	held, err = s.FinishAttempt(ctx, "r1", d.ID, webhook.Outcome{Status: webhook.Pending, Attempts: 1, HTTPStatus: 500,
		Error: "answered 500", NextAttempt: retryAt, At: now})
	must(t, err, "finish attempt")
	if !held {
		t.Fatal("the lease holder's attempt was refused")
	}
	// With nothing due a claim writes nothing: every workflow's end asks.
	writes := s.CommittedWrites()
	if got, _ := s.ClaimDeliveries(ctx, "r2", now.Add(time.Second), now.Add(time.Minute), 10); len(got) != 0 {
		t.Fatalf("claimed a delivery before its next attempt: %+v", got)
	}
	if n := s.CommittedWrites() - writes; n != 0 {
		t.Errorf("a claim with nothing due committed %d writes, want none", n)
	}
	got, err = s.ClaimDeliveries(ctx, "r2", retryAt, retryAt.Add(time.Minute), 10)
	must(t, err, "claim at retry")
	if len(got) != 1 || got[0].ID != d.ID || got[0].Attempts != 1 || got[0].LastStatus != 500 {
		t.Fatalf("claim at retry = %+v", got)
	}
	_, err = s.FinishAttempt(ctx, "r2", d.ID, webhook.Outcome{Status: webhook.Failed, Attempts: 2, HTTPStatus: 500, Error: "answered 500", At: retryAt})
	must(t, err, "fail")
	failed, err := s.Deliveries(ctx, "acme", all.ID, webhook.Failed, 10)
	must(t, err, "failed deliveries")
	if len(failed) != 1 || failed[0].ID != d.ID || failed[0].Attempts != 2 || !failed[0].NextAttempt.IsZero() {
		t.Fatalf("failed = %+v", failed)
	}
	r, err := s.RetryDelivery(ctx, "acme", all.ID, d.ID, retryAt, nil)
	must(t, err, "retry")
	if r.Status != webhook.Pending || !r.NextAttempt.Equal(retryAt) {
		t.Fatalf("retried = %+v", r)
	}
	_, err = s.RetryDelivery(ctx, "globex", all.ID, d.ID, retryAt, nil)
	wantCode(t, err, problem.NotFound, "retry in another tenant")
}

func testWebhookReplayEvents(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := newWebhook(t, s, "acme", "triage", webhook.ReplayCompleted, webhook.ReplayBatchCompleted)
	must(t, s.CreateReplay(ctx, newReplay("acme", "wf_a", "triage@2", 1), nil), "create replay")
	b := replay.NewBatch("acme", "triage@2", 1, replay.Creator{Sub: "user-1"}, base)
	must(t, s.CreateBatch(ctx, b, []string{"wf_a"}, "r", base.Add(time.Minute), nil), "create batch")
	ok, err := s.FinishBatch(ctx, b.ID, replay.BatchCompleted, "", base.Add(time.Second))
	must(t, err, "finish batch")
	if !ok {
		t.Fatal("batch not finished")
	}
	ds, err := s.Deliveries(ctx, "acme", w.ID, "", 10)
	must(t, err, "deliveries")
	if len(ds) != 2 || ds[0].Type != webhook.ReplayBatchCompleted || ds[0].OrderKey != b.ID || ds[1].Type != webhook.ReplayCompleted {
		t.Fatalf("deliveries = %+v, want the batch's end then the replay's", ds)
	}
}

// testReplayRunning stores a real replay running (no replay.completed
// event yet), finds it by its new workflow and among the running ones,
// completes it once (queueing its event) and refuses a second completion.
func testReplayRunning(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := newWebhook(t, s, "acme", "triage", webhook.ReplayCompleted)
	done := newReplay("acme", "wf_a", "triage@2", 1)
	must(t, s.CreateReplay(ctx, done, nil), "create completed replay")
	r := newReplay("acme", "wf_a", "triage@2", 2)
	r.Status, r.ReplayOutcome, r.Steps, r.Delta = replay.StatusRunning, "", nil, replay.Delta{}
	must(t, s.CreateReplay(ctx, r, nil), "create running replay")

	got, err := s.ReplayOfWorkflow(ctx, r.ReplayWorkflowID)
	must(t, err, "replay of workflow")
	if got.ID != r.ID || got.Status != replay.StatusRunning {
		t.Errorf("ReplayOfWorkflow = %s %s, want %s running", got.ID, got.Status, r.ID)
	}
	_, err = s.ReplayOfWorkflow(ctx, "wf_nope")
	wantCode(t, err, problem.NotFound, "replay of an unknown workflow")
	running, err := s.RunningReplays(ctx, 10)
	must(t, err, "running replays")
	if ids := replayIDs(running); len(ids) != 1 || ids[0] != r.ID {
		t.Errorf("RunningReplays = %v, want [%s]", ids, r.ID)
	}
	ds, err := s.Deliveries(ctx, "acme", w.ID, "", 10)
	must(t, err, "deliveries")
	if len(ds) != 1 {
		t.Fatalf("%d deliveries before the running replay completed, want the completed replay's only", len(ds))
	}

	end := *r
	end.Status, end.ReplayOutcome, end.Delta = replay.StatusCompleted, "escalated", replay.Delta{StepsAdded: 2}
	ok, err := s.CompleteReplay(ctx, &end)
	must(t, err, "complete replay")
	if !ok {
		t.Fatal("CompleteReplay of a running replay = false")
	}
	again := end
	again.ReplayOutcome = "routed"
	ok, err = s.CompleteReplay(ctx, &again)
	must(t, err, "complete replay again")
	if ok {
		t.Error("a second CompleteReplay = true, want false: it was no longer running")
	}
	got, err = s.Replay(ctx, "acme", r.ID)
	must(t, err, "replay")
	if got.Status != replay.StatusCompleted || got.ReplayOutcome != "escalated" || got.Delta.StepsAdded != 2 {
		t.Errorf("completed replay = %s %s %+v, want completed escalated with its delta", got.Status, got.ReplayOutcome, got.Delta)
	}
	if running, err = s.RunningReplays(ctx, 10); err != nil || len(running) != 0 {
		t.Errorf("RunningReplays after completion = %v, %v; want none", replayIDs(running), err)
	}
	ds, err = s.Deliveries(ctx, "acme", w.ID, "", 10)
	must(t, err, "deliveries")
	if len(ds) != 2 || ds[0].Type != webhook.ReplayCompleted {
		t.Fatalf("deliveries = %+v, want the completion of the running replay too", ds)
	}
}
