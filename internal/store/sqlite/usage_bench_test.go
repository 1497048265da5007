package sqlite

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/workflow"
)

// BenchmarkInvokeUsage reads the usage of a finished run of two
// completions, as a synchronous invoke's answer does: from the
// completions' records (WorkflowCompletions, then TotalCompletions) and
// from their usage columns (WorkflowUsage). The records are the size of
// an external run's through the gateway, which keep the wire exchange
// beside the conversation (about 1.5 and 3.5 KB).
func BenchmarkInvokeUsage(b *testing.B) {
	db := NewTestDB(b)
	ctx := b.Context()
	now := time.Now().UTC()
	w := &workflow.Workflow{ID: ids.NewAt(ids.Workflow, now), Tenant: "acme", Agent: "ext", AgentVersion: "1",
		Status: workflow.Running, Goal: "g", Context: json.RawMessage(`{}`), Caller: workflow.Caller{Sub: "user-1", Tenant: "acme"},
		StartedAt: now, Deadline: now.Add(time.Minute), Owner: "replica-a", LeaseUntil: now.Add(time.Hour)}
	if err := db.CreateWorkflow(ctx, w, nil); err != nil {
		b.Fatal(err)
	}
	for n, size := range []int{1500, 3500} {
		data, _ := json.Marshal(map[string]string{"request_sha256": "h", "wire": strings.Repeat("x", size)})
		c := &workflow.Completion{WorkflowID: w.ID, N: n + 1, Step: n + 1, Tenant: "acme", Agent: "ext", AgentVersion: "1",
			Model: "default", InputTokens: 100, OutputTokens: 10, CreatedAt: now, Data: data}
		s := &workflow.Step{WorkflowID: w.ID, Seq: n + 1, Step: n + 1, Action: "ask", Kind: "completion", Status: "ok", StartedAt: now}
		if err := db.AppendSteps(ctx, "replica-a", workflow.StepWrite{Step: s, Completion: c}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("records", func(b *testing.B) {
		for b.Loop() {
			comps, err := db.WorkflowCompletions(ctx, w.ID)
			if err != nil || workflow.TotalCompletions(comps).Completions != 2 {
				b.Fatal(err)
			}
		}
	})
	b.Run("columns", func(b *testing.B) {
		for b.Loop() {
			if t, err := db.WorkflowUsage(ctx, w.ID); err != nil || t.Completions != 2 {
				b.Fatal(err)
			}
		}
	})
}
