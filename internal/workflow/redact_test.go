package workflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

const ownerEmail = "ann.owner@example.com"

// owning is the ledger answering with the owner's e-mail address.
type owning struct{ ledger }

func (o *owning) Call(ctx context.Context, req tool.CallRequest) (tool.CallResult, error) {
	res, err := o.ledger.Call(ctx, req)
	if err == nil && req.Operation.Kind == tool.Read {
		res.Body = json.RawMessage(`{"amount": 42, "owner": "` + ownerEmail + `"}`)
	}
	return res, err
}

// TestCompletionsAreStoredMaskedAndTheModelSeesRealValues: the model is
// shown the tool's real answer; the stored completion holds its masked
// form, and so does the step.
func TestCompletionsAreStoredMaskedAndTheModelSeesRealValues(t *testing.T) {
	t.Parallel()
	db := setup(t)
	deploy(t, db, "planned", plannedAgent)
	m := &scripted{}
	ms := modelTable{model.DefaultName: {Model: "gpt-test"}}
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: &owning{}, Models: ms, LLM: m,
		Owner: "replica-a", Redact: &redact.Service{Keys: db, Detect: []string{redact.Email}}})
	wf := run(t, r, "planned")
	if wf.Status != workflow.Completed {
		t.Fatalf("workflow %s/%s: %s", wf.Status, wf.Outcome, wf.Error)
	}
	m.mu.Lock()
	shown, _ := json.Marshal(m.requests)
	m.mu.Unlock()
	if !strings.Contains(string(shown), ownerEmail) {
		t.Errorf("the model was not shown the real answer: %s", shown)
	}
	comps, err := db.WorkflowCompletions(context.Background(), wf.ID)
	if err != nil || len(comps) != 2 {
		t.Fatalf("completions: %d, %v", len(comps), err)
	}
	if last := string(comps[1].Data); strings.Contains(last, ownerEmail) || !strings.Contains(last, "[redacted:email:") {
		t.Errorf("stored completion holds %s", last)
	}
	steps, err := db.Steps(context.Background(), wf.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := json.Marshal(steps)
	if strings.Contains(string(all), ownerEmail) || !strings.Contains(string(all), "[redacted:email:") {
		t.Errorf("stored steps hold %s", all)
	}
}

// TestAResumeComparesCallsMasked: a call whose arguments come from the
// invocation's goal is recorded masked; resumed on another replica, the
// call made again from the real goal is masked before it is compared, so
// the workflow is not taken for nondeterministic.
func TestAResumeComparesCallsMasked(t *testing.T) {
	t.Parallel()
	db := setup(t)
	deploy(t, db, "mailed", `{"tools": ["ledger"], "steps": [
		{"action": "fetch", "call": "ledger.getTransaction", "args": {"note": "goal"}, "save_as": "txn"},
		{"action": "post", "call": "ledger.postEntry", "args": {"amount": "txn.amount", "owner": "txn.owner"}}],
		"outcome": "'settled'"}`)
	api := &owning{ledger{hold: true, held: make(chan struct{}, 1)}}
	service := &redact.Service{Keys: db, Detect: []string{redact.Email}}
	opts := workflow.Options{Store: db, Versions: db, Tools: db, Caller: api, Owner: "replica-a", Lease: time.Minute, Redact: service}
	a := workflow.New(opts)
	ctx := context.Background()
	req := request("mailed")
	req.Goal = "mail " + ownerEmail
	wf, err := a.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	<-api.held
	api.mu.Lock()
	api.hold = false
	api.mu.Unlock()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	opts.Owner = "replica-b"
	done := resumeElsewhere(t, opts, wf.ID)
	if done.Status != workflow.Completed {
		t.Fatalf("resumed workflow %s/%s: %s", done.Status, done.Outcome, done.Error)
	}
	steps, err := db.Steps(ctx, wf.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := json.Marshal(steps)
	if strings.Contains(string(all), ownerEmail) || !strings.Contains(string(all), `"note":"mail [redacted:email:`) {
		t.Errorf("stored steps hold %s", all)
	}
}

// keyCounter counts the redaction keys asked of the store.
type keyCounter struct {
	redact.KeyStore
	asked int
}

func (k *keyCounter) RedactionKey(ctx context.Context, tenant string, fresh []byte) ([]byte, error) {
	k.asked++
	return k.KeyStore.RedactionKey(ctx, tenant, fresh)
}

// TestNoRedactionNoMasker: with no detector of the operator's and no
// tool asking for redaction, a workflow asks for no key and keeps its
// values as they are; a detector of the operator's masks them.
func TestNoRedactionNoMasker(t *testing.T) {
	t.Parallel()
	db := setup(t)
	deploy(t, db, "planned", plannedAgent)
	for _, tc := range []struct {
		detect []string
		masked bool
	}{{nil, false}, {[]string{redact.Email}, true}} {
		keys := &keyCounter{KeyStore: db}
		ms := modelTable{model.DefaultName: {Model: "gpt-test"}}
		r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: &owning{}, Models: ms, LLM: &scripted{},
			Owner: "replica-a", Redact: &redact.Service{Keys: keys, Detect: tc.detect}})
		wf := run(t, r, "planned")
		steps, err := db.Steps(context.Background(), wf.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := json.Marshal(steps)
		if masked := !strings.Contains(string(all), ownerEmail); masked != tc.masked || (keys.asked > 0) != tc.masked {
			t.Errorf("detect %v: steps masked %v, keys asked %d; want masked %v", tc.detect, masked, keys.asked, tc.masked)
		}
	}
}
