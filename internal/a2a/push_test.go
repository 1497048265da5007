package a2a_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/a2a"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestPushBody: a push-notification config receives each event as the
// StreamResponse {"task": Task} of the task as the event saw it; any other
// webhook the event as queued.
func TestPushBody(t *testing.T) {
	at := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	config := &webhook.Webhook{ID: "whk_1", WorkflowID: "wf_1"}
	waiting := webhook.Waiting(&workflow.Approval{WorkflowID: "wf_1", Tenant: "acme", Agent: "refunds", AgentVersion: "2",
		Step: 1, Action: "refund_approval", Reason: "Refund of 900", RequestedAt: at})
	failed := webhook.Finished(&workflow.Workflow{ID: "wf_1", Tenant: "acme", Agent: "refunds", AgentVersion: "2",
		Status: workflow.Failed, Outcome: workflow.OutcomeFailed, Error: json.RawMessage(`{"detail":"the payments tool answered 503"}`),
		StartedAt: at, FinishedAt: at.Add(time.Second)})
	for _, tc := range []struct {
		name  string
		event *webhook.Event
		want  string
	}{
		{"waiting", waiting, `{"task":{"id":"wf_1","contextId":"wf_1","status":{"state":"TASK_STATE_INPUT_REQUIRED",` +
			`"message":{"messageId":"wf_1-status","contextId":"wf_1","taskId":"wf_1","role":"ROLE_AGENT","parts":[{"text":"Refund of 900"}]},` +
			`"timestamp":"2026-11-26T07:00:00Z"},"metadata":{"agent":"refunds","agentVersion":"2","status":"waiting"}}}`},
		{"failed", failed, `{"task":{"id":"wf_1","contextId":"wf_1","status":{"state":"TASK_STATE_FAILED",` +
			`"message":{"messageId":"wf_1-status","contextId":"wf_1","taskId":"wf_1","role":"ROLE_AGENT","parts":[{"text":"the payments tool answered 503"}]},` +
			`"timestamp":"2026-11-26T07:00:01Z"},"metadata":{"agent":"refunds","agentVersion":"2","outcome":"failed","status":"failed"}}}`},
	} {
		got, mediaType, err := a2a.PushBody(config, tc.event.Body)
		if err != nil || strings.TrimSpace(string(got)) != tc.want || mediaType != "application/a2a+json" {
			t.Errorf("%s: %v\n got %s (%s)\nwant %s (application/a2a+json)", tc.name, err, got, mediaType, tc.want)
		}
	}
	plain := &webhook.Webhook{ID: "whk_2"}
	if got, mediaType, err := a2a.PushBody(plain, failed.Body); err != nil || string(got) != string(failed.Body) || mediaType != "" {
		t.Errorf("a webhook's body changed: %v %s (%s)", err, got, mediaType)
	}
	if _, _, err := a2a.PushBody(config, []byte(`{"type":"replay.completed","data":{}}`)); err == nil || !strings.Contains(err.Error(), "wf_1") {
		t.Errorf("a replay event to a push config: %v", err)
	}
}
