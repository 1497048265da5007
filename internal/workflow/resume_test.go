package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

var update = flag.Bool("update", false, "rewrite the expected results of testdata/resume/*.json")

// resumeCase is a golden resume history: an agent, its tools as registered,
// what a crashed replica recorded, what changed before the resume, and the
// expected result of resuming it.
type resumeCase struct {
	Description string          `json:"description"`
	Agent       json.RawMessage `json:"agent"`
	// Tools are registered (revision 1) before the workflow starts.
	Tools []goldenTool `json:"tools"`
	// StartedWith are the tool revisions the workflow recorded at start;
	// none for a workflow started before they were recorded.
	StartedWith map[string]int `json:"started_with,omitempty"`
	Scopes      []string       `json:"scopes"`
	// History is what the crashed replica stored.
	History []goldenStep `json:"history"`
	// Decision, when set, is the decision (approved or denied) on the
	// approval the last recorded step waits at: the workflow is paused
	// there and decided after the updates, and the replica that took it
	// crashes before resuming it.
	Decision string `json:"decision,omitempty"`
	// Updates replace tools (each the next revision) after the crash, or
	// while the workflow waits.
	Updates []goldenTool `json:"updates,omitempty"`
	// Answers are the tool API's response bodies by tool.operation.
	Answers map[string]json.RawMessage `json:"answers,omitempty"`
	// Faults, when set, make the workflow a real replay (of wf_original)
	// that injects them.
	Faults []fault.Fault `json:"faults,omitempty"`
	Want   resumeResult  `json:"want"`
}

// goldenStep is a recorded step, as much of it as a resume reads.
type goldenStep struct {
	Step      int             `json:"step"`
	Action    string          `json:"action"`
	Kind      string          `json:"kind"`
	Status    string          `json:"status"`
	Tool      string          `json:"tool,omitempty"`
	Operation string          `json:"operation,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Sent      bool            `json:"sent,omitempty"`
}

type goldenTool struct {
	Name               string `json:"name"`
	PolicyClass        string `json:"policy_class"`
	IdempotencySupport bool   `json:"idempotency_support"`
	Operations         []struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	} `json:"operations"`
}

// resumeResult is how a resumed workflow ended: its steps (those recorded
// and those made since, as "step action kind tool.operation status") and
// the calls the tool API received.
type resumeResult struct {
	Status    string   `json:"status"`
	Outcome   string   `json:"outcome"`
	ErrorCode string   `json:"error_code,omitempty"`
	Detail    string   `json:"detail,omitempty"`
	Steps     []string `json:"steps"`
	Calls     []string `json:"calls"`
}

// TestResumeHistories resumes each golden history on a new replica and
// compares the result; -update rewrites the expected results.
func TestResumeHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "resume", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden histories in testdata/resume")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var tc resumeCase
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&tc); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			got := resumeGolden(t, &tc)
			if *update {
				tc.Want = got
				out, err := json.MarshalIndent(tc, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, append(out, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("%s: resumed workflow (-want +got):\n%s", tc.Description, diff)
			}
		})
	}
}

// resumeGolden stores the case's history as a crashed replica left it and
// resumes it on another.
func resumeGolden(t *testing.T, tc *resumeCase) resumeResult {
	t.Helper()
	db := sqlite.NewTestDB(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	toolIDs := map[string]string{}
	for _, gt := range tc.Tools {
		lt := gt.tool(now, 1)
		toolIDs[gt.Name] = lt.ID
		if err := db.CreateTool(ctx, lt, gt.operations(), nil); err != nil {
			t.Fatal(err)
		}
	}
	var def struct {
		Tools []string `json:"tools"`
	}
	if err := json.Unmarshal(tc.Agent, &def); err != nil {
		t.Fatal(err)
	}
	v := &agent.Version{Tenant: "acme", Name: "golden", Definition: tc.Agent, Tools: def.Tools, DeployedAt: now}
	if err := db.DeployVersion(ctx, v, false, nil); err != nil {
		t.Fatal(err)
	}

	wf := crashedWorkflow(now, v.Version, tc)
	if err := db.CreateWorkflow(ctx, wf, nil); err != nil {
		t.Fatal(err)
	}
	var writes []workflow.StepWrite
	for _, gs := range tc.History {
		writes = append(writes, workflow.StepWrite{Step: &workflow.Step{
			WorkflowID: wf.ID, Seq: gs.Step, Step: gs.Step, Action: gs.Action, Kind: gs.Kind, Status: gs.Status,
			Tool: gs.Tool, Operation: gs.Operation, Args: gs.Args, Result: gs.Result, Error: gs.Error, Sent: gs.Sent,
			StartedAt: now}})
	}
	var waiting *workflow.Approval
	if tc.Decision != "" {
		last := writes[len(writes)-1].Step
		waiting = &workflow.Approval{WorkflowID: wf.ID, Tenant: wf.Tenant, Agent: wf.Agent, AgentVersion: wf.AgentVersion,
			Step: last.Step, Action: last.Action, Reason: "golden", OnTimeout: agent.DecisionDeny, Invoker: wf.Caller.Sub,
			RequestedAt: now, Deadline: now.Add(time.Hour), Status: workflow.ApprovalPending, Remaining: 5 * time.Minute}
		if err := db.SuspendWorkflow(ctx, wf.Owner, waiting, writes...); err != nil {
			t.Fatal(err)
		}
	} else if len(writes) > 0 {
		if err := db.AppendSteps(ctx, wf.Owner, writes...); err != nil {
			t.Fatal(err)
		}
	}

	for _, gt := range tc.Updates {
		cur, err := db.ToolByName(ctx, "acme", gt.Name)
		if err != nil {
			t.Fatal(err)
		}
		lt := gt.tool(now, cur.Revision+1)
		lt.ID = toolIDs[gt.Name]
		if err := db.UpdateTool(ctx, lt, gt.operations(), nil); err != nil {
			t.Fatal(err)
		}
	}

	if waiting != nil {
		d := workflow.Decision{Tenant: wf.Tenant, WorkflowID: wf.ID, Step: waiting.Step, Status: tc.Decision, By: "bob", At: now}
		if _, _, err := db.DecideApproval(ctx, d, "replica-a", now.Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
	}

	api := &goldenAPI{answers: tc.Answers}
	done := resumeElsewhere(t, workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-b", Lease: time.Minute}, wf.ID)
	steps, err := db.Steps(ctx, wf.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	res := resumeResult{Status: done.Status, Outcome: done.Outcome, Steps: []string{}, Calls: api.seen()}
	for _, s := range steps {
		line := fmt.Sprintf("%d %s %s", s.Step, s.Action, s.Kind)
		if s.Tool != "" {
			line += " " + s.Tool + "." + s.Operation
		}
		line += " " + s.Status
		if s.Injected != nil {
			line += fmt.Sprintf(" injected by faults[%d]", s.Injected.Fault)
		}
		res.Steps = append(res.Steps, line)
	}
	if done.Status == workflow.Failed {
		var doc struct {
			Detail    string `json:"detail"`
			ErrorCode string `json:"error_code"`
		}
		if err := json.Unmarshal(done.Error, &doc); err != nil {
			t.Fatalf("error document %s: %v", done.Error, err)
		}
		res.Detail, res.ErrorCode = doc.Detail, doc.ErrorCode
	}
	return res
}

// crashedWorkflow is the case's workflow as a replica that crashed left
// it: running, its lease lapsed.
func crashedWorkflow(now time.Time, version string, tc *resumeCase) *workflow.Workflow {
	return &workflow.Workflow{
		ID: ids.NewAt(ids.Workflow, now), Tenant: "acme", Agent: "golden", AgentVersion: version,
		Status: workflow.Running, Goal: "resume", Context: json.RawMessage(`{}`),
		Caller:       workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: tc.Scopes},
		MaxToolCalls: 10, StartedAt: now, Deadline: now.Add(5 * time.Minute),
		Owner: "replica-a", LeaseUntil: now.Add(-time.Second), ToolRevisions: tc.StartedWith,
		Faults: tc.Faults, ReplayOf: replayOf(tc),
	}
}

// replayOf is the workflow a case with faults replays.
func replayOf(tc *resumeCase) string {
	if len(tc.Faults) == 0 {
		return ""
	}
	return "wf_original"
}

func (gt goldenTool) tool(now time.Time, revision int) *tool.Tool {
	return &tool.Tool{ID: ids.New(ids.Tool), Tenant: "acme", Name: gt.Name, Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: gt.PolicyClass, SideEffects: []string{},
		IdempotencySupport: gt.IdempotencySupport, Revision: revision, OperationCount: len(gt.Operations),
		IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: "http://" + gt.Name + ".test"}
}

func (gt goldenTool) operations() []tool.Operation {
	ops := make([]tool.Operation, len(gt.Operations))
	for i, op := range gt.Operations {
		// A read takes an id in its path; a write, a JSON body of any members.
		b := &tool.HTTPBinding{Method: "GET", Path: "/" + op.ID + "/{id}", Params: []tool.Param{{Name: "id", In: "path", Required: true}}}
		if op.Kind == tool.Write {
			b = &tool.HTTPBinding{Method: "POST", Path: "/" + op.ID, Body: &tool.Body{ContentType: "application/json"}}
		}
		ops[i] = tool.Operation{ID: op.ID, Kind: op.Kind, HTTP: b}
	}
	return ops
}

// goldenAPI answers every call with the case's body for its operation.
type goldenAPI struct {
	answers map[string]json.RawMessage
	mu      sync.Mutex
	calls   []string
}

func (a *goldenAPI) Call(_ context.Context, req tool.CallRequest) (tool.CallResult, error) {
	name := req.Tool.Name + "." + req.Operation.ID
	a.mu.Lock()
	a.calls = append(a.calls, name)
	a.mu.Unlock()
	body, ok := a.answers[name]
	if !ok {
		body = json.RawMessage(`{}`)
	}
	return tool.CallResult{Status: 200, Body: body, Attempts: 1}, nil
}

func (a *goldenAPI) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string{}, a.calls...)
}

// TestAResumeUsesTheToolRevisionsItStartedWith checks that a tool updated
// between a crash and the resume (here to a policy class whose rule denies
// every call) does not change the resumed workflow, while new invocations
// see the update.
func TestAResumeUsesTheToolRevisionsItStartedWith(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	deploy(t, db, "guarded", `{"tools": ["ledger"], "policies": {"restricted": {"allow": "false"}}, "steps": [
		{"action": "fetch", "call": "ledger.getTransaction", "save_as": "txn"},
		{"action": "post", "call": "ledger.postEntry", "args": {"amount": "txn.amount"}}],
		"outcome": "'settled'"}`)
	api := &ledger{hold: true, held: make(chan struct{}, 1)}
	a := newRunner(db, "replica-a", api)
	wf, err := a.Start(ctx, request("guarded"))
	if err != nil {
		t.Fatal(err)
	}
	<-api.held // step 1 is stored; step 2's write is in flight
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	api.mu.Lock()
	api.hold = false
	api.mu.Unlock()
	updateLedger(t, db, func(lt *tool.Tool) { lt.PolicyClass = "restricted" })

	done := resumeElsewhere(t, workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-b", Lease: time.Minute}, wf.ID)
	if done.Status != workflow.Completed || done.Outcome != "settled" {
		t.Fatalf("resumed workflow %s/%s, error %s; want completed/settled under the revision it started with", done.Status, done.Outcome, done.Error)
	}
	key := wf.ID + ".2"
	if diff := cmp.Diff([]string{"getTransaction " + wf.ID + ".1", "postEntry " + key, "postEntry " + key}, api.seen()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	r := newRunner(db, "replica-b", api)
	next, err := r.Start(ctx, request("guarded"))
	if err != nil {
		t.Fatal(err)
	}
	if next, err = r.Wait(ctx, "acme", next.ID); err != nil {
		t.Fatal(err)
	}
	if next.Outcome != workflow.OutcomeDenied {
		t.Errorf("a new invocation after the update: outcome %q, want denied", next.Outcome)
	}
}
