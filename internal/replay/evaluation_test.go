package replay_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/telemetry/telemetrytest"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestBatchEmitsEvaluationEvents checks that each check and judge result
// of each replay of a batch is emitted as a gen_ai.evaluation.result log
// event: a built-in check that passes, an expression that cannot be
// evaluated, and a judge's score.
func TestBatchEmitsEvaluationEvents(t *testing.T) {
	logs := telemetrytest.RecordLogs(t)
	db := sqlite.NewTestDB(t)
	wfIDs := notesBatch(t, db)
	judge := replay.ChatJudge{Complete: func(context.Context, string, agent.ChatRequest) (agent.ChatResponse, error) {
		return agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant,
			Content: `{"score": 0.9, "reason": "the note is kept"}`}}, nil
	}}
	programs := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db})
	svc := &replay.Service{Workflows: db, Versions: db, Programs: programs, Store: db, Judge: judge}
	spec := replay.Spec{
		Checks: []replay.CheckSpec{{Name: replay.CheckOutcomeUnchanged}, {Name: "broken", Expr: "replay.nope.x == 1"}},
		Judge:  &replay.JudgeSpec{Model: "judge-model", Rubric: "Keep the note."},
	}
	b := runBatchChecked(t, db, svc, db, wfIDs, spec)
	if b.Status != replay.BatchCompleted {
		t.Fatalf("batch %s: %s", b.Status, b.Error)
	}

	rps, err := db.BatchReplays(context.Background(), b.ID, false, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	replayOf := map[string]string{}
	for _, rp := range rps {
		replayOf[rp.WorkflowID] = rp.ID
	}

	type event struct {
		Workflow string
		Attrs    map[string]any
	}
	var got []event
	for _, r := range logs.Records() {
		if r.EventName() != "gen_ai.evaluation.result" {
			t.Errorf("event %q", r.EventName())
			continue
		}
		attrs := telemetrytest.Attrs(r)
		if attrs["agentplane.batch_id"] != b.ID {
			continue // another test's
		}
		wf, _ := attrs["gen_ai.conversation.id"].(string)
		if id := attrs["agentplane.replay_id"]; id != replayOf[wf] || id == "" {
			t.Errorf("the event of workflow %s names replay %v, want %s", wf, id, replayOf[wf])
		}
		for _, k := range []string{"agentplane.batch_id", "agentplane.replay_id", "gen_ai.conversation.id"} {
			delete(attrs, k)
		}
		if e, ok := attrs["gen_ai.evaluation.explanation"].(string); ok && attrs["error.type"] != nil && e != "" {
			attrs["gen_ai.evaluation.explanation"] = "<why>"
		}
		got = append(got, event{wf, attrs})
	}
	var want []event
	for _, id := range wfIDs {
		want = append(want,
			event{id, map[string]any{"gen_ai.evaluation.name": "outcome_unchanged", "gen_ai.evaluation.score.label": "pass",
				"agentplane.tenant": "acme"}},
			event{id, map[string]any{"gen_ai.evaluation.name": "broken", "error.type": "evaluation_error",
				"gen_ai.evaluation.explanation": "<why>", "agentplane.tenant": "acme"}},
			event{id, map[string]any{"gen_ai.evaluation.name": "judge", "gen_ai.evaluation.score.label": "pass",
				"gen_ai.evaluation.score.value": 0.9, "gen_ai.evaluation.explanation": "the note is kept", "agentplane.tenant": "acme"}})
	}
	order := func(a, b event) int {
		return strings.Compare(a.Workflow+a.Attrs["gen_ai.evaluation.name"].(string), b.Workflow+b.Attrs["gen_ai.evaluation.name"].(string))
	}
	slices.SortFunc(got, order)
	slices.SortFunc(want, order)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("evaluation events (-want +got):\n%s", diff)
	}
}

// TestBatchEvaluationEventsReachAnOTLPReceiver runs a checked batch with
// telemetry set up as serve sets it up, exporting to a real OTLP/HTTP
// receiver on loopback: each replay's check result arrives there as a
// gen_ai.evaluation.result log record of the gen-ai 1.42 schema.
func TestBatchEvaluationEventsReachAnOTLPReceiver(t *testing.T) {
	rcv := telemetrytest.NewReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "agentplane-test",
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	db := sqlite.NewTestDB(t)
	wfIDs := notesBatch(t, db)
	programs := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db})
	svc := &replay.Service{Workflows: db, Versions: db, Programs: programs, Store: db}
	b := runBatchChecked(t, db, svc, db, wfIDs, replay.Spec{Checks: []replay.CheckSpec{{Name: replay.CheckOutcomeUnchanged}}})
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	all := rcv.Received()
	logs := all["/v1/logs"]
	replaySpans := map[string]bool{} // span id → a replay span of the batch
	for _, s := range all["/v1/traces"].Traces {
		if telemetrytest.SpanAttrs(s)["agentplane.batch_id"] == b.ID && s.GetName() == "replay notes@1" {
			replaySpans[string(s.GetSpanId())] = true
		}
	}
	var got []string
	for i, l := range logs.Logs {
		attrs := telemetrytest.LogAttrs(l)
		if attrs["agentplane.batch_id"] != b.ID {
			continue
		}
		if !replaySpans[string(l.GetSpanId())] {
			t.Errorf("record %d is not in its replay's span", i)
		}
		if l.GetEventName() != "gen_ai.evaluation.result" || logs.Schemas[0] != telemetry.GenAISchemaURL ||
			attrs["gen_ai.evaluation.name"] != "outcome_unchanged" || attrs["gen_ai.evaluation.score.label"] != "pass" {
			t.Errorf("record %d: %s %v (schema %v)", i, l.GetEventName(), attrs, logs.Schemas)
		}
		got = append(got, attrs["gen_ai.conversation.id"].(string))
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(wfIDs))
	if !slices.Equal(got, want) {
		t.Errorf("evaluation events of workflows %v, want %v", got, want)
	}
}
