package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// flakyTools is the SQLite tool lookup, except that its first Operation
// lookup fails with a store error.
type flakyTools struct {
	*sqlite.DB
	mu     sync.Mutex
	failed bool
}

func (f *flakyTools) Operation(ctx context.Context, tenant, toolID, opID string) (*tool.Operation, error) {
	f.mu.Lock()
	first := !f.failed
	f.failed = true
	f.mu.Unlock()
	if first {
		return nil, errors.New("database is locked")
	}
	return f.DB.Operation(ctx, tenant, toolID, opID)
}

// stuckTools is the SQLite tool lookup, except that an Operation lookup
// signals entered and waits until its context ends.
type stuckTools struct {
	*sqlite.DB
	entered chan struct{}
}

func (s *stuckTools) Operation(ctx context.Context, _, _, _ string) (*tool.Operation, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// noErrorStep fails t if a stored step of the workflow has status error.
func noErrorStep(t *testing.T, db *sqlite.DB, id string) {
	t.Helper()
	steps, err := db.Steps(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 {
		t.Errorf("%d steps stored, want 2", len(steps))
	}
	for _, s := range steps {
		if s.Status != "ok" {
			t.Errorf("step %d (%s) is %s: %s", s.Step, s.Action, s.Status, s.Error)
		}
	}
}

// TestAFailedLookupPausesTheWorkflow checks that a store error while an
// execution looks a call's operation up is not the step's failure: the
// workflow is resumed and completes.
func TestAFailedLookupPausesTheWorkflow(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	api := &ledger{}
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: &flakyTools{DB: db}, Caller: api,
		Owner: "replica-a", Lease: 150 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go r.Run(runCtx)
	defer r.Close(ctx)
	wf, err := r.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done, err := r.Wait(wctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %s/%s, error %s", done.Status, done.Outcome, done.Error)
	}
	noErrorStep(t, db, wf.ID)
}

// TestAShutdownDuringALookupResumesTheWorkflow checks that a lookup cut
// short by a shutdown is not recorded as a failed step: the next start
// resumes the workflow and completes it.
func TestAShutdownDuringALookupResumesTheWorkflow(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	api := &ledger{}
	stuck := &stuckTools{DB: db, entered: make(chan struct{}, 1)}
	a := workflow.New(workflow.Options{Store: db, Versions: db, Tools: stuck, Caller: api, Owner: "replica-a", Lease: time.Minute})
	wf, err := a.Start(ctx, request("settle"))
	if err != nil {
		t.Fatal(err)
	}
	<-stuck.entered
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	done := resumeElsewhere(t, workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-b", Lease: time.Minute}, wf.ID)
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("workflow %s/%s, error %s", done.Status, done.Outcome, done.Error)
	}
	noErrorStep(t, db, wf.ID)
}

// panicky is a ledger that panics, as a broken reader of an answer would,
// when a call's note argument is "boom".
type panicky struct{ ledger }

func (p *panicky) Call(ctx context.Context, req tool.CallRequest) (tool.CallResult, error) {
	if req.Args["note"] == "boom" {
		panic("the answer's reader broke")
	}
	return p.ledger.Call(ctx, req)
}

// explodingSteps is the SQLite store, except that storing a step of action
// boom panics.
type explodingSteps struct{ *faultyStore }

func (s explodingSteps) AppendSteps(ctx context.Context, owner string, steps ...workflow.StepWrite) error {
	for _, sw := range steps {
		if sw.Step.Action == "boom" {
			panic("the step's encoder broke")
		}
	}
	return s.DB.AppendSteps(ctx, owner, steps...)
}

// lockedBuffer is a log destination safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// errorCode is the error_code of a failed workflow's problem document.
func errorCode(t *testing.T, wf *workflow.Workflow) string {
	t.Helper()
	var doc struct {
		ErrorCode string `json:"error_code"`
	}
	if err := json.Unmarshal(wf.Error, &doc); err != nil {
		t.Fatalf("error document %s: %v", wf.Error, err)
	}
	return doc.ErrorCode
}

// TestAPanicEndsOnlyItsWorkflow checks that a panic in one execution, in
// a tool call or in a store write of its steps, ends that workflow failed
// with error_code internal and its stack logged once, while the workflows
// beside it complete; and that a restart does not resume it.
func TestAPanicEndsOnlyItsWorkflow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, def string
	}{
		{"in a call", `{"tools": ["ledger"], "steps": [
			{"action": "fetch", "call": "ledger.getTransaction", "args": {"note": "goal"}}], "outcome": "'fetched'"}`},
		{"in a write of its steps", `{"tools": ["ledger"], "steps": [
			{"action": "boom", "call": "ledger.getTransaction"},
			{"action": "post", "call": "ledger.postEntry"}], "outcome": "'posted'"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := setup(t)
			ctx := context.Background()
			deploy(t, db, "explode", tc.def)
			st := explodingSteps{&faultyStore{DB: db, claimed: make(chan struct{}, 1)}}
			api := &panicky{}
			logs := &lockedBuffer{}
			r := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Owner: "replica-a",
				Lease: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			var ids []string
			for _, agentName := range []string{"settle", "explode", "settle"} {
				req := request(agentName)
				req.Goal = "boom"
				wf, err := r.Start(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, wf.ID)
			}
			for i, id := range ids {
				done, err := r.Wait(ctx, "acme", id)
				if err != nil {
					t.Fatal(err)
				}
				if i != 1 {
					if done.Status != workflow.Completed || done.Outcome != "settled" {
						t.Errorf("workflow beside the panic: %s/%s, error %s", done.Status, done.Outcome, done.Error)
					}
					continue
				}
				if done.Status != workflow.Failed || done.Outcome != workflow.OutcomeFailed || errorCode(t, done) != workflow.ErrorCodeInternal {
					t.Fatalf("panicked workflow: %s/%s, error %s", done.Status, done.Outcome, done.Error)
				}
				if got, want := failureDetail(t, done), "the server failed while executing the workflow"; got != want {
					t.Errorf("detail %q, want %q", got, want)
				}
			}
			if n := strings.Count(logs.String(), "panicked"); n != 1 || !strings.Contains(logs.String(), "goroutine") {
				t.Errorf("the panic was logged %d times, with stack %t:\n%s", n, strings.Contains(logs.String(), "goroutine"), logs)
			}
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}

			// A restart's recovery leaves the failed workflow alone.
			calls := len(api.seen())
			b := workflow.New(workflow.Options{Store: st, Versions: db, Tools: db, Caller: api, Owner: "replica-b", Lease: 150 * time.Millisecond})
			runCtx, stop := context.WithCancel(ctx)
			go b.Run(runCtx)
			<-st.claimed
			<-st.claimed // the first pass is over
			stop()
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := len(api.seen()); got != calls {
				t.Errorf("the restart made %d calls", got-calls)
			}
			wf, err := db.Workflow(ctx, "acme", ids[1])
			if err != nil || wf.Status != workflow.Failed {
				t.Errorf("after the restart: %+v, %v", wf, err)
			}
		})
	}
}

// TestACallCutByTheWorkflowsEndIsRecorded checks that a write that reached
// its tool and was cut short by a cancel or by the workflow's deadline is
// recorded with status cancelled and its request, and audited.
func TestACallCutByTheWorkflowsEndIsRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		timeout         time.Duration
		cancel          bool
		status, outcome string
	}{
		{"cancelled", time.Minute, true, workflow.Cancelled, workflow.OutcomeCancelled},
		{"timed out", 300 * time.Millisecond, false, workflow.Failed, workflow.OutcomeTimedOut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := sqlite.NewTestDB(t)
			ctx := context.Background()
			arrived := make(chan struct{}, 1)
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				<-r.Context().Done() // the write is slow
			}))
			defer api.Close()
			now := time.Now()
			books := &tool.Tool{ID: "tool_01JDBOOKS00000000000000000", Tenant: "acme", Name: "books", Type: tool.OpenAPI,
				Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, Revision: 1,
				OperationCount: 1, IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: api.URL}
			ops := []tool.Operation{{ID: "postEntry", Kind: tool.Write, HTTP: &tool.HTTPBinding{Method: "POST", Path: "/entries", Body: &tool.Body{ContentType: "application/json"}}}}
			if err := db.CreateTool(ctx, books, ops, nil); err != nil {
				t.Fatal(err)
			}
			v := `{"tools": ["books"], "steps": [{"action": "post", "call": "books.postEntry"}], "outcome": "'posted'"}`
			deployOn(t, db, "post", v, "books")
			caller := call.New(call.Options{Client: outbound.New(outbound.Options{AllowPrivate: true}), Timeout: time.Minute})
			r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: caller, Owner: "replica-a",
				Lease: time.Minute, Timeout: tc.timeout})
			defer r.Close(ctx)
			wf, err := r.Start(ctx, request("post"))
			if err != nil {
				t.Fatal(err)
			}
			<-arrived
			if tc.cancel {
				if _, err := r.Cancel(ctx, "acme", wf.ID); err != nil {
					t.Fatal(err)
				}
			}
			done, steps, err := r.Finished(ctx, "acme", wf.ID)
			if err != nil {
				t.Fatal(err)
			}
			if done.Status != tc.status || done.Outcome != tc.outcome {
				t.Fatalf("workflow %s/%s, want %s/%s", done.Status, done.Outcome, tc.status, tc.outcome)
			}
			if len(steps) != 1 {
				t.Fatalf("%d steps, want the write's", len(steps))
			}
			s := steps[0]
			var req tool.RecordedRequest
			if err := json.Unmarshal(s.Request, &req); err != nil {
				t.Fatalf("request %s: %v", s.Request, err)
			}
			if s.Status != "cancelled" || !s.Sent || req.Method != "POST" || req.URL != api.URL+"/entries" || s.Result != nil || s.HTTPStatus != 0 {
				t.Errorf("step %+v, request %+v; want cancelled, sent, with its request and no answer", s, req)
			}
			recs, err := db.QueryAudit(ctx, "acme", audit.Filter{WorkflowID: wf.ID, Action: "tool.call"})
			if err != nil || len(recs) != 1 || recs[0].Outcome != audit.Error {
				t.Errorf("tool.call records %+v, %v; want one with outcome error", recs, err)
			}
			if intents, err := db.Intents(ctx, wf.ID); err != nil || len(intents) != 0 {
				t.Errorf("intents left: %+v, %v", intents, err)
			}
			if rep, err := audit.Verify(ctx, db, "acme"); err != nil || !rep.OK {
				t.Errorf("audit chain: %+v, %v", rep, err)
			}
		})
	}
}

// deployOn stores the first version of an agent of acme calling tools.
func deployOn(t *testing.T, db *sqlite.DB, name, def string, tools ...string) {
	t.Helper()
	v := &agent.Version{Tenant: "acme", Name: name, Definition: json.RawMessage(def), Tools: tools, DeployedAt: time.Now()}
	if err := db.DeployVersion(context.Background(), v, false, nil); err != nil {
		t.Fatal(err)
	}
}

// panickyLookup is the SQLite tool lookup, except that looking a tool up
// by name panics, as a broken decoder of a stored tool would.
type panickyLookup struct{ *sqlite.DB }

func (panickyLookup) ToolByName(context.Context, string, string) (*tool.Tool, error) {
	panic("the tool's decoder broke")
}

// TestAPanicWhileResumingEndsTheWorkflow checks that a workflow whose
// resume panics (compiling its program, here) ends failed with error_code
// internal rather than taking the replica down at every start.
func TestAPanicWhileResumingEndsTheWorkflow(t *testing.T) {
	t.Parallel()
	db := setup(t)
	wf := stopAtTheWrite(t, db, &ledger{hold: true, held: make(chan struct{}, 1)})
	done := resumeElsewhere(t, workflow.Options{Store: db, Versions: db, Tools: panickyLookup{db}, Caller: &ledger{},
		Owner: "replica-b", Lease: time.Minute, Logger: slog.New(slog.DiscardHandler)}, wf.ID)
	if done.Status != workflow.Failed || errorCode(t, done) != workflow.ErrorCodeInternal {
		t.Fatalf("workflow %s/%s, error %s", done.Status, done.Outcome, done.Error)
	}
}
