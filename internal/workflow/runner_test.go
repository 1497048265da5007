package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// ledger is a fake tool API: reads answer at once; the write blocks while
// hold is set, until the caller's context ends.
type ledger struct {
	mu    sync.Mutex
	calls []string // operation and Idempotency-Key of each call
	hold  bool
	held  chan struct{}
	// completes makes a held write succeed when its caller's context ends.
	completes bool
	// writeErr, when set, is the answer to every write.
	writeErr error
}

func (l *ledger) Call(ctx context.Context, req tool.CallRequest) (tool.CallResult, error) {
	l.mu.Lock()
	l.calls = append(l.calls, req.Operation.ID+" "+req.IdempotencyKey)
	write := req.Operation.Kind == tool.Write
	hold, completes, writeErr := l.hold && write, l.completes, l.writeErr
	l.mu.Unlock()
	if hold {
		l.held <- struct{}{}
		<-ctx.Done()
		if !completes {
			return tool.CallResult{}, ctx.Err()
		}
	}
	if write && writeErr != nil {
		return tool.CallResult{Status: 422}, writeErr
	}
	return tool.CallResult{Status: 200, Body: json.RawMessage(`{"amount": 42}`)}, nil
}

func (l *ledger) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// setup stores an idempotent ledger tool and an agent calling its read,
// then its write.
func setup(t *testing.T) *sqlite.DB {
	t.Helper()
	db := sqlite.NewTestDB(t)
	ctx := context.Background()
	now := time.Now()
	lt := &tool.Tool{ID: "tool_01JDLEDGER0000000000000000", Tenant: "acme", Name: "ledger", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, IdempotencySupport: true,
		Revision: 1, OperationCount: 2, IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: "http://ledger.test"}
	ops := []tool.Operation{
		{ID: "getTransaction", Kind: tool.Read, HTTP: &tool.HTTPBinding{Method: "GET", Path: "/t", Params: []tool.Param{{Name: "note", In: "query"}}}},
		{ID: "postEntry", Kind: tool.Write, HTTP: &tool.HTTPBinding{Method: "POST", Path: "/e", Body: &tool.Body{ContentType: "application/json"}}},
	}
	if err := db.CreateTool(ctx, lt, ops, nil); err != nil {
		t.Fatal(err)
	}
	def := json.RawMessage(`{"tools": ["ledger"], "steps": [
		{"action": "fetch", "call": "ledger.getTransaction", "save_as": "txn"},
		{"action": "post", "call": "ledger.postEntry", "args": {"amount": "txn.amount"}}],
		"outcome": "'settled'"}`)
	if err := db.DeployVersion(ctx, &agent.Version{Tenant: "acme", Name: "settle", Definition: def, Tools: []string{"ledger"}, DeployedAt: now}, false, nil); err != nil {
		t.Fatal(err)
	}
	return db
}

func newRunner(db *sqlite.DB, owner string, caller workflow.ToolCaller) *workflow.Runner {
	return workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: caller, Owner: owner, Lease: time.Minute})
}

func TestAnotherRunnerResumesAfterTheLastRecordedStep(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	api := &ledger{hold: true, held: make(chan struct{}, 1)}
	a := newRunner(db, "replica-a", api)
	wf, err := a.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "settle", Goal: "settle", Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}, MaxToolCalls: new(5)})
	if err != nil {
		t.Fatal(err)
	}
	<-api.held // step 1 is stored; step 2's write is in flight

	// Replica b follows the workflow through the store while a owns it.
	b := newRunner(db, "replica-b", api)
	var events []string
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		for ev, err := range b.Follow(ctx, "acme", wf.ID, 0) {
			if err != nil {
				t.Error(err)
				return
			}
			var m map[string]any
			json.Unmarshal(ev.Data, &m)
			events = append(events, m["event"].(string)+":"+str(m["action"])+str(m["outcome"]))
		}
	}()

	// a stops without finishing the workflow and releases its lease; b claims it.
	api.mu.Lock()
	api.hold = false
	api.mu.Unlock()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go b.Run(runCtx)
	done, err := b.Wait(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %+v", done)
	}
	key := wf.ID + ".2"
	want := []string{"getTransaction " + wf.ID + ".1", "postEntry " + key, "postEntry " + key}
	if diff := cmp.Diff(want, api.seen()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	<-followed
	if diff := cmp.Diff([]string{"step:fetch", "step:post", "complete:settled"}, events); diff != "" {
		t.Errorf("followed events (-want +got):\n%s", diff)
	}
	steps, err := db.Steps(ctx, wf.ID, 0)
	if err != nil || len(steps) != 2 {
		t.Fatalf("stored steps %+v, %v", steps, err)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func TestFollowAfterAnEventIDAndPastTheEnd(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	r := newRunner(db, "replica-a", &ledger{})
	wf, err := r.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "settle", Goal: "settle", Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}, MaxToolCalls: new(5)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx, "acme", wf.ID); err != nil {
		t.Fatal(err)
	}
	ids := func(after int) []int {
		var out []int
		for ev, err := range r.Follow(ctx, "acme", wf.ID, after) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev.ID)
		}
		return out
	}
	for _, tc := range []struct {
		after int
		want  []int
	}{{0, []int{1, 2, 3}}, {1, []int{2, 3}}, {2, []int{3}}, {3, nil}} {
		if diff := cmp.Diff(tc.want, ids(tc.after)); diff != "" {
			t.Errorf("after %d (-want +got):\n%s", tc.after, diff)
		}
	}
	if _, err := r.Wait(ctx, "globex", wf.ID); err == nil {
		t.Error("another tenant could wait on the workflow")
	}
}

// TestFinishedGivesTheStoredSteps checks that a waiter gets the same
// workflow and steps whether the execution hands them over as it finishes
// or the waiter comes after it and reads them from the store.
func TestFinishedGivesTheStoredSteps(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	r := newRunner(db, "replica-a", &ledger{})
	start := func() string {
		wf, err := r.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "settle", Goal: "settle", Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}, MaxToolCalls: new(5)})
		if err != nil {
			t.Fatal(err)
		}
		return wf.ID
	}
	check := func(name string, wf *workflow.Workflow, steps []workflow.Step, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		stored, err := db.Workflow(ctx, "acme", wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wf.Status != workflow.Completed || wf.Outcome != stored.Outcome || wf.Status != stored.Status {
			t.Errorf("%s: workflow %s/%s, stored %s/%s", name, wf.Status, wf.Outcome, stored.Status, stored.Outcome)
		}
		want, err := db.Steps(ctx, wf.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, steps); len(want) != 2 || diff != "" {
			t.Errorf("%s: steps (-stored +given):\n%s", name, diff)
		}
	}

	// Waiting from the start: the end is handed over.
	wf, steps, err := r.Finished(ctx, "acme", start())
	check("handed over", wf, steps, err)

	// Coming after the end: it is read from the store.
	id := start()
	if _, err := r.Wait(ctx, "acme", id); err != nil {
		t.Fatal(err)
	}
	wf, steps, err = r.Finished(ctx, "acme", id)
	check("read back", wf, steps, err)
}

// request invokes an agent of acme as alice, who may call every tool.
func request(agentName string) workflow.StartRequest {
	return workflow.StartRequest{Tenant: "acme", Agent: agentName, Goal: "settle", MaxToolCalls: new(5),
		Caller: workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"tool:*"}}}
}

// updateLedger stores the next revision of the ledger tool, as change makes it.
func updateLedger(t *testing.T, db *sqlite.DB, change func(*tool.Tool)) {
	t.Helper()
	ctx := context.Background()
	lt, err := db.ToolByName(ctx, "acme", "ledger")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := db.Operations(ctx, "acme", lt.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	change(lt)
	lt.Revision++
	if err := db.UpdateTool(ctx, lt, ops, nil); err != nil {
		t.Fatal(err)
	}
}

// deploy stores the first version of an agent of acme calling the ledger.
func deploy(t *testing.T, db *sqlite.DB, name, def string) {
	t.Helper()
	v := &agent.Version{Tenant: "acme", Name: name, Definition: json.RawMessage(def), Tools: []string{"ledger"}, DeployedAt: time.Now()}
	if err := db.DeployVersion(context.Background(), v, false, nil); err != nil {
		t.Fatal(err)
	}
}

// failureDetail is the detail of a failed workflow's problem document.
func failureDetail(t *testing.T, wf *workflow.Workflow) string {
	t.Helper()
	var doc struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(wf.Error, &doc); err != nil {
		t.Fatalf("error document %s: %v", wf.Error, err)
	}
	return doc.Detail
}

// faultyStore is the SQLite store, except that each error in fail is
// returned once by the method it is keyed by; claimed, when set, is sent to
// (without blocking) as ClaimExpired is called, and resumed is called after
// Completions.
type faultyStore struct {
	*sqlite.DB
	mu      sync.Mutex
	fail    map[string]error
	claimed chan struct{}
	resumed func()
}

func (s *faultyStore) failure(method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.fail[method]
	delete(s.fail, method)
	return err
}

func (s *faultyStore) RecordIntent(ctx context.Context, owner string, in workflow.Intent) error {
	if err := s.failure("RecordIntent"); err != nil {
		return err
	}
	return s.DB.RecordIntent(ctx, owner, in)
}

func (s *faultyStore) AppendSteps(ctx context.Context, owner string, steps ...workflow.StepWrite) error {
	if err := s.failure("AppendSteps"); err != nil {
		return err
	}
	return s.DB.AppendSteps(ctx, owner, steps...)
}

func (s *faultyStore) Completions(ctx context.Context, workflowID string) (map[int]json.RawMessage, error) {
	if err := s.failure("Completions"); err != nil {
		return nil, err
	}
	m, err := s.DB.Completions(ctx, workflowID)
	if s.resumed != nil {
		s.resumed()
	}
	return m, err
}

func (s *faultyStore) ClaimExpired(ctx context.Context, owner string, now, until time.Time, limit int) ([]*workflow.Workflow, error) {
	if s.claimed != nil {
		select {
		case s.claimed <- struct{}{}:
		default:
		}
	}
	return s.DB.ClaimExpired(ctx, owner, now, until, limit)
}

// stopAtTheWrite starts settle on replica a and closes a while the write is
// in flight, leaving the workflow to be resumed.
func stopAtTheWrite(t *testing.T, db *sqlite.DB, api *ledger) *workflow.Workflow {
	t.Helper()
	ctx := context.Background()
	a := newRunner(db, "replica-a", api)
	wf, err := a.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	<-api.held
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return wf
}

// resumeElsewhere resumes the workflow on replica b and waits for its end.
func resumeElsewhere(t *testing.T, opts workflow.Options, id string) *workflow.Workflow {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	b := workflow.New(opts)
	go b.Run(ctx)
	done, err := b.Wait(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// TestAChangedToolAppliesToTheNextInvocation checks that a runner that has
// already compiled an agent sees a new revision of its tool: here a policy
// class whose rule denies the call.
func TestAChangedToolAppliesToTheNextInvocation(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	deploy(t, db, "guarded", `{"tools": ["ledger"], "policies": {"restricted": {"allow": "false"}},
		"steps": [{"action": "fetch", "call": "ledger.getTransaction"}], "outcome": "'fetched'"}`)
	r := newRunner(db, "replica-a", &ledger{})
	invoke := func() string {
		t.Helper()
		wf, err := r.Start(ctx, request("guarded"))
		if err != nil {
			t.Fatal(err)
		}
		done, err := r.Wait(ctx, "acme", wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		return done.Outcome
	}
	if got := invoke(); got != "fetched" {
		t.Fatalf("outcome under policy class standard = %q, want fetched", got)
	}
	updateLedger(t, db, func(lt *tool.Tool) { lt.PolicyClass = "restricted" })
	if got := invoke(); got != workflow.OutcomeDenied {
		t.Errorf("outcome under policy class restricted = %q, want denied", got)
	}
}

// TestAResumeThatFailsForAWhileIsRetried checks that a workflow whose
// resume fails for a cause that may pass is left for a later pass.
func TestAResumeThatFailsForAWhileIsRetried(t *testing.T) {
	t.Parallel()
	db := setup(t)
	api := &ledger{hold: true, held: make(chan struct{}, 1)}
	wf := stopAtTheWrite(t, db, api)
	api.mu.Lock()
	api.hold = false
	api.mu.Unlock()
	st := &faultyStore{DB: db, fail: map[string]error{"Completions": errors.New("database is locked")}}
	done := resumeElsewhere(t, workflow.Options{Store: st, Versions: db, Tools: db, Caller: api,
		Owner: "replica-b", Lease: 150 * time.Millisecond}, wf.ID)
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %s/%s, error %s", done.Status, done.Outcome, done.Error)
	}
}

// TestAClosedRunnerReleasesWhatItClaims checks that a workflow claimed by a
// runner that can no longer launch it is not kept from other replicas.
func TestAClosedRunnerReleasesWhatItClaims(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	wf := stopAtTheWrite(t, db, &ledger{hold: true, held: make(chan struct{}, 1)})
	st := &faultyStore{DB: db}
	b := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: &ledger{}, Owner: "replica-b", Lease: time.Minute})
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	st.resumed = stop // Run returns after its first pass
	b.Run(runCtx)
	got, err := db.Workflow(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.Running || got.Owner != "" {
		t.Errorf("workflow %s, owned by %q; want running and released", got.Status, got.Owner)
	}
}

// TestAWriteNotRecordedLeavesTheWorkflowToBeResumed checks that failing to
// store what an execution needs before a write (the call's intent, the
// steps before it: here the plan's completion with its step) stops the
// execution without failing the workflow, and the write is sent once.
func TestAWriteNotRecordedLeavesTheWorkflowToBeResumed(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"RecordIntent", "AppendSteps"} {
		t.Run(method, func(t *testing.T) {
			db := setup(t)
			ctx := context.Background()
			updateLedger(t, db, func(lt *tool.Tool) { lt.IdempotencySupport = false })
			deploy(t, db, "planned", `{"tools": ["ledger"], "steps": [
				{"action": "think", "plan": {"prompt": "'settle'"}},
				{"action": "post", "call": "ledger.postEntry"}], "outcome": "'settled'"}`)
			st := &faultyStore{DB: db, fail: map[string]error{method: errors.New("database is locked")}}
			api := &ledger{}
			r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Models: modelTable{}, LLM: answering{},
				Owner: "replica-a", Lease: 150 * time.Millisecond})
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			go r.Run(runCtx)
			wf, err := r.Start(ctx, request("planned"))
			if err != nil {
				t.Fatal(err)
			}
			done, err := r.Wait(ctx, "acme", wf.ID)
			if err != nil {
				t.Fatal(err)
			}
			if done.Status != workflow.Completed || done.Outcome != "settled" {
				t.Fatalf("workflow %s/%s, error %s", done.Status, done.Outcome, done.Error)
			}
			// Step 1 is the plan's completion; the call is step 2.
			if diff := cmp.Diff([]string{"postEntry " + wf.ID + ".2"}, api.seen()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// answering is a model that answers at once, calling no function.
type answering struct{}

func (answering) Client(*model.Model) (llm.Client, error) { return answering{}, nil }

func (answering) Complete(context.Context, agent.ChatRequest) (agent.ChatResponse, error) {
	return agent.ChatResponse{Message: agent.ChatMessage{Role: agent.RoleAssistant, Content: "nothing to do"}}, nil
}

// TestFailureDetails checks the detail of a workflow that timed out and of
// one interrupted at an unrepeatable write.
func TestFailureDetails(t *testing.T) {
	t.Parallel()
	t.Run("timed out", func(t *testing.T) {
		db := setup(t)
		ctx := context.Background()
		api := &ledger{hold: true, held: make(chan struct{}, 1)}
		r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-a", Timeout: 100 * time.Millisecond})
		wf, err := r.Start(ctx, request("settle"))
		if err != nil {
			t.Fatal(err)
		}
		done, err := r.Wait(ctx, "acme", wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != workflow.Failed || done.Outcome != workflow.OutcomeTimedOut {
			t.Fatalf("workflow %s/%s", done.Status, done.Outcome)
		}
		if got, want := failureDetail(t, done), "the workflow ran past its time limit"; got != want {
			t.Errorf("detail %q, want %q", got, want)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		db := setup(t)
		updateLedger(t, db, func(lt *tool.Tool) { lt.IdempotencySupport = false })
		api := &ledger{hold: true, held: make(chan struct{}, 1)}
		wf := stopAtTheWrite(t, db, api)
		done := resumeElsewhere(t, workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-b", Lease: time.Minute}, wf.ID)
		if done.Status != workflow.Failed || done.Outcome != workflow.OutcomeFailed {
			t.Fatalf("workflow %s/%s", done.Status, done.Outcome)
		}
		want := "interrupted: the server stopped while ledger.postEntry (step 2) was in flight, and repeating it is not safe"
		if got := failureDetail(t, done); got != want {
			t.Errorf("detail %q, want %q", got, want)
		}
	})
}

// TestAWriteThatCompletesAtShutdownIsKept checks that an unrepeatable write
// that succeeds while the server shuts down is stored, so the resumed
// workflow goes on after it.
func TestAWriteThatCompletesAtShutdownIsKept(t *testing.T) {
	t.Parallel()
	db := setup(t)
	updateLedger(t, db, func(lt *tool.Tool) { lt.IdempotencySupport = false })
	api := &ledger{hold: true, completes: true, held: make(chan struct{}, 1)}
	wf := stopAtTheWrite(t, db, api)
	done := resumeElsewhere(t, workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-b", Lease: time.Minute}, wf.ID)
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %s/%s, error %s", done.Status, done.Outcome, done.Error)
	}
	want := []string{"getTransaction " + wf.ID + ".1", "postEntry " + wf.ID + ".2"}
	if diff := cmp.Diff(want, api.seen()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestAReplicaRunsAWorkflowOnce checks that a replica claiming a workflow
// it still runs (its lease lapsed, as when renewals fail) does not start it
// a second time.
func TestAReplicaRunsAWorkflowOnce(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	api := &ledger{hold: true, held: make(chan struct{}, 2)}
	st := &faultyStore{DB: db, claimed: make(chan struct{}, 1)}
	r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Owner: "replica-a",
		Lease: 30 * time.Millisecond, Now: clock})
	if _, err := r.Start(ctx, request("settle")); err != nil {
		t.Fatal(err)
	}
	<-api.held
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go r.Run(runCtx)
	// The second pass begins once the first, which claims the workflow, is over.
	<-st.claimed
	<-st.claimed
	stop()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		t.Fatalf("close: %v; an execution was left running", err)
	}
	if n := len(api.seen()); n != 2 {
		t.Errorf("%d calls, want 2: %q", n, api.seen())
	}
}

// TestStepErrorListsBadArguments checks that a call refused for several
// bad arguments names each in its step's error.
func TestStepErrorListsBadArguments(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	api := &ledger{writeErr: problem.Validation(
		problem.FieldError{Field: "amount", Message: "must be positive"},
		problem.FieldError{Field: "currency", Message: "is required"})}
	r := newRunner(db, "replica-a", api)
	wf, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	_, steps, err := r.Finished(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 {
		t.Fatalf("%d steps, want 2", len(steps))
	}
	want := "validation-failed: 2 fields are invalid: amount: must be positive; currency: is required"
	if got := steps[1].Error; got != want {
		t.Errorf("step error %q, want %q", got, want)
	}
}

// TestStartReturnsTheWorkflowAsStarted checks that what Start returns is
// the caller's to read while the execution goes on (a data race under
// -race otherwise) and shows the workflow as it started.
func TestStartReturnsTheWorkflowAsStarted(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	r := newRunner(db, "replica-a", &ledger{})
	wf, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if wf.Status != workflow.Running || wf.Outcome != "" || !wf.FinishedAt.IsZero() {
			t.Fatalf("Start's workflow changed under its caller: %s/%s", wf.Status, wf.Outcome)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := r.Wait(ctx, "acme", wf.ID); err != nil {
		t.Fatal(err)
	}
}

// TestCancelReachesTheReplicaThatRunsIt checks a cancel sent to a replica
// other than the owner: it is stored, and the owner stops the workflow when
// it next renews its lease.
func TestCancelReachesTheReplicaThatRunsIt(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	l := &ledger{hold: true, held: make(chan struct{}, 1)}
	a := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: l, Owner: "replica-a", Lease: 600 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go a.Run(runCtx)
	defer a.Close(ctx)
	b := newRunner(db, "replica-b", &ledger{})

	wf, err := a.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	<-l.held // the write is in flight on replica a
	if _, err := b.Cancel(ctx, "acme", wf.ID); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done, err := a.Wait(wctx, "acme", wf.ID)
	if err != nil || done.Status != workflow.Cancelled || done.Outcome != workflow.OutcomeCancelled {
		t.Fatalf("after a cancel sent to another replica: %+v, %v; want cancelled", done, err)
	}
}

// brokenHistory is the SQLite store with a workflow history that never reads.
type brokenHistory struct{ *sqlite.DB }

func (brokenHistory) Completions(context.Context, string) (map[int]json.RawMessage, error) {
	return nil, errors.New("completion 1 does not decode")
}

// TestAResumeThatKeepsFailingStillEnds checks that a workflow whose resume
// fails every time does not stay running for good: it ends once past its
// deadline, or when someone asked to cancel it.
func TestAResumeThatKeepsFailingStillEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		later           time.Duration
		cancel          bool
		status, outcome string
	}{
		{"past its deadline", time.Hour, false, workflow.Failed, workflow.OutcomeTimedOut},
		{"cancelled", 0, true, workflow.Cancelled, workflow.OutcomeCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := setup(t)
			ctx := context.Background()
			wf := stopAtTheWrite(t, db, &ledger{hold: true, held: make(chan struct{}, 1)})
			if tc.cancel {
				if _, _, err := db.RequestCancel(ctx, "acme", wf.ID, "replica-x", time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			b := workflow.New(workflow.Options{Store: brokenHistory{db}, Versions: db, Tools: db, Caller: &ledger{},
				Owner: "replica-b", Lease: 150 * time.Millisecond, Now: func() time.Time { return time.Now().Add(tc.later) }})
			runCtx, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			go b.Run(runCtx)
			done, err := b.Wait(runCtx, "acme", wf.ID)
			if err != nil || done.Status != tc.status || done.Outcome != tc.outcome {
				t.Fatalf("workflow %+v, %v; want %s/%s", done, err, tc.status, tc.outcome)
			}
		})
	}
}

// TestAClosingRunnerStoresNoNewWorkflow checks that an invocation refused
// because the runner is closing leaves no workflow behind for the next
// start to run while its caller, told 503, may invoke again.
func TestAClosingRunnerStoresNoNewWorkflow(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	r := newRunner(db, "replica-a", &ledger{})
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, request("settle")); !problem.Is(err, problem.Unavailable) {
		t.Fatalf("Start on a closed runner: %v, want unavailable", err)
	}
	wfs, err := db.ListWorkflows(ctx, "acme", workflow.ListFilter{Limit: 10})
	if err != nil || len(wfs) != 0 {
		t.Errorf("%d workflows stored (%v), want none", len(wfs), err)
	}
}

// gatedStore is the SQLite store, except that its writes of a workflow and
// of steps wait until gate is closed, or 10 s have passed (then slow is set).
type gatedStore struct {
	*sqlite.DB
	gate chan struct{}
	slow atomic.Bool
}

func (s *gatedStore) hold() {
	select {
	case <-s.gate:
	case <-time.After(10 * time.Second):
		s.slow.Store(true)
	}
}

func (s *gatedStore) CreateWorkflow(ctx context.Context, w *workflow.Workflow, rec *audit.Record) error {
	s.hold()
	return s.DB.CreateWorkflow(ctx, w, rec)
}

func (s *gatedStore) AppendSteps(ctx context.Context, owner string, steps ...workflow.StepWrite) error {
	s.hold()
	return s.DB.AppendSteps(ctx, owner, steps...)
}

// watcher is a ledger that notes, at each call, whether the workflow is
// stored and how many of its steps and intents are; its third read opens
// the store's gate.
type watcher struct {
	db    *sqlite.DB
	gate  chan struct{}
	mu    sync.Mutex
	reads int
	seen  []string
}

func (w *watcher) Call(ctx context.Context, req tool.CallRequest) (tool.CallResult, error) {
	_, err := w.db.Workflow(ctx, "acme", req.WorkflowID)
	stored := err == nil
	steps, err := w.db.Steps(ctx, req.WorkflowID, 0)
	if err != nil {
		return tool.CallResult{}, err
	}
	intents, err := w.db.Intents(ctx, req.WorkflowID)
	if err != nil {
		return tool.CallResult{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, fmt.Sprintf("%s: workflow stored %t, %d steps, %d intents",
		req.Operation.ID, stored, len(steps), len(intents)))
	if req.Operation.Kind == tool.Read {
		if w.reads++; w.reads == 3 {
			close(w.gate)
		}
	}
	return tool.CallResult{Status: 200, Body: json.RawMessage(`{"amount": 42}`)}, nil
}

// TestReadsGoOutWhileTheStepsBeforeThemAreWritten checks that a read is
// not held up by the writes of the workflow and of the steps before it,
// while a write unsafe to repeat waits until every step before it, and its
// intent, are stored.
func TestReadsGoOutWhileTheStepsBeforeThemAreWritten(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	updateLedger(t, db, func(lt *tool.Tool) { lt.IdempotencySupport = false })
	deploy(t, db, "reads", `{"tools": ["ledger"], "steps": [
		{"action": "first", "call": "ledger.getTransaction"},
		{"action": "second", "call": "ledger.getTransaction"},
		{"action": "third", "call": "ledger.getTransaction"},
		{"action": "post", "call": "ledger.postEntry"}], "outcome": "'posted'"}`)
	gate := make(chan struct{})
	st := &gatedStore{DB: db, gate: gate}
	api := &watcher{db: db, gate: gate}
	r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Owner: "replica-a", Lease: time.Minute})
	wf, err := r.Start(ctx, request("reads"))
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.Wait(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.Completed || done.Outcome != "posted" {
		t.Fatalf("workflow %s/%s, error %s", done.Status, done.Outcome, done.Error)
	}
	if st.slow.Load() {
		t.Error("the reads waited for the workflow or its steps to be written")
	}
	// The third read opens the gate: until then nothing is stored.
	want := []string{
		"getTransaction: workflow stored false, 0 steps, 0 intents",
		"getTransaction: workflow stored false, 0 steps, 0 intents",
		"getTransaction: workflow stored false, 0 steps, 0 intents",
		"postEntry: workflow stored true, 3 steps, 1 intents",
	}
	if diff := cmp.Diff(want, api.seen); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	steps, err := db.Steps(ctx, wf.ID, 0)
	if err != nil || len(steps) != 4 {
		t.Fatalf("stored steps %+v, %v", steps, err)
	}
	if rep, err := audit.Verify(ctx, db, "acme"); err != nil || !rep.OK {
		t.Errorf("audit chain: %+v, %v", rep, err)
	}
}

// notStored is the SQLite store, except that it fails to store workflows.
type notStored struct{ *sqlite.DB }

func (notStored) CreateWorkflow(context.Context, *workflow.Workflow, *audit.Record) error {
	return errors.New("database is locked")
}

// TestAWorkflowNotStoredStopsAndWritesNothing checks that a workflow Start
// fails to store is refused, and its execution, begun meanwhile, stops
// before any write: neither its steps nor its tool writes happen.
func TestAWorkflowNotStoredStopsAndWritesNothing(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	api := &ledger{}
	r := workflow.New(workflow.Options{Store: notStored{db}, Versions: db, Tools: db, Caller: api, Owner: "replica-a", Lease: time.Minute})
	if _, err := r.Start(ctx, request("settle")); err == nil || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("Start = %v, want the store's error", err)
	}
	if err := r.Close(ctx); err != nil { // waits for the execution to stop
		t.Fatal(err)
	}
	for _, call := range api.seen() {
		if strings.HasPrefix(call, "postEntry") {
			t.Errorf("the write was sent: %s", call)
		}
	}
	wfs, err := db.ListWorkflows(ctx, "acme", workflow.ListFilter{})
	if err != nil || len(wfs) != 0 {
		t.Errorf("workflows stored: %v, %v", wfs, err)
	}
	if rep, err := audit.Verify(ctx, db, "acme"); err != nil || rep.RecordsChecked != 0 {
		t.Errorf("audit: %+v, %v", rep, err)
	}
}

// hangingUp is a store whose CreateWorkflow sees its caller hang up while
// the creation waits to be taken, and honours that as the stores' write
// queues do: a write not yet taken when its context ends is not made.
type hangingUp struct {
	*sqlite.DB
	hangUp context.CancelFunc
}

func (s hangingUp) CreateWorkflow(ctx context.Context, w *workflow.Workflow, rec *audit.Record) error {
	s.hangUp()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.DB.CreateWorkflow(ctx, w, rec)
}

// TestAStartedWorkflowIsStoredWhenItsCallerHangsUp checks that once Start
// has begun a workflow's execution, the caller's going away does not undo
// its storing: the execution's reads are out already, and a retry with
// the invocation's key must find the workflow, not start another.
func TestAStartedWorkflowIsStoredWhenItsCallerHangsUp(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx, hangUp := context.WithCancel(t.Context())
	r := workflow.New(workflow.Options{Store: hangingUp{DB: db, hangUp: hangUp}, Versions: db, Tools: db, Caller: &ledger{},
		Owner: "replica-a", Lease: time.Minute})
	wf, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatalf("Start after the caller hung up: %v", err)
	}
	done, err := r.Wait(t.Context(), "acme", wf.ID)
	if err != nil || done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %+v, %v: want it stored and completed", done, err)
	}
}
