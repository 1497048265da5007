package sqlite

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// BenchmarkWorkflows stores workflows as the runner does, 16 at a time:
// read the agent version, create, three steps each with a step and a tool
// call audit record, finish with an audit record. It reports workflows/s,
// with the audit records and (to see the workflow tables' own cost) without.
func BenchmarkWorkflows(b *testing.B) {
	b.Run("audited", func(b *testing.B) { benchmarkWorkflows(b, true) })
	b.Run("unaudited", func(b *testing.B) { benchmarkWorkflows(b, false) })
}

func benchmarkWorkflows(b *testing.B, audited bool) {
	db := NewTestDB(b)
	ctx := b.Context()
	pets := &tool.Tool{ID: ids.New(ids.Tool), Tenant: "acme", Name: "pets", Type: tool.OpenAPI,
		SpecURL: "https://api.example.com/openapi.json", EndpointURL: "https://api.example.com", Revision: 1}
	if err := db.CreateTool(ctx, pets, nil, nil); err != nil {
		b.Fatal(err)
	}
	v := &agent.Version{Tenant: "acme", Name: "triage", Definition: json.RawMessage(`{}`), Tools: []string{"pets"}}
	if err := db.DeployVersion(ctx, v, false, nil); err != nil {
		b.Fatal(err)
	}
	const concurrency = 16
	var next atomic.Int64
	rec := func(action, wfID string) *audit.Record {
		if !audited {
			return nil
		}
		return &audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "user-1"}, Action: action,
			Resource: audit.Resource{Type: "workflow", ID: wfID}, Outcome: audit.Success, WorkflowID: wfID}
	}
	one := func() error {
		if _, err := db.AgentVersion(ctx, "acme", "triage", ""); err != nil {
			return err
		}
		now := time.Now().UTC()
		w := &workflow.Workflow{ID: ids.NewAt(ids.Workflow, now), Tenant: "acme", Agent: "triage", AgentVersion: v.Version,
			Status: workflow.Running, Goal: "route the ticket", Context: json.RawMessage(`{"ticket":42}`),
			Caller: workflow.Caller{Sub: "user-1", Tenant: "acme", Scopes: []string{"agents:invoke"}}, MaxToolCalls: 10,
			StartedAt: now, Deadline: now.Add(time.Minute), Owner: "replica-a", LeaseUntil: now.Add(15 * time.Second)}
		if err := db.CreateWorkflow(ctx, w, nil); err != nil {
			return err
		}
		for seq := 1; seq <= 3; seq++ {
			s := &workflow.Step{WorkflowID: w.ID, Seq: seq, Step: seq, Action: "lookup", Kind: "call", Status: "ok",
				Tool: "pets", Operation: "listPets", Args: json.RawMessage(`{"limit":3}`),
				Result: json.RawMessage(`[{"id":1,"name":"rex"}]`), Request: json.RawMessage(`{"method":"GET"}`),
				HTTPStatus: 200, Attempts: 1, StartedAt: time.Now(), DurationMS: 3}
			if err := db.AppendSteps(ctx, "replica-a", workflow.StepWrite{Step: s, Records: []*audit.Record{rec("workflow.step", w.ID), rec("tool.call", w.ID)}}); err != nil {
				return err
			}
		}
		w.Status, w.Outcome, w.Output = workflow.Completed, "routed", json.RawMessage(`{"queue":"billing"}`)
		return db.FinishWorkflow(ctx, "replica-a", w, []*audit.Record{rec("workflow.finish", w.ID)})
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Value
	for range concurrency {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := one(); err != nil {
					failed.Store(fmt.Errorf("workflow: %w", err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "workflows/s")
}

// BenchmarkCreateWorkflows creates workflows only, 16 and 256 at a time
// (a burst of invocations): the writer's cost of a workflow's row, its
// goal in the search index among it.
func BenchmarkCreateWorkflows(b *testing.B) {
	for _, concurrency := range []int{16, 256} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			db := NewTestDB(b)
			ctx := b.Context()
			var next atomic.Int64
			var failed atomic.Value
			b.ResetTimer()
			var wg sync.WaitGroup
			for range concurrency {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						now := time.Now().UTC()
						w := &workflow.Workflow{ID: ids.NewAt(ids.Workflow, now), Tenant: "acme", Agent: "triage", AgentVersion: "1",
							Status: workflow.Running, Goal: "route the ticket about invoice 4242", Context: json.RawMessage(`{"ticket":42}`),
							Caller: workflow.Caller{Sub: "user-1", Tenant: "acme"}, StartedAt: now, Deadline: now.Add(time.Minute),
							Owner: "replica-a", LeaseUntil: now.Add(15 * time.Second)}
						if err := db.CreateWorkflow(ctx, w, nil); err != nil {
							failed.Store(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err, ok := failed.Load().(error); ok {
				b.Fatal(err)
			}
		})
	}
}
