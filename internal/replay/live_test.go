package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// reviewDef is an LLM agent of two plan steps without tools: the model's
// first answer is the finding, its second (asked about the finding) the
// decision, and the outcome is the decision. purpose is the system
// message (the instructions).
const reviewDef = `{
  "purpose": %q,
  "tools": ["refunds"],
  "steps": [
    {"action": "assess", "plan": {"prompt": "goal"}, "save_as": "finding"},
    {"action": "decide", "plan": {"prompt": "'Decide on: ' + finding"}, "save_as": "decision"}
  ],
  "outcome": "decision"
}`

const (
	lenient = "You review refunds. Approve refunds under 500."
	strict  = "You review refunds. Escalate refunds over 100."
)

// rulesModel is the scripted model of these tests: its answers depend on
// the instructions (the system message) and the goal. It counts what it
// answered by request hash and can hold requests until released.
type rulesModel struct {
	mu       sync.Mutex
	answered map[string]int
	asked    int
	// hold, when set, holds every request it says yes to until release
	// closes (or the request's context ends); held counts those held.
	hold    func(n int, req agent.ChatRequest) bool
	release chan struct{}
	held    chan struct{}
	// delay, when set, is how long each answer takes; inFlight and
	// peak count the requests being answered.
	delay          time.Duration
	inFlight, peak atomic.Int32
}

func newRulesModel() *rulesModel {
	return &rulesModel{answered: map[string]int{}, release: make(chan struct{}), held: make(chan struct{}, 100)}
}

// answer: under the strict instructions, a refund over 100 is first
// looked up (refunds.getRefund), then found too high.
func (m *rulesModel) answer(req agent.ChatRequest) agent.ChatMessage {
	// The user message is the goal, the context and, last, the prompt.
	system, user := req.Messages[0].Content, req.Messages[1].Content
	prompt := user[strings.LastIndex(user, "\n")+1:]
	amount := 0
	fmt.Sscanf(prompt[strings.LastIndex(prompt, " ")+1:], "%d", &amount)
	looked := req.Messages[len(req.Messages)-1].Role == agent.RoleTool
	text := "fine: " + fmt.Sprint(amount)
	switch {
	case strings.HasPrefix(prompt, "Decide on: "):
		text = "approved"
		if strings.Contains(prompt, "too high") {
			text = "escalated"
		}
	case strings.Contains(system, "Escalate refunds over 100") && amount > 100 && !looked:
		return agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{{ID: "call_1",
			Name: agent.FunctionName("refunds", "getRefund"), Arguments: fmt.Sprintf(`{"id":"r%d"}`, amount)}}}
	case strings.Contains(system, "Escalate refunds over 100") && amount > 100:
		text = "too high: " + fmt.Sprint(amount)
	}
	return agent.ChatMessage{Role: agent.RoleAssistant, Content: text}
}

// Complete implements replay.Models, at 3 input and 2 output tokens a
// completion and 1 USD a million tokens.
func (m *rulesModel) Complete(ctx context.Context, _, _ string, _, n int, req agent.ChatRequest) (agent.ChatResponse, *replay.Cost, error) {
	m.mu.Lock()
	m.asked++
	m.mu.Unlock()
	if m.delay > 0 {
		n := m.inFlight.Add(1)
		defer m.inFlight.Add(-1)
		for p := m.peak.Load(); n > p && !m.peak.CompareAndSwap(p, n); p = m.peak.Load() {
		}
		time.Sleep(m.delay)
	}
	if m.hold != nil && m.hold(n, req) {
		m.held <- struct{}{}
		select {
		case <-m.release:
		case <-ctx.Done():
			return agent.ChatResponse{}, nil, ctx.Err()
		}
	}
	hash, err := req.Hash()
	if err != nil {
		return agent.ChatResponse{}, nil, err
	}
	m.mu.Lock()
	m.answered[fmt.Sprint(n, "/", hash)]++
	m.mu.Unlock()
	return agent.ChatResponse{Message: m.answer(req),
		Usage: &agent.Usage{InputTokens: 3, OutputTokens: 2}, FinishReason: "stop", Model: "rules-1"}, &replay.Cost{Amount: 5e-6, Currency: "USD"}, nil
}

// runnerModels are the model as a workflow runner's models, to record the
// original runs: every name is the rules model.
func runnerModels(m *rulesModel) (model.Lookup, llm.Clients) {
	lookup := model.LookupFunc(func(_ context.Context, tenant, name string) (*model.Model, error) {
		return &model.Model{ID: "mdl_rules", Tenant: tenant, Name: name, Provider: model.OpenAI, Model: "rules-1", Revision: 1,
			Price: &model.Price{InputPerMTok: 1, OutputPerMTok: 1, Currency: "USD"}}, nil
	})
	return lookup, llm.SameClient(llm.ClientFunc(func(ctx context.Context, req agent.ChatRequest) (agent.ChatResponse, error) {
		resp, _, err := m.Complete(ctx, "acme", "", 0, 0, req)
		return resp, err
	}))
}

// reviewWorld is a SQLite store with review@1 (lenient) and review@2
// (strict) deployed, and finished workflows of review@1 recorded by a real
// runner against the model.
type reviewWorld struct {
	db       *sqlite.DB
	runner   *workflow.Runner
	model    *rulesModel
	wfIDs    []string
	svc      *replay.Service
	recorded int
}

func newReviewWorld(t *testing.T, amounts ...int) *reviewWorld {
	return newReviewWorldAt(t, "http://refunds.invalid", nil, amounts...)
}

// newReviewWorldAt is newReviewWorld with the refunds tool at toolURL,
// called by caller.
func newReviewWorldAt(t *testing.T, toolURL string, caller workflow.ToolCaller, amounts ...int) *reviewWorld {
	t.Helper()
	ctx := context.Background()
	db := sqlite.NewTestDB(t)
	now := time.Now()
	refunds := &tool.Tool{ID: "tool_01JDREFUNDS000000000000000", Tenant: "acme", Name: "refunds", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, Revision: 1, OperationCount: 2,
		IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: toolURL}
	ops := []tool.Operation{
		{ID: "getRefund", Kind: tool.Read, Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
			HTTP: &tool.HTTPBinding{Method: "GET", Path: "/refunds/{id}", Params: []tool.Param{{Name: "id", In: "path", Required: true}}}},
		{ID: "cancelRefund", Kind: tool.Write, Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
			HTTP: &tool.HTTPBinding{Method: "POST", Path: "/refunds/{id}/cancel", Params: []tool.Param{{Name: "id", In: "path", Required: true}}}},
	}
	if err := db.CreateTool(ctx, refunds, ops, nil); err != nil {
		t.Fatal(err)
	}
	for i, purpose := range []string{lenient, strict} {
		def := json.RawMessage(fmt.Sprintf(reviewDef, purpose))
		if err := db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "review", Version: fmt.Sprint(i + 1), Definition: def, Tools: []string{"refunds"},
			DeployedAt: time.Now()}, i == 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := &reviewWorld{db: db, model: newRulesModel()}
	lookup, clients := runnerModels(w.model)
	w.runner = workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Models: lookup, LLM: clients, Caller: caller})
	runCtx, stop := context.WithCancel(ctx)
	go w.runner.Run(runCtx)
	t.Cleanup(func() { stop(); w.runner.Close(context.Background()) })
	for _, amount := range amounts {
		wf, err := w.runner.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "review", Version: "1",
			Goal: fmt.Sprint("Refund of ", amount), Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}})
		if err != nil {
			t.Fatal(err)
		}
		done, _, err := w.runner.Finished(ctx, "acme", wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.Outcome != "approved" {
			t.Fatalf("review@1 of %d: %s (%s), want approved", amount, done.Outcome, done.Error)
		}
		w.wfIDs = append(w.wfIDs, wf.ID)
	}
	w.recorded = w.model.asked
	w.svc = &replay.Service{Workflows: db, Versions: db, Programs: w.runner, Store: db, Models: w.model}
	return w
}

// TestLiveReplayAsksTheTargetsModelWithItsInstructions replays a lenient
// version's history against a strict one: served from the record, the
// strict version's conversations were never held, so its plan steps end
// unrecorded; live, the model answers the strict instructions and the
// outcome changes where the amount is over the strict limit.
func TestLiveReplayAsksTheTargetsModelWithItsInstructions(t *testing.T) {
	w := newReviewWorld(t, 80, 300)
	ctx := context.Background()
	rec, err := w.svc.Replay(ctx, replay.Request{Tenant: "acme", WorkflowID: w.wfIDs[1], Target: "review@2", DryRun: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LLM != replay.LLMRecorded || rec.ReplayOutcome == "escalated" || w.model.asked != w.recorded {
		t.Errorf("recorded replay: llm %q, outcome %q, %d new requests; want recorded, no escalation, none", rec.LLM, rec.ReplayOutcome, w.model.asked-w.recorded)
	}
	if rec.Usage.Original.Completions != 2 || rec.Usage.Replay.Completions != 0 {
		t.Errorf("recorded replay usage %+v, want 2 original completions and none replayed", rec.Usage)
	}

	for i, c := range []struct {
		outcome     string
		completions int
		delta       replay.Delta
	}{
		{"approved", 2, replay.Delta{}},
		// The strict version looks the refund up first: an added call, not
		// made (no recorded answer, unrecorded_calls skip), and the added
		// completion that reads its answer.
		{"escalated", 3, replay.Delta{StepsAdded: 2, ToolCallsChanged: 1}},
	} {
		before := w.model.asked
		rp, err := w.svc.Replay(ctx, replay.Request{Tenant: "acme", WorkflowID: w.wfIDs[i], Target: "review@2", DryRun: true,
			Mode: replay.Mode{LLM: replay.LLMLive}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rp.ReplayOutcome != c.outcome || rp.OriginalOutcome != "approved" || w.model.asked-before != c.completions {
			t.Errorf("live replay of workflow %d: %s -> %s after %d requests; want approved -> %s after %d", i, rp.OriginalOutcome,
				rp.ReplayOutcome, w.model.asked-before, c.outcome, c.completions)
		}
		if rp.Delta != c.delta {
			t.Errorf("live replay of workflow %d: delta %+v, want %+v", i, rp.Delta, c.delta)
		}
		if added := addedCall(rp); c.delta.StepsAdded > 0 && (added == nil || added.Status != agent.StatusUnrecorded || added.Operation != "getRefund") {
			t.Errorf("added call %+v, want refunds.getRefund unrecorded", added)
		}
		if len(rp.Completions) != c.completions || len(rp.OriginalCompletions) != 2 || rp.Completions[0].Request == nil ||
			!strings.HasPrefix(rp.Completions[0].Request.Messages[0].Content, strict) {
			t.Fatalf("live replay keeps completions %+v and originals %+v, want both conversations, the new one under the strict instructions",
				rp.Completions, rp.OriginalCompletions)
		}
		n := int64(c.completions)
		u := rp.Usage
		// The original run's cost is its recorded one: 10 tokens at a dollar a million.
		if oc := u.Original.Cost; oc == nil || fmt.Sprintf("%.6f %s", oc.Amount, oc.Currency) != "0.000010 USD" {
			t.Errorf("original cost %+v, want the recorded 0.000010 USD", oc)
		}
		u.Original.Cost = nil
		if u.Original != (replay.Usage{InputTokens: 6, OutputTokens: 4, Completions: 2}) ||
			u.Replay.InputTokens != 3*n || u.Replay.OutputTokens != 2*n || u.Replay.Completions != c.completions ||
			u.Replay.Cost == nil || fmt.Sprintf("%.6f %s", u.Replay.Cost.Amount, u.Replay.Cost.Currency) != fmt.Sprintf("%.6f USD", 5e-6*float64(n)) {
			t.Errorf("usage %+v (replay cost %+v), want the original's 2 completions and the replay's %d, priced", u, u.Replay.Cost, n)
		}
		// Kept: the replay reads the same every time, with no new request.
		before = w.model.asked
		again, err := w.db.Replay(ctx, "acme", rp.ID)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(rp)
		b, _ := json.Marshal(again)
		if string(a) != string(b) || w.model.asked != before {
			t.Errorf("the stored replay reads\n%s\nwant\n%s", b, a)
		}
	}
}

// TestALiveReplayRefusesWithoutModels checks that llm live is refused, as
// a validation error naming llm, where the server has no models.
func TestALiveReplayRefusesWithoutModels(t *testing.T) {
	w := newReviewWorld(t, 80)
	w.svc.Models = nil
	_, err := w.svc.Replay(context.Background(), replay.Request{Tenant: "acme", WorkflowID: w.wfIDs[0], Target: "review@2", DryRun: true,
		Mode: replay.Mode{LLM: replay.LLMLive}}, nil)
	if err == nil || !strings.Contains(err.Error(), "llm") {
		t.Errorf("live replay without models: %v, want a validation error naming llm", err)
	}
	_, err = w.svc.Replay(context.Background(), replay.Request{Tenant: "acme", WorkflowID: w.wfIDs[0], Target: "review@2", DryRun: true,
		Mode: replay.Mode{LLM: "sometimes"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "llm") {
		t.Errorf("llm sometimes: %v, want a validation error naming llm", err)
	}
}

// TestALiveBatchResumedAfterAKillRequestsNoCompletionTwice runs a live
// batch of eight workflows four at a time, with the decisions of the last
// four held; it stops the runner (a crash: the lease is given up, the
// held requests are cut) once their findings are answered and journaled,
// resumes the batch on another runner, and checks that every workflow was
// replayed once and that no answered completion was requested again.
func TestALiveBatchResumedAfterAKillRequestsNoCompletionTwice(t *testing.T) {
	amounts := []int{10, 200, 30, 400, 50, 600, 70, 800}
	w := newReviewWorld(t, amounts...)
	ctx := context.Background()
	late := map[string]bool{}
	for _, a := range amounts[4:] {
		late[fmt.Sprint("Goal: Refund of ", a, "\n")] = true
	}
	w.model.hold = func(n int, req agent.ChatRequest) bool {
		if n != 2 {
			return false
		}
		goal, _, _ := strings.Cut(req.Messages[1].Content, "\n")
		return late[goal+"\n"]
	}
	// The first four items are stored before the last four are taken.
	items := append([]string{}, w.wfIDs...)
	b := replay.NewBatch("acme", "review@2", len(items), replay.Creator{Sub: "alice"}, time.Now().UTC())
	b.Mode, b.Concurrency = replay.Mode{LLM: replay.LLMLive, UnrecordedCalls: replay.UnrecordedSkip}, 4
	first := &replay.BatchRunner{Service: w.svc, Store: w.db, Owner: "replica-a", Lease: time.Minute}
	if err := w.db.CreateBatch(ctx, b, items, "replica-a", first.LeaseUntil(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	runCtx, kill := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); first.Run(runCtx) }()
	for range 4 {
		select {
		case <-w.model.held:
		case <-time.After(20 * time.Second):
			kill()
			t.Fatal("the last four decisions were not all requested within 20 s")
		}
	}
	kill()
	<-ran
	got, err := w.db.Batch(ctx, "acme", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != replay.BatchRunning || got.Done >= len(items) {
		t.Fatalf("after the kill the batch is %s with %d done, want running and unfinished", got.Status, got.Done)
	}
	answered := map[string]int{}
	w.model.mu.Lock()
	for k, n := range w.model.answered {
		answered[k] = n
	}
	w.model.hold = nil
	w.model.mu.Unlock()

	second := &replay.BatchRunner{Service: w.svc, Store: w.db, Owner: "replica-b", Lease: time.Minute}
	got = runUntilDone(t, w.db, second, b.ID)
	if got.Status != replay.BatchCompleted || got.Done != len(items) || got.Changed != 4 {
		t.Fatalf("resumed batch: %s, %d done, %d changed (%s); want completed, 8 and 4", got.Status, got.Done, got.Changed, got.Error)
	}
	w.model.mu.Lock()
	for k, n := range w.model.answered {
		if n != 1 {
			t.Errorf("completion %s was answered %d times (%d before the kill)", k, n, answered[k])
		}
	}
	w.model.mu.Unlock()
	rps, err := w.db.BatchReplays(ctx, b.ID, false, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, rp := range rps {
		seen[rp.WorkflowID]++
		want := 2
		if rp.ReplayOutcome == "escalated" {
			want = 3 // the lookup, the finding, the decision
		}
		if len(rp.Completions) != want || rp.LLM != replay.LLMLive {
			t.Errorf("replay of %s keeps %d completions, llm %q; want %d, live", rp.WorkflowID, len(rp.Completions), rp.LLM, want)
		}
	}
	for _, id := range items {
		if seen[id] != 1 {
			t.Errorf("workflow %s has %d replays in the batch, want 1", id, seen[id])
		}
	}
	if u := got.Usage; u.Original.Completions != 16 || u.Original.InputTokens != 48 || u.Original.Cost == nil ||
		u.Replay.Completions != 20 || u.Replay.InputTokens != 60 || u.Replay.Cost == nil {
		t.Errorf("batch usage %+v, want 16 priced completions originally, 20 replayed", u)
	}
}

// runUntilDone runs r until the batch is over and returns it.
func runUntilDone(t *testing.T, db *sqlite.DB, r *replay.BatchRunner, id string) *replay.Batch {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); r.Run(ctx) }()
	defer func() { stop(); <-ran }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := db.Batch(context.Background(), "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != replay.BatchRunning {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch is still running after 20 s: %+v", got)
		}
	}
}

// TestUnrecordedReadsAreMadeLiveAndWritesNever replays against the strict
// version, whose lookup was never recorded, on a refunds API that fails
// the test on any request but a GET: with unrecorded_calls skip nothing
// reaches it, with read exactly the lookup does (and its answer is the
// step's), and a write is refused even when the program calls it a read.
func TestUnrecordedReadsAreMadeLiveAndWritesNever(t *testing.T) {
	var gets atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("the refunds API got %s %s: a dry run must never send a write", r.Method, r.URL.Path)
			http.Error(rw, "no writes here", http.StatusMethodNotAllowed)
			return
		}
		gets.Add(1)
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"id":%q,"status":"pending"}`, strings.TrimPrefix(r.URL.Path, "/refunds/"))
	}))
	defer api.Close()
	caller := toolcall.New(toolcall.Options{Client: outbound.New(outbound.Options{AllowPrivate: true}), Timeout: 5 * time.Second})
	w := newReviewWorldAt(t, api.URL, caller, 300)
	w.svc.Reader = w.runner
	ctx := context.Background()
	replayOf := func(mode replay.Mode) *replay.Replay {
		t.Helper()
		rp, err := w.svc.Replay(ctx, replay.Request{Tenant: "acme", WorkflowID: w.wfIDs[0], Target: "review@2", DryRun: true, Mode: mode}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rp
	}

	for _, mode := range []replay.Mode{{LLM: replay.LLMRecorded, UnrecordedCalls: replay.UnrecordedRead}, {LLM: replay.LLMLive}} {
		replayOf(mode)
		if n := gets.Load(); n != 0 {
			t.Fatalf("%+v: the API got %d requests, want none", mode, n)
		}
	}
	rp := replayOf(replay.Mode{LLM: replay.LLMLive, UnrecordedCalls: replay.UnrecordedRead})
	if n := gets.Load(); n != 1 {
		t.Errorf("unrecorded_calls read: the API got %d requests, want the one lookup", n)
	}
	got := addedCall(rp)
	if got == nil {
		t.Fatalf("steps %+v, want the added lookup", rp.Steps)
	}
	if got.Status != agent.StatusOK || string(got.Result) != `{"id":"r300","status":"pending"}` || got.HTTPStatus != 200 || !got.Sent {
		t.Errorf("live lookup step %+v, want ok with the API's answer", got)
	}
	if rp.ReplayOutcome != "escalated" || rp.UnrecordedCalls != replay.UnrecordedRead {
		t.Errorf("outcome %q mode %+v, want escalated, read", rp.ReplayOutcome, rp.Mode)
	}

	wf, err := w.db.Workflow(ctx, "acme", w.wfIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	res, sent, err := w.runner.Read(ctx, wf, agent.ToolCall{Tool: "refunds", Operation: "cancelRefund", Kind: tool.Read,
		Args: map[string]any{"id": "r300"}})
	if err != nil || res.Status != agent.StatusUnrecorded || sent.Attempts != 0 || gets.Load() != 1 {
		t.Errorf("a write called a read: %+v, %d attempts, %v; want unrecorded and nothing sent", res, sent.Attempts, err)
	}
}

// TestALiveBatchRunsItsConcurrency checks that a live batch keeps
// concurrency replays in flight, no more: a slow model sees that many
// requests at once.
func TestALiveBatchRunsItsConcurrency(t *testing.T) {
	amounts := make([]int, 12)
	for i := range amounts {
		amounts[i] = 10 + i
	}
	w := newReviewWorld(t, amounts...)
	w.model.delay = 40 * time.Millisecond
	b := replay.NewBatch("acme", "review@2", len(w.wfIDs), replay.Creator{Sub: "alice"}, time.Now().UTC())
	b.Mode, b.Concurrency = replay.Mode{LLM: replay.LLMLive}, 4
	r := &replay.BatchRunner{Service: w.svc, Store: w.db, Owner: "replica-a", Workers: 1, Lease: time.Minute}
	if err := w.db.CreateBatch(context.Background(), b, w.wfIDs, "replica-a", r.LeaseUntil(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	got := runUntilDone(t, w.db, r, b.ID)
	if got.Status != replay.BatchCompleted || got.Done != 12 {
		t.Fatalf("batch %s with %d done (%s), want completed with 12", got.Status, got.Done, got.Error)
	}
	if p := w.model.peak.Load(); p != 4 {
		t.Errorf("the model saw at most %d requests at once, want the batch's concurrency, 4", p)
	}
}

// addedCall is the replay's added step that names an operation, nil when
// none was added.
func addedCall(rp *replay.Replay) *workflow.Step {
	for _, e := range rp.Steps {
		if e.Original == nil && e.Replay != nil && e.Replay.Operation != "" {
			return e.Replay
		}
	}
	return nil
}
