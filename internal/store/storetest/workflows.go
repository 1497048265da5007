package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// newWorkflow is a running workflow started i seconds after base, owned by
// owner with a lease of an hour.
func newWorkflow(tenant, agentName, owner string, i int) *workflow.Workflow {
	start := base.Add(time.Duration(i) * time.Second)
	return &workflow.Workflow{
		ID: ids.NewAt(ids.Workflow, start), Tenant: tenant, Agent: agentName, AgentVersion: "1",
		Status: workflow.Running, Goal: fmt.Sprintf("goal %d", i), Context: json.RawMessage(`{"ticket": 42, "tags": ["a"]}`),
		Caller:       workflow.Caller{Sub: "user-1", ClientID: "cli-1", Tenant: tenant, Scopes: []string{"agents:invoke", "tools:call"}},
		MaxToolCalls: 10, MaxLLMTokens: 5000, RequestID: fmt.Sprintf("req_%d", i), TraceID: fmt.Sprintf("trace-%d", i),
		StartedAt: start, Deadline: start.Add(5 * time.Minute),
		Owner: owner, LeaseUntil: base.Add(time.Hour),
	}
}

func create(t *testing.T, s Store, w *workflow.Workflow) *workflow.Workflow {
	t.Helper()
	must(t, s.CreateWorkflow(ctxOf(t), w, nil), "create workflow "+w.ID)
	return w
}

func newStep(wfID string, seq int) *workflow.Step {
	score := 0.25 * float64(seq)
	return &workflow.Step{
		WorkflowID: wfID, Seq: seq, Step: seq, Action: fmt.Sprintf("action-%d", seq), Kind: "call", Status: "ok",
		Tool: "pets", Operation: "listPets", Args: json.RawMessage(`{"limit": 3}`), Score: &score,
		Queue: "billing", Outcome: "routed", Result: json.RawMessage(`[{"id": 1}]`), Error: "",
		Request:    json.RawMessage(`{"method": "GET", "url": "https://api.example.com/pets?limit=3"}`),
		HTTPStatus: 200, Attempts: 1, StartedAt: base.Add(time.Duration(seq) * time.Second), DurationMS: 12,
		Sent: true,
	}
}

// finish ends w as completed under owner.
func finish(t *testing.T, s Store, owner string, w *workflow.Workflow) {
	t.Helper()
	w.Status, w.Outcome, w.Output = workflow.Completed, "routed", json.RawMessage(`{"queue": "billing"}`)
	w.FinishedAt = base.Add(time.Minute)
	must(t, s.FinishWorkflow(ctxOf(t), owner, w, nil), "finish "+w.ID)
}

func wantLeaseLost(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, workflow.ErrLeaseLost) {
		t.Errorf("%s: err = %v, want workflow.ErrLeaseLost", what, err)
	}
}

func workflowIDs(wfs []*workflow.Workflow) []string {
	var out []string
	for _, w := range wfs {
		out = append(out, w.ID)
	}
	return out
}

// testIntentsEndWithTheirCall: an intent is cleared by the step of its
// call (a step naming a tool), not by a step of another kind that took its
// number (an external agent's completion after a crash), which leaves the
// call's possible sending known.
func testIntentsEndWithTheirCall(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := newWorkflow("acme", "triage", "replica-a", 0)
	must(t, s.CreateWorkflow(ctx, w, nil), "create")
	in := workflow.Intent{WorkflowID: w.ID, Step: 1, Tool: "pets", Operation: "createPet", Call: "5d41402abc4b2a76", At: base}
	must(t, s.RecordIntent(ctx, "replica-a", in), "record intent")
	completion := &workflow.Step{WorkflowID: w.ID, Seq: 1, Step: 1, Action: "chat", Kind: "completion", Status: "ok",
		Model: "default", StartedAt: base, DurationMS: 5}
	must(t, s.AppendSteps(ctx, "replica-a", written(completion)), "append a completion at the intent's step")
	ins, err := s.Intents(ctx, w.ID)
	must(t, err, "intents")
	if diff := cmp.Diff([]workflow.Intent{in}, ins); diff != "" {
		t.Errorf("Intents after a completion at step 1 (-want +got):\n%s", diff)
	}
	in.Step = 2
	must(t, s.RecordIntent(ctx, "replica-a", in), "record intent of step 2")
	must(t, s.AppendSteps(ctx, "replica-a", written(newStep(w.ID, 2))), "append the call of step 2")
	ins, err = s.Intents(ctx, w.ID)
	must(t, err, "intents")
	if len(ins) != 1 || ins[0].Step != 1 {
		t.Errorf("Intents after the call of step 2 = %+v; want step 1's alone", ins)
	}
}

func testWorkflowLifecycle(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := newWorkflow("acme", "triage", "replica-a", 0)
	w.StartedAt = w.StartedAt.Add(321) // finer than stores keep
	must(t, s.CreateWorkflow(ctx, w, record("acme", "workflow.start", 0)), "create")
	dup := *w
	wantCode(t, s.CreateWorkflow(ctx, &dup, nil), problem.Conflict, "same workflow again")
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if diff := cmp.Diff(w, got); diff != "" {
		t.Errorf("Workflow after create (-want +got):\n%s", diff)
	}
	if !got.StartedAt.Equal(base) || !got.FinishedAt.IsZero() {
		t.Errorf("times after create: started %v finished %v; want the microsecond of base and zero", got.StartedAt, got.FinishedAt)
	}
	_, err = s.Workflow(ctx, "globex", w.ID)
	wantCode(t, err, problem.NotFound, "another tenant's workflow")
	_, err = s.Workflow(ctx, "acme", "wf_nope")
	wantCode(t, err, problem.NotFound, "unknown workflow")

	// Intents are cleared by their step.
	for _, step := range []int{2, 1} {
		must(t, s.RecordIntent(ctx, "replica-a", workflow.Intent{WorkflowID: w.ID, Step: step, Tool: "pets",
			Operation: "createPet", At: base.Add(time.Duration(step) * time.Second)}), "record intent")
	}
	var steps []workflow.Step
	for seq := 1; seq <= 3; seq++ {
		st := newStep(w.ID, seq)
		if seq == 2 {
			// Refused before sending: no request, no attempt, not sent.
			st.Score, st.Args, st.Result, st.Request = nil, nil, nil, nil
			st.Status, st.Error, st.HTTPStatus, st.Attempts, st.Sent = "error", "denied by policy", 0, 0, false
		}
		must(t, s.AppendSteps(ctx, "replica-a", written(st, record("acme", "workflow.step", seq), record("acme", "tool.call", seq))),
			fmt.Sprintf("append step %d", seq))
		steps = append(steps, *st)
		if seq == 1 {
			ins, err := s.Intents(ctx, w.ID)
			must(t, err, "intents")
			want := []workflow.Intent{{WorkflowID: w.ID, Step: 2, Tool: "pets", Operation: "createPet", At: base.Add(2 * time.Second)}}
			if diff := cmp.Diff(want, ins); diff != "" {
				t.Errorf("Intents after step 1 (-want +got):\n%s", diff)
			}
		}
	}
	if ins, err := s.Intents(ctx, w.ID); err != nil || len(ins) != 0 {
		t.Errorf("Intents after step 2 = %v, %v; want none", ins, err)
	}
	if err := s.AppendSteps(ctx, "replica-a", written(newStep(w.ID, 2), record("acme", "workflow.step", 9))); err == nil {
		t.Error("a second step 2 was stored")
	}
	for _, tc := range []struct {
		after int
		want  []workflow.Step
	}{{0, steps}, {1, steps[1:]}, {3, nil}, {7, nil}} {
		got, err := s.Steps(ctx, w.ID, tc.after)
		must(t, err, "steps")
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Steps after %d (-want +got):\n%s", tc.after, diff)
		}
	}

	// Completions.
	comps := map[int]json.RawMessage{1: json.RawMessage(`{"content": "a"}`), 2: json.RawMessage(`{"content": "b"}`)}
	for n, c := range comps {
		must(t, s.AppendSteps(ctx, "replica-a", answered(completion(w, n, string(c)), 100+n)), "record completion")
	}
	gotComps, err := s.Completions(ctx, w.ID)
	must(t, err, "completions")
	if diff := cmp.Diff(comps, gotComps); diff != "" {
		t.Errorf("Completions (-want +got):\n%s", diff)
	}
	if c, err := s.Completions(ctx, "wf_nope"); err != nil || len(c) != 0 {
		t.Errorf("Completions of an unknown workflow = %v, %v; want none", c, err)
	}

	// Finish.
	w.Status, w.Outcome = workflow.Failed, workflow.OutcomeFailed
	w.Output = json.RawMessage(`{"partial": true}`)
	w.Error = json.RawMessage(`{"type": "https://agentplane.dev/problems/workflow-failed", "status": 422}`)
	w.FinishedAt = base.Add(time.Minute + 999)
	must(t, s.FinishWorkflow(ctx, "replica-a", w, []*audit.Record{record("acme", "workflow.finish", 10)}), "finish")
	if w.Owner != "" || !w.LeaseUntil.IsZero() || !w.FinishedAt.Equal(base.Add(time.Minute)) {
		t.Errorf("after finish: owner %q lease %v finished %v; want no owner, no lease, finished cut to µs", w.Owner, w.LeaseUntil, w.FinishedAt)
	}
	got, err = s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow after finish")
	if diff := cmp.Diff(w, got); diff != "" {
		t.Errorf("Workflow after finish (-want +got):\n%s", diff)
	}
	wantLeaseLost(t, s.AppendSteps(ctx, "replica-a", written(newStep(w.ID, 4))), "append to a finished workflow")
	wantLeaseLost(t, s.RecordIntent(ctx, "replica-a", workflow.Intent{WorkflowID: w.ID, Step: 4, At: base}), "intent of a finished workflow")
	wantLeaseLost(t, s.FinishWorkflow(ctx, "replica-a", w, nil), "finish twice")

	// start + 3 × (step + call) + finish; refused writes appended nothing.
	verifyOK(t, s, "acme", 8)
}

func testWorkflowList(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var all []*workflow.Workflow // oldest first
	for i := range 8 {
		agentName := "triage"
		if i%2 == 1 {
			agentName = "billing"
		}
		w := newWorkflow("acme", agentName, "replica-a", i)
		if i%3 == 0 {
			w.Goal = fmt.Sprintf("Refund 100%% of order_%d to the Customer", i)
		}
		if i == 6 {
			w.Context = json.RawMessage(`{"ticket": "T-6", "vip": true, "amount": 12.5}`)
		}
		if i%4 == 2 {
			w.AgentVersion = "2"
		}
		if i == 4 {
			w.Goal = `Erstatte "Größe" zurück: a 2x "quoted" goal`
		}
		create(t, s, w)
		switch i % 4 {
		case 0:
			finish(t, s, "replica-a", w) // completed, outcome routed
		case 3:
			w.Status, w.Outcome, w.FinishedAt = workflow.Failed, workflow.OutcomeTimedOut, base.Add(time.Hour)
			must(t, s.FinishWorkflow(ctx, "replica-a", w, nil), "fail")
		}
		all = append(all, w)
	}
	create(t, s, newWorkflow("globex", "triage", "replica-a", 20))
	newest := slices.Clone(all)
	slices.Reverse(newest)
	pick := func(keep func(i int, w *workflow.Workflow) bool) []string {
		var out []string
		for i := len(all) - 1; i >= 0; i-- {
			if keep(i, all[i]) {
				out = append(out, all[i].ID)
			}
		}
		return out
	}
	tests := []struct {
		name string
		f    workflow.ListFilter
		want []string
	}{
		{"all", workflow.ListFilter{}, workflowIDs(newest)},
		{"agent", workflow.ListFilter{Agent: "billing"}, pick(func(i int, _ *workflow.Workflow) bool { return i%2 == 1 })},
		{"status", workflow.ListFilter{Status: workflow.Running}, pick(func(i int, _ *workflow.Workflow) bool { return i%4 == 1 || i%4 == 2 })},
		{"outcome", workflow.ListFilter{Outcome: workflow.OutcomeTimedOut}, pick(func(i int, _ *workflow.Workflow) bool { return i%4 == 3 })},
		{"agent and status", workflow.ListFilter{Agent: "triage", Status: workflow.Completed}, pick(func(i int, _ *workflow.Workflow) bool { return i%4 == 0 })},
		{"since", workflow.ListFilter{Since: base.Add(5 * time.Second)}, pick(func(i int, _ *workflow.Workflow) bool { return i >= 5 })},
		{"since a nanosecond after a start", workflow.ListFilter{Since: base.Add(5*time.Second + 1)}, pick(func(i int, _ *workflow.Workflow) bool { return i >= 6 })},
		{"until", workflow.ListFilter{Until: base.Add(2 * time.Second)}, pick(func(i int, _ *workflow.Workflow) bool { return i <= 2 })},
		{"until a nanosecond before a start", workflow.ListFilter{Until: base.Add(2*time.Second - 1)}, pick(func(i int, _ *workflow.Workflow) bool { return i <= 1 })},
		{"range", workflow.ListFilter{Since: base.Add(2 * time.Second), Until: base.Add(4 * time.Second)}, pick(func(i int, _ *workflow.Workflow) bool { return i >= 2 && i <= 4 })},
		{"before", workflow.ListFilter{Before: all[3].ID}, pick(func(i int, _ *workflow.Workflow) bool { return i < 3 })},
		{"limit", workflow.ListFilter{Limit: 3}, workflowIDs(newest[:3])},
		{"no match", workflow.ListFilter{Agent: "nobody"}, nil},
		{"words of the goal, in any case", workflow.ListFilter{Words: []string{"refund", "CUSTOMER"}}, pick(func(i int, _ *workflow.Workflow) bool { return i%3 == 0 })},
		{"a word with LIKE's wildcards", workflow.ListFilter{Words: []string{"100%", "order_3"}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 3 })},
		{"a wildcard matches only itself", workflow.ListFilter{Words: []string{"order_"}}, pick(func(i int, _ *workflow.Workflow) bool { return i%3 == 0 })},
		{"no word matches", workflow.ListFilter{Words: []string{"refund", "shipment"}}, nil},
		{"a word of two characters", workflow.ListFilter{Words: []string{"2X"}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 4 })},
		{"a word of one character", workflow.ListFilter{Words: []string{"%"}}, pick(func(i int, _ *workflow.Workflow) bool { return i%3 == 0 })},
		{"short and long words", workflow.ListFilter{Words: []string{"to", "order_6"}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 6 })},
		{"a word with quotes", workflow.ListFilter{Words: []string{`"quoted"`}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 4 })},
		{"a word with a quote inside", workflow.ListFilter{Words: []string{`2x"quo`}}, nil},
		{"a word beyond ASCII", workflow.ListFilter{Words: []string{"größe"}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 4 })},
		{"a word that is an FTS operator", workflow.ListFilter{Words: []string{"AND", "NOT"}}, nil},
		{"a word that is the middle of another", workflow.ListFilter{Words: []string{"efun"}}, pick(func(i int, _ *workflow.Workflow) bool { return i%3 == 0 })},
		{"version", workflow.ListFilter{Agent: "triage", Version: "2"}, pick(func(i int, _ *workflow.Workflow) bool { return i%4 == 2 })},
		{"version of another agent", workflow.ListFilter{Agent: "billing", Version: "2"}, nil},
		{"version and words", workflow.ListFilter{Agent: "triage", Version: "1", Words: []string{"refund"}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 0 })},
		{"words before a cursor", workflow.ListFilter{Words: []string{"refund"}, Before: all[6].ID}, pick(func(i int, _ *workflow.Workflow) bool { return i%3 == 0 && i < 6 })},
		{"context number", workflow.ListFilter{Context: map[string]string{"ticket": "42"}}, pick(func(i int, _ *workflow.Workflow) bool { return i != 6 })},
		{"context string", workflow.ListFilter{Context: map[string]string{"ticket": "T-6"}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 6 })},
		{"context boolean and decimal", workflow.ListFilter{Context: map[string]string{"vip": "true", "amount": "12.5"}}, pick(func(i int, _ *workflow.Workflow) bool { return i == 6 })},
		{"context key absent", workflow.ListFilter{Context: map[string]string{"nope": "1"}}, nil},
		{"context and words", workflow.ListFilter{Words: []string{"refund"}, Context: map[string]string{"ticket": "42"}}, pick(func(i int, _ *workflow.Workflow) bool { return i%3 == 0 && i != 6 })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListWorkflows(ctx, "acme", tc.f)
			must(t, err, "list")
			if diff := cmp.Diff(tc.want, workflowIDs(got)); diff != "" {
				t.Errorf("ListWorkflows(%+v) (-want +got):\n%s", tc.f, diff)
			}
			if tc.f.Limit != 0 || tc.f.Before != "" {
				return
			}
			if n, err := s.CountWorkflows(ctx, "acme", tc.f); err != nil || n != len(tc.want) {
				t.Errorf("CountWorkflows(%+v) = %d, %v; want %d", tc.f, n, err, len(tc.want))
			}
		})
	}
	// A count is of every page: the limit and the cursor are not read.
	for _, f := range []workflow.ListFilter{{Limit: 3}, {Before: all[3].ID}, {Limit: 1, Before: all[1].ID}} {
		if n, err := s.CountWorkflows(ctx, "acme", f); err != nil || n != len(all) {
			t.Errorf("CountWorkflows(%+v) = %d, %v; want %d", f, n, err, len(all))
		}
	}
	if n, err := s.CountWorkflows(ctx, "acme", workflow.ListFilter{Words: []string{"refund"}, Before: all[6].ID, Limit: 1}); err != nil || n != 3 {
		t.Errorf("CountWorkflows of refunds, one page before the newest = %d, %v; want 3", n, err)
	}

	// Paging by cursor visits every workflow once, newest first.
	var paged []string
	f := workflow.ListFilter{Limit: 3}
	for range 10 {
		page, err := s.ListWorkflows(ctx, "acme", f)
		must(t, err, "page")
		paged = append(paged, workflowIDs(page)...)
		if len(page) < f.Limit {
			break
		}
		f.Before = page[len(page)-1].ID
	}
	if diff := cmp.Diff(workflowIDs(newest), paged); diff != "" {
		t.Errorf("paged ids (-want +got):\n%s", diff)
	}
	got, err := s.ListWorkflows(ctx, "acme", workflow.ListFilter{Limit: 1})
	must(t, err, "list one")
	if diff := cmp.Diff([]*workflow.Workflow{all[7]}, got); diff != "" {
		t.Errorf("listed workflow (-want +got):\n%s", diff)
	}
	if got, err := s.ListWorkflows(ctx, "nobody", workflow.ListFilter{}); err != nil || len(got) != 0 {
		t.Errorf("another tenant lists %v, %v; want none", workflowIDs(got), err)
	}
	if n, err := s.CountWorkflows(ctx, "globex", workflow.ListFilter{}); err != nil || n != 1 {
		t.Errorf("globex counts %d, %v; want 1", n, err)
	}
}

// testWorkflowListDenseWords lists goal words held by more goals than a
// store may look up one by one before walking newest first (stores switch
// plans at a few hundred): both plans give the same pages.
func testWorkflowListDenseWords(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	const n = 560
	var refunds, chargebacks []string // newest first
	for i := range n {
		w := newWorkflow("acme", "triage", "replica-a", i)
		w.Goal = fmt.Sprintf("Refund order %d to the customer", i)
		if i%10 == 3 {
			w.Goal += ", a chargeback is open"
			chargebacks = append([]string{w.ID}, chargebacks...)
		}
		create(t, s, w)
		refunds = append([]string{w.ID}, refunds...)
	}
	create(t, s, newWorkflow("globex", "triage", "replica-a", n))
	all := func(f workflow.ListFilter) []string {
		var ids []string
		f.Limit = 200
		for range 10 {
			page, err := s.ListWorkflows(ctx, "acme", f)
			must(t, err, "page")
			ids = append(ids, workflowIDs(page)...)
			if len(page) < f.Limit {
				break
			}
			f.Before = page[len(page)-1].ID
		}
		return ids
	}
	tests := []struct {
		name  string
		words []string
		want  []string
	}{
		{"a word in every goal", []string{"REFUND"}, refunds},
		{"a word in every goal and a short one", []string{"refund", "to"}, refunds},
		{"a common word and a rare one", []string{"refund", "chargeback"}, chargebacks},
		{"a rare word", []string{"chargeback"}, chargebacks},
		{"a common word and a missing one", []string{"refund", "shipment"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, all(workflow.ListFilter{Words: tc.words})); diff != "" {
				t.Errorf("workflows with %q (-want +got):\n%s", tc.words, diff)
			}
			if n, err := s.CountWorkflows(ctx, "acme", workflow.ListFilter{Words: tc.words}); err != nil || n != len(tc.want) {
				t.Errorf("CountWorkflows with %q = %d, %v; want %d", tc.words, n, err, len(tc.want))
			}
		})
	}
	first, err := s.ListWorkflows(ctx, "acme", workflow.ListFilter{Words: []string{"refund"}, Limit: 3})
	must(t, err, "first page")
	if diff := cmp.Diff(refunds[:3], workflowIDs(first)); diff != "" {
		t.Errorf("first page (-want +got):\n%s", diff)
	}
	if got, err := s.ListWorkflows(ctx, "globex", workflow.ListFilter{Words: []string{"chargeback"}}); err != nil || len(got) != 0 {
		t.Errorf("another tenant lists %v, %v; want none", workflowIDs(got), err)
	}
}

// testWorkflowFinishWithLastSteps stores a workflow's last steps with its
// end in one write: all land, the steps' records before the end's; an
// owner that lost the lease stores none of them.
func testWorkflowFinishWithLastSteps(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "triage", "replica-a", 1))
	must(t, s.AppendSteps(ctx, "replica-a", written(newStep(w.ID, 1), record("acme", "workflow.step", 1))), "step 1")

	// Another replica's finish with last steps stores nothing.
	other := *w
	other.Status, other.Outcome, other.FinishedAt = workflow.Completed, "routed", base.Add(time.Minute)
	wantLeaseLost(t, s.FinishWorkflow(ctx, "replica-b", &other, []*audit.Record{record("acme", "workflow.finish", 2)},
		written(newStep(w.ID, 2), record("acme", "workflow.step", 3))), "another owner's finish with a step")
	steps, err := s.Steps(ctx, w.ID, 0)
	must(t, err, "steps")
	if len(steps) != 1 {
		t.Fatalf("%d steps after a refused finish, want 1", len(steps))
	}

	w.Status, w.Outcome, w.FinishedAt = workflow.Completed, "routed", base.Add(time.Minute)
	last := []*workflow.Step{newStep(w.ID, 2), newStep(w.ID, 3)}
	must(t, s.FinishWorkflow(ctx, "replica-a", w, []*audit.Record{record("acme", "workflow.finish", 7)},
		written(last[0], record("acme", "workflow.step", 3), record("acme", "tool.call", 4)),
		written(last[1], record("acme", "workflow.step", 5), record("acme", "tool.call", 6))), "finish with the last steps")
	steps, err = s.Steps(ctx, w.ID, 1)
	must(t, err, "steps")
	if diff := cmp.Diff([]workflow.Step{*last[0], *last[1]}, steps); diff != "" {
		t.Errorf("last steps (-stored +read):\n%s", diff)
	}
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "workflow")
	if got.Status != workflow.Completed || got.Owner != "" {
		t.Errorf("workflow after finish: status %q owner %q", got.Status, got.Owner)
	}
	wantActions(t, s, "acme", "workflow.step", "workflow.step", "tool.call", "workflow.step", "tool.call", "workflow.finish")
	verifyOK(t, s, "acme", 6)
}

// testWorkflowAppendSteps stores several steps in one write, in order with
// their records; a batch with one step refused stores none of it.
func testWorkflowAppendSteps(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "triage", "replica-a", 1))
	batch := []*workflow.Step{newStep(w.ID, 1), newStep(w.ID, 2)}
	must(t, s.AppendSteps(ctx, "replica-a",
		written(batch[0], record("acme", "workflow.step", 1), record("acme", "tool.call", 2)),
		written(batch[1], record("acme", "workflow.step", 3))), "append steps 1 and 2")

	// Step 2 again, after a new step 3: neither is stored, nor their records.
	if err := s.AppendSteps(ctx, "replica-a",
		written(newStep(w.ID, 3), record("acme", "workflow.step", 4)),
		written(newStep(w.ID, 2), record("acme", "workflow.step", 5))); err == nil {
		t.Error("a batch with a second step 2 was stored")
	}
	steps, err := s.Steps(ctx, w.ID, 0)
	must(t, err, "steps")
	if diff := cmp.Diff([]workflow.Step{*batch[0], *batch[1]}, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	wantActions(t, s, "acme", "workflow.step", "tool.call", "workflow.step")
	verifyOK(t, s, "acme", 3)
}

// testWorkflowExternalSteps: an external agent's steps keep the attempt
// that made them and their journal state.
func testWorkflowExternalSteps(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	w := create(t, s, newWorkflow("acme", "triage", "replica-a", 1))
	first, second := newStep(w.ID, 1), newStep(w.ID, 2)
	first.Attempt = 1
	second.Attempt, second.Journal = 2, workflow.JournalDiverged
	must(t, s.AppendSteps(ctx, "replica-a", written(first), written(second)), "append steps")
	// A finish's last steps too.
	third := newStep(w.ID, 3)
	third.Attempt, third.Journal = 3, workflow.JournalDiverged
	w.Status, w.Outcome, w.FinishedAt = workflow.Completed, "answered", base.Add(time.Minute)
	must(t, s.FinishWorkflow(ctx, "replica-a", w, nil, written(third)), "finish with a last step")
	steps, err := s.Steps(ctx, w.ID, 0)
	must(t, err, "steps")
	if diff := cmp.Diff([]workflow.Step{*first, *second, *third}, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// testWorkflowFaults: a real replay's workflow keeps its faults, and a
// step a fault answered keeps what was injected; other workflows and
// steps have none.
func testWorkflowFaults(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	plain := create(t, s, newWorkflow("acme", "triage", "replica-a", 1))
	rate := 0.5
	w := newWorkflow("acme", "triage", "replica-a", 2)
	w.ReplayOf = plain.ID
	w.Faults = []fault.Fault{
		{Tool: "payments", Operation: "getTransaction", When: "args.id != ''", Rate: &rate,
			Result: fault.Result{Status: 503, Body: json.RawMessage(`{"error":"down"}`), Headers: map[string]string{"Retry-After": "30"}}},
		{Tool: "cases", Result: fault.Result{Error: fault.ErrorTimeout}},
	}
	create(t, s, w)
	injected := newStep(w.ID, 1)
	injected.Sent, injected.Request, injected.Attempts, injected.HTTPStatus = false, nil, 0, 503
	injected.Injected = &fault.Injected{Fault: 0, Status: 503}
	timedOut := newStep(w.ID, 2)
	timedOut.Sent, timedOut.Request, timedOut.Attempts, timedOut.HTTPStatus = false, nil, 0, 0
	timedOut.Injected = &fault.Injected{Fault: 1, Error: fault.ErrorTimeout}
	must(t, s.AppendSteps(ctx, "replica-a", written(injected), written(timedOut), written(newStep(w.ID, 3))), "append steps")
	got, err := s.Workflow(ctx, "acme", w.ID)
	must(t, err, "read workflow")
	if diff := cmp.Diff(w.Faults, got.Faults); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	steps, err := s.Steps(ctx, w.ID, 0)
	must(t, err, "steps")
	if diff := cmp.Diff([]workflow.Step{*injected, *timedOut, *newStep(w.ID, 3)}, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if got, err := s.Workflow(ctx, "acme", plain.ID); err != nil || got.Faults != nil {
		t.Errorf("a workflow without faults reads back %+v (%v)", got.Faults, err)
	}
}

// wantActions checks the tenant's audit actions, in chain order.
func wantActions(t *testing.T, s Store, tenant string, want ...string) {
	t.Helper()
	recs, err := s.QueryAudit(ctxOf(t), tenant, audit.Filter{Limit: 100})
	must(t, err, "query audit")
	var actions []string
	for _, r := range slices.Backward(recs) {
		actions = append(actions, r.Action)
	}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Errorf("audit actions in chain order (-want +got):\n%s", diff)
	}
}

// written is a step with its records, as a write stores them.
func written(s *workflow.Step, recs ...*audit.Record) workflow.StepWrite {
	return workflow.StepWrite{Step: s, Records: recs}
}

// answered is step seq of c's workflow, the completion c reports, stored
// with it.
func answered(c *workflow.Completion, seq int) workflow.StepWrite {
	st := newStep(c.WorkflowID, seq)
	st.Kind, st.Tool, st.Operation, st.Model = "completion", "", "", c.Model
	return workflow.StepWrite{Step: st, Completion: c}
}

// testWorkflowKeys: an invoke's idempotency key is stored with its workflow
// and the request's record in one transaction, is unique in its tenant, and
// finds the workflow with the request's hash.
func testWorkflowKeys(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	key := workflow.IdempotencyKey("user-1", "/v1/agents/triage/invoke", "k-1")
	w := newWorkflow("acme", "triage", "rep-a", 1)
	w.IdempotencyKey, w.RequestHash = key, "hash-1"
	must(t, s.CreateWorkflow(ctx, w, record("acme", "agent.invoke", 1)), "create with a key")
	got, err := s.WorkflowByKey(ctx, "acme", key)
	must(t, err, "workflow by key")
	if got.ID != w.ID || got.RequestHash != "hash-1" || got.IdempotencyKey != key {
		t.Errorf("workflow by key = %s (hash %q, key %q), want %s (hash-1)", got.ID, got.RequestHash, got.IdempotencyKey, w.ID)
	}

	// A second workflow with the key is refused, with its record: neither is stored.
	dup := newWorkflow("acme", "triage", "rep-b", 2)
	dup.IdempotencyKey, dup.RequestHash = key, "hash-2"
	err = s.CreateWorkflow(ctx, dup, record("acme", "agent.invoke", 2))
	wantCode(t, err, problem.Conflict, "second workflow with the key")
	if !errors.Is(err, workflow.ErrKeyTaken) {
		t.Errorf("second workflow with the key: %v, want ErrKeyTaken", err)
	}
	_, err = s.Workflow(ctx, "acme", dup.ID)
	wantCode(t, err, problem.NotFound, "the refused workflow")
	wantActions(t, s, "acme", "agent.invoke")

	// The key is per tenant and per principal; workflows without one are many.
	other := newWorkflow("globex", "triage", "rep-a", 3)
	other.IdempotencyKey = key
	create(t, s, other)
	create(t, s, newWorkflow("acme", "triage", "rep-a", 4))
	create(t, s, newWorkflow("acme", "triage", "rep-a", 5))
	_, err = s.WorkflowByKey(ctx, "acme", workflow.IdempotencyKey("user-2", "/v1/agents/triage/invoke", "k-1"))
	wantCode(t, err, problem.NotFound, "another principal's key")

	// An expired key is taken off its workflow (not before), and may be
	// taken again.
	must(t, s.ExpireKey(ctx, "acme", key, w.StartedAt), "expire before the start")
	_, err = s.WorkflowByKey(ctx, "acme", key)
	must(t, err, "the key of a workflow started at the expiry")
	must(t, s.ExpireKey(ctx, "acme", key, w.StartedAt.Add(time.Second)), "expire")
	_, err = s.WorkflowByKey(ctx, "acme", key)
	wantCode(t, err, problem.NotFound, "an expired key")
	again := newWorkflow("acme", "triage", "rep-a", 6)
	again.IdempotencyKey = key
	create(t, s, again)

	// Concurrent creations with one key: exactly one is stored.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newWorkflow("acme", "triage", "rep-c", 10+i)
			c.IdempotencyKey = workflow.IdempotencyKey("user-1", "/v1/agents/triage/invoke", "race")
			errs[i] = s.CreateWorkflow(ctx, c, nil)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, workflow.ErrKeyTaken) {
			t.Errorf("concurrent creation: %v, want nil or ErrKeyTaken", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d concurrent creations with one key stored, want 1", ok)
	}
}
