package console

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestReturnPath: a form's return page is a console path, never a link
// elsewhere.
func TestReturnPath(t *testing.T) {
	for in, want := range map[string]string{
		"/console/approvals":              "/console/approvals",
		"/console/workflows?status=ok":    "/console/workflows?status=ok",
		"":                                "/console/",
		"https://evil.example/console/":   "/console/",
		"//evil.example/console/":         "/console/",
		"/v1/workflows":                   "/console/",
		"javascript:alert(1)":             "/console/",
		"/console/../v1/audit/query":      "/console/",
		"/\\evil.example/console/x":       "/console/",
		"/console/workflows/wf_1#section": "/console/workflows/wf_1",
	} {
		if got := ReturnPath(in); got != want {
			t.Errorf("ReturnPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConsolePagesRender renders every page with every field set, so a
// template that reads a field its data lacks fails here, not as a 500.
func TestConsolePagesRender(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	wf := &workflow.Workflow{ID: "wf_1", Agent: "refunds", AgentVersion: "2", Status: workflow.Completed, Outcome: "refunded",
		Goal: "refund", StartedAt: now, FinishedAt: now.Add(time.Second), Output: json.RawMessage(`{"a":1}`), ReplayOf: "wf_0",
		Faults: []fault.Fault{{Tool: "payments", Operation: "get", Result: fault.Result{Status: 503}}, {Tool: "cases", Result: fault.Result{Error: fault.ErrorTimeout}}}}
	user := &User{Subject: "ann", Tenant: "acme", CSRF: "x",
		Scopes: []string{"workflows:read", "workflows:approve", "agents:invoke", "workflows:replay"}}
	approval := &workflow.Approval{WorkflowID: "wf_1", Step: 2, Action: "ok", Status: workflow.ApprovalPending, ApproverScope: "approve:refunds",
		Deadline: now, DecidedBy: "bob", DecidedAt: now, Comment: "fine"}
	step := workflow.Step{Step: 1, Action: "fetch", Kind: "call", Status: "ok", Tool: "payments", Operation: "get", HTTPStatus: 200,
		Error: "boom", Reason: "why", Model: "m", Injected: &fault.Injected{Fault: 0, Status: 503}}
	pages := map[string]any{
		"workflows": workflowsPage{Rows: []workflowRow{{Workflow: wf, DurationMS: 1000}}, Statuses: []string{"", "running"}, Next: "/console/workflows?cursor=wf_1"},
		"workflow": workflowPage{Workflow: wf, DurationMS: 1000, Finished: true, Invoker: "alice", Output: "{}", Error: "{}",
			Usage:        &usageLine{InputTokens: 1, OutputTokens: 2, Completions: 1, Cost: "0.1 USD"},
			Steps:        []stepLine{{Step: step, N: 1, Args: "{}", Request: "{}", Result: "{}", BarW: 10}, {Step: step, N: 2, Hidden: true}},
			Conversation: web.Conversation([]replay.Completion{{N: 1}}, nil), Approvals: []*workflow.Approval{approval},
			Replays:  []replayLine{{Replay: &replay.Replay{ID: "rpl_1", Target: "refunds@2", DryRun: true}, Viewer: "/replays/rpl_1"}},
			Versions: []string{"1", "2"}},
		"approvals": approvalsPage{Rows: []*workflow.Approval{approval}, Next: "/console/approvals?cursor=x"},
		"signin":    signInPage{Refused: "used", OIDC: "login.example.com", Next: "/console/approvals"},
		"error":     errorPage{Detail: "d", RequestID: "req_1", SignIn: true, OIDC: true},
	}
	for name, data := range pages {
		for _, u := range []*User{user, nil} {
			if name != "signin" && name != "error" && u == nil {
				continue
			}
			if err := Render(io.Discard, name, Page{Title: name, User: u, Live: "poll", Data: data}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	// A real replay's workflow names its faults, and marks the steps they answered.
	var b strings.Builder
	if err := Render(&b, "workflow", Page{Title: "workflow", User: user, Live: "poll", Data: pages["workflow"]}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<code>faults[0]</code> payments.get → 503; <code>faults[1]</code> cases → timeout`,
		`<span class="badge injected">fault 0 injected: not sent</span>`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the workflow page lacks %s", want)
		}
	}
}
