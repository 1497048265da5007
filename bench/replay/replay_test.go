// Package replay_test benchmarks dry-run replay: a recorded workflow run
// again against its own version, every call served from the record, and
// the two runs diffed. Three histories: the fraud-triage workflow (three
// tool calls among five steps), and 100- and 1,000-step workflows (half of
// the steps tool calls). Each is replayed with the history in memory, and
// loaded from each store (the reads a replay makes: the workflow, its steps
// and its completions), with and without storing the replay. PostgreSQL
// runs when AGENTPLANE_TEST_DATABASE_URL is set.
//
//	go test -run '^$' -bench . -benchmem ./bench/replay/
package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// fraudTriage is the three-call workflow: fetch the transaction, score it,
// route it, fetch the customer, open a case.
const fraudTriage = `{
  "tools": ["payments", "customers", "cases"],
  "steps": [
    {"action": "fetch_transaction", "call": "payments.getTransaction", "args": {"id": "context.transaction_id"}, "save_as": "txn"},
    {"action": "fraud_score", "score": "txn.amount > 1000.0 ? 0.91 : 0.12"},
    {"action": "route_queue", "route": [{"when": "score >= 0.8", "queue": "fraud-review"}, {"queue": "standard"}]},
    {"action": "fetch_customer", "call": "customers.getCustomer", "args": {"id": "txn.customer"}, "save_as": "customer"},
    {"action": "open_case", "when": "queue == 'fraud-review'", "call": "cases.createCase", "args": {"transaction": "txn.id", "queue": "queue", "amount": "txn.amount"}}
  ],
  "outcome": "queue == 'fraud-review' ? 'escalated' : 'cleared'",
  "output": "{'queue': queue, 'score': score}"
}`

// longDefinition has n steps: odd ones call a tool with their number,
// even ones score the last answer.
func longDefinition(n int) string {
	steps := make([]string, n)
	for i := range n {
		if i%2 == 0 {
			steps[i] = fmt.Sprintf(`{"action": "fetch_%d", "call": "payments.getTransaction", "args": {"id": "'tx_%d'"}, "save_as": "txn"}`, i, i)
		} else {
			steps[i] = fmt.Sprintf(`{"action": "score_%d", "score": "txn.amount > %d.0 ? 0.9 : 0.1"}`, i, i)
		}
	}
	return `{"tools": ["payments"], "max_steps": ` + fmt.Sprint(n+1) + `, "steps": [` + strings.Join(steps, ",") +
		`], "outcome": "score > 0.5 ? 'escalated' : 'cleared'"}`
}

func compile(b *testing.B, def string) *agent.Program {
	b.Helper()
	d, errs := agent.DecodeDefinition([]byte(def))
	if errs != nil {
		b.Fatalf("decode: %v", errs)
	}
	cat := agent.NewCatalog()
	for _, name := range []string{"payments", "customers", "cases"} {
		cat.Add(&tool.Tool{Name: name, PolicyClass: "standard"}, []tool.Operation{
			{ID: "getTransaction", Kind: tool.Read}, {ID: "getCustomer", Kind: tool.Read}, {ID: "createCase", Kind: tool.Write}})
	}
	prog, errs := agent.Compile(d, cat)
	if errs != nil {
		b.Fatalf("compile: %v", errs)
	}
	return prog
}

// recorder answers every call as a tool would and notes which were sent.
type recorder struct {
	agent.NoPlanner
	agent.NoDecisions
	sent map[int]bool
}

func (r *recorder) Call(_ context.Context, step int, c agent.ToolCall) (agent.CallResult, error) {
	r.sent[step] = true
	return agent.CallResult{Status: agent.StatusOK,
		Result: json.RawMessage(`{"id":"tx_1","amount":1200,"customer":"cus_7","risk":"medium"}`)}, nil
}

// record runs prog for real and returns its history as the runner stores it.
func record(b *testing.B, prog *agent.Program, steps int) *replay.History {
	b.Helper()
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	wf := &workflow.Workflow{ID: ids.NewAt(ids.Workflow, now), Tenant: "acme", Agent: "triage", AgentVersion: "1",
		Status: workflow.Running, Goal: "triage tx_1", Context: json.RawMessage(`{"transaction_id":"tx_1"}`),
		Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}, MaxToolCalls: steps,
		Output: json.RawMessage("null"), StartedAt: now, Deadline: now.Add(time.Hour), Owner: "bench", LeaseUntil: now.Add(time.Hour)}
	env := &recorder{sent: map[int]bool{}}
	events, res, err := prog.Execute(context.Background(), wf.Input(), env)
	if err != nil {
		b.Fatal(err)
	}
	h := &replay.History{Workflow: wf, Completions: map[int]json.RawMessage{}}
	for _, ev := range events {
		s := workflow.Step{WorkflowID: wf.ID, Seq: ev.Step, Step: ev.Step, Action: ev.Action, Kind: ev.Kind, Status: ev.Status,
			Tool: ev.Tool, Operation: ev.Operation, Score: ev.Score, Queue: ev.Queue, Outcome: ev.Outcome,
			Result: ev.Result, Error: ev.Error, Sent: env.sent[ev.Step], StartedAt: now, DurationMS: 1}
		if ev.Args != nil {
			s.Args, _ = json.Marshal(ev.Args)
		}
		if s.Sent {
			s.Request, s.HTTPStatus, s.Attempts = json.RawMessage(`{"method":"GET","url":"http://127.0.0.1/tx"}`), 200, 1
		}
		h.Steps = append(h.Steps, s)
	}
	wf.Outcome, wf.Status, wf.FinishedAt = res.Outcome, workflow.Completed, now.Add(time.Second)
	return h
}

type history struct {
	name string
	prog *agent.Program
	h    *replay.History
}

func histories(b *testing.B) []history {
	three := compile(b, fraudTriage)
	long100, long1000 := compile(b, longDefinition(100)), compile(b, longDefinition(1000))
	return []history{
		{"3-call", three, record(b, three, 20)},
		{"100-step", long100, record(b, long100, 100)},
		{"1000-step", long1000, record(b, long1000, 1000)},
	}
}

// replayOnce is what a dry-run replay computes once the history is loaded.
func replayOnce(b *testing.B, prog *agent.Program, h *replay.History) replay.Delta {
	run, err := replay.DryRun(context.Background(), prog, h)
	if err != nil {
		b.Fatal(err)
	}
	_, delta := replay.Diff(h.Steps, run.Steps)
	return delta
}

func BenchmarkReplayInMemory(b *testing.B) {
	for _, hc := range histories(b) {
		b.Run(hc.name, func(b *testing.B) {
			if d := replayOnce(b, hc.prog, hc.h); d != (replay.Delta{}) {
				b.Fatalf("a replay against the same version changed: %+v", d)
			}
			b.ReportAllocs()
			for b.Loop() {
				replayOnce(b, hc.prog, hc.h)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(hc.h.Steps)), "ns/step")
		})
	}
}

// store is what the benchmark needs of an engine.
type store interface {
	workflow.Store
	replay.Store
	Close() error
}

func engines(b *testing.B) map[string]func(b *testing.B) store {
	es := map[string]func(b *testing.B) store{"sqlite": func(b *testing.B) store {
		db, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		return db
	}}
	if os.Getenv(postgres.TestDatabaseEnv) != "" {
		es["postgres"] = func(b *testing.B) store {
			db, err := postgres.Open(b.Context(), postgres.NewTestDatabase(b))
			if err != nil {
				b.Fatal(err)
			}
			return db
		}
	}
	return es
}

// save writes a recorded history into s as the runner would.
func save(b *testing.B, s store, h *replay.History) {
	b.Helper()
	ctx := b.Context()
	wf := *h.Workflow
	wf.Status, wf.Outcome, wf.FinishedAt = workflow.Running, "", time.Time{}
	if err := s.CreateWorkflow(ctx, &wf, nil); err != nil {
		b.Fatal(err)
	}
	for i := range h.Steps {
		if err := s.AppendSteps(ctx, wf.Owner, workflow.StepWrite{Step: &h.Steps[i]}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.FinishWorkflow(ctx, wf.Owner, h.Workflow, nil); err != nil {
		b.Fatal(err)
	}
}

// load reads a history back as a replay does.
func load(b *testing.B, s store, id string) *replay.History {
	ctx := b.Context()
	wf, err := s.Workflow(ctx, "acme", id)
	if err != nil {
		b.Fatal(err)
	}
	steps, err := s.Steps(ctx, id, 0)
	if err != nil {
		b.Fatal(err)
	}
	comps, err := s.Completions(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	return &replay.History{Workflow: wf, Steps: steps, Completions: comps}
}

func BenchmarkReplayFromStore(b *testing.B) {
	hs := histories(b)
	for name, open := range engines(b) {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			b.Cleanup(func() { s.Close() })
			for _, hc := range hs {
				save(b, s, hc.h)
				b.Run(hc.name+"/load+replay", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if d := replayOnce(b, hc.prog, load(b, s, hc.h.Workflow.ID)); d != (replay.Delta{}) {
							b.Fatalf("changed: %+v", d)
						}
					}
				})
				b.Run(hc.name+"/load+replay+store", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						h := load(b, s, hc.h.Workflow.ID)
						run, err := replay.DryRun(b.Context(), hc.prog, h)
						if err != nil {
							b.Fatal(err)
						}
						now := time.Now().UTC()
						r := &replay.Replay{ID: ids.NewAt(ids.Replay, now), Tenant: "acme", WorkflowID: h.Workflow.ID, Target: "triage@1",
							DryRun: true, OriginalVersion: "triage@1", OriginalOutcome: h.Workflow.Outcome, ReplayOutcome: run.Outcome,
							Creator: replay.Creator{Sub: "alice", Scopes: []string{"workflows:replay"}}, CreatedAt: now}
						r.Steps, r.Delta = replay.Diff(h.Steps, run.Steps)
						rec := &audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "workflow.replay",
							Resource: audit.Resource{Type: "replay", ID: r.ID}, Outcome: "success", WorkflowID: h.Workflow.ID}
						if err := s.CreateReplay(b.Context(), r, rec); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
