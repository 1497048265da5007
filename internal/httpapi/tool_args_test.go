package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// A 19-digit id and other integers past 2^53, which a float64 would send
// as 1234567890123456800, 9007199254740992 and 18014398509481984.
const (
	wideID    = "1234567890123456789"
	wideAfter = "9007199254740993"
	wideSeq   = "18014398509481985"
)

// ledgerWorld is a ledger API, a real HTTP server registered as the tool
// ledger of policy class financial, that keeps every request as it came.
type ledgerWorld struct {
	admin string
	mu    sync.Mutex
	got   []ledgerRequest
}

// ledgerRequest is a request the ledger received.
type ledgerRequest struct {
	Method, URI, Seq, Body string
}

func (w *ledgerWorld) requests() []ledgerRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ledgerRequest(nil), w.got...)
}

func newLedgerWorld(t *testing.T, h *harness) *ledgerWorld {
	t.Helper()
	w := &ledgerWorld{admin: h.token("acme", adminScopes+" workflows:replay")}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(rw, ledgerSpec, "http://"+r.Host)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.got = append(w.got, ledgerRequest{Method: r.Method, URI: r.URL.RequestURI(), Seq: r.Header.Get("X-Seq"), Body: string(body)})
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			rw.WriteHeader(http.StatusCreated)
			rw.Write([]byte(`{"transfer":"tr-1"}`))
			return
		}
		id := strings.TrimPrefix(r.URL.Path, "/accounts/")
		fmt.Fprintf(rw, `{"id":%s,"balance":20}`, id)
	}))
	t.Cleanup(srv.Close)
	reg := map[string]any{"name": "ledger", "type": "openapi", "spec_url": srv.URL + "/openapi.json", "policy_class": "financial", "side_effects": []string{"create"}}
	if r := h.do("POST", "/v1/tools", w.admin, reg); r.Status != 201 {
		t.Fatalf("register ledger: %d %s", r.Status, r.Body)
	}
	return w
}

const ledgerSpec = `{"openapi": "3.0.3", "info": {"title": "ledger", "version": "1"},
 "servers": [{"url": "%s"}],
 "paths": {
  "/accounts/{id}": {"get": {"operationId": "getAccount", "summary": "Read an account",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "format": "int64"}},
    {"name": "after", "in": "query", "schema": {"type": "integer", "format": "int64"}},
    {"name": "X-Seq", "in": "header", "schema": {"type": "integer", "format": "int64"}}],
   "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
  "/transfers": {"post": {"operationId": "createTransfer", "summary": "Move money from an account",
   "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object",
     "properties": {"from": {"type": "integer", "format": "int64"}, "amount": {"type": "number"}}}}}},
   "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"type": "object"}}}}}}}}}`

// ledgerScript reads the account, asks for a transfer the policy refuses
// (5000 over 1000) and one it allows, then answers.
func ledgerScript() llmtest.Script {
	return llmtest.Sequence(
		llmtest.Calls(llmtest.Call("ledger__getAccount", `{"id": `+wideID+`, "after": `+wideAfter+`, "X-Seq": `+wideSeq+`}`)),
		llmtest.Calls(llmtest.Call("ledger__createTransfer", `{"from": `+wideID+`, "amount": 5000}`)),
		llmtest.Calls(llmtest.Call("ledger__createTransfer", `{"from": `+wideID+`, "amount": 12.50}`)),
		llmtest.Text("moved 12.50"),
	)
}

// ledgerPolicies refuse a transfer over 1000.
var ledgerPolicies = map[string]any{"financial": map[string]any{"allow": "!has(args.amount) || args.amount <= 1000.0"}}

// checkLedger checks what the ledger received: the account read and the
// allowed transfer, every digit as the model wrote it.
func checkLedger(t *testing.T, w *ledgerWorld) {
	t.Helper()
	got := w.requests()
	want := []ledgerRequest{
		{Method: "GET", URI: "/accounts/" + wideID + "?after=" + wideAfter, Seq: wideSeq},
		{Method: "POST", URI: "/transfers", Body: `{"amount":12.50,"from":` + wideID + `}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the ledger's requests (-want +got):\n%s", diff)
	}
}

// callArgs are the recorded args of a workflow's call steps, as stored.
func callArgs(t *testing.T, h *harness, token, id string) []string {
	t.Helper()
	var wf struct {
		Steps []struct {
			Status string          `json:"status"`
			Args   json.RawMessage `json:"args"`
		} `json:"steps"`
	}
	h.do("GET", "/v1/workflows/"+id, token, nil).json(t, &wf)
	var out []string
	for _, s := range wf.Steps {
		if len(s.Args) > 0 {
			var b bytes.Buffer
			json.Compact(&b, s.Args)
			out = append(out, s.Status+" "+b.String())
		}
	}
	return out
}

var wantCallArgs = []string{
	`ok {"X-Seq":` + wideSeq + `,"after":` + wideAfter + `,"id":` + wideID + `}`,
	`denied {"amount":5000,"from":` + wideID + `}`,
	`ok {"amount":12.50,"from":` + wideID + `}`,
}

// TestDefinedAgentCallsKeepEveryDigit: a model's call whose integers are
// past 2^53 reaches the tool with every digit, in the path, the query, a
// header and the body, and is recorded so; the policy still compares a
// number of the call (it refuses the transfer of 5000), and a replay is
// served the recorded answers of the identical calls.
func TestDefinedAgentCallsKeepEveryDigit(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, ledgerScript())
	h := newHarness(t, withExternal(t, ms), withExternalReplays())
	w := newLedgerWorld(t, h)
	def := map[string]any{"model": "gpt", "tools": []string{"ledger"}, "policies": ledgerPolicies,
		"steps":  []any{map[string]any{"action": "solve", "plan": map[string]any{"prompt": "goal", "save_as": "answer"}, "on_denied": "continue"}},
		"output": "answer", "outcome": "'answered'"}
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "treasurer", "definition": def}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	r := h.do("POST", "/v1/agents/treasurer/invoke", w.admin, map[string]any{"goal": "move 12.50 from account " + wideID})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "answered" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	checkLedger(t, w)
	if diff := cmp.Diff(wantCallArgs, callArgs(t, h, w.admin, wf.ID)); diff != "" {
		t.Errorf("recorded args (-want +got):\n%s", diff)
	}

	rp := h.do("POST", "/v1/workflows/"+wf.ID+"/replay", w.admin, map[string]any{"target_agent_version": "treasurer@1"})
	var res replayResult
	rp.json(t, &res)
	if rp.Status != 201 || res.ReplayOutcome != "answered" || !cmp.Equal(res.Delta, delta(0, 0, 0, 0)) {
		t.Errorf("replay: %d %s", rp.Status, rp.Body)
	}
	if n := len(w.requests()); n != 2 {
		t.Errorf("the dry-run replay sent %d requests to the ledger", n-2)
	}
}

// TestExternalAgentCallsKeepEveryDigit: an external agent's calls through
// the gateway's MCP server reach the tool with every digit and are
// recorded so; the agent's retry repeats them and the journal serves them
// from the record (the read and the transfer are sent once); the policy
// refuses a transfer of 5000.
func TestExternalAgentCallsKeepEveryDigit(t *testing.T) {
	t.Parallel()
	ms := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Answer {
		var replies int
		for _, m := range r.Messages {
			if m.Role == "tool" {
				replies++
			}
		}
		switch large := strings.Contains(r.Messages[0].Content, "5000"); {
		case large && replies == 0:
			return llmtest.Calls(llmtest.Call("ledger__createTransfer", `{"from": `+wideID+`, "amount": 5000}`))
		case !large && replies == 0:
			return llmtest.Calls(llmtest.Call("ledger__getAccount", `{"id": `+wideID+`, "after": `+wideAfter+`, "X-Seq": `+wideSeq+`}`))
		case !large && replies == 1:
			return llmtest.Calls(llmtest.Call("ledger__createTransfer", `{"from": `+wideID+`, "amount": 12.50}`))
		}
		return llmtest.Text("done: " + r.Last().Content)
	})
	h := newHarness(t, withExternal(t, ms))
	w := newLedgerWorld(t, h)
	srv, attempts := flakyAgent(t, 1, nil)
	deployExternal(t, h, w.admin, "ext-treasurer", map[string]any{"url": srv.URL, "tools": []string{"ledger"}, "models": []string{"gpt"},
		"policies": ledgerPolicies})
	r := h.do("POST", "/v1/agents/ext-treasurer/invoke", w.admin, map[string]any{"goal": "move 12.50 from account " + wideID})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Status != "completed" || attempts.Load() != 2 {
		t.Fatalf("invoke: %d, %d attempts: %s", r.Status, attempts.Load(), r.Body)
	}
	checkLedger(t, w)
	full := externalRunOf(t, h, w.admin, wf.ID)
	if got, want := stepList(full), "1:completion:ok 1:call:ok 1:completion:ok 1:call:ok 1:completion:ok 1:attempt:error 2:attempt:ok"; got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	if a := full.Steps[len(full.Steps)-1]; !strings.Contains(string(a.Result), `"journal_served":5`) {
		t.Errorf("attempt 2 was not served its 5 exchanges from the journal: %s", a.Result)
	}
	want := []string{wantCallArgs[0], wantCallArgs[2]}
	if diff := cmp.Diff(want, callArgs(t, h, w.admin, wf.ID)); diff != "" {
		t.Errorf("recorded args (-want +got):\n%s", diff)
	}

	r = h.do("POST", "/v1/agents/ext-treasurer/invoke", w.admin, map[string]any{"goal": "move 5000 from account " + wideID})
	r.json(t, &wf)
	if r.Status != 200 || !strings.Contains(string(wf.Output), "policy financial denied") {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	if diff := cmp.Diff(wantCallArgs[1:2], callArgs(t, h, w.admin, wf.ID)); diff != "" {
		t.Errorf("recorded args (-want +got):\n%s", diff)
	}
	if n := len(w.requests()); n != 2 {
		t.Errorf("the ledger received %d requests, want the 2 of the first run", n)
	}
}

// moverDef reads the account the context names and moves the context's
// amount from it: every argument comes from an expression, the account
// id of the transfer from the ledger's answer.
var moverDef = map[string]any{"tools": []string{"ledger"}, "policies": ledgerPolicies,
	"steps": []any{
		map[string]any{"action": "read", "call": "ledger.getAccount",
			"args": map[string]any{"id": "context.account", "after": "context.after", "X-Seq": "context.seq"}, "save_as": "account"},
		map[string]any{"action": "move", "call": "ledger.createTransfer",
			"args": map[string]any{"from": "account.id", "amount": "context.amount"}},
	},
	"outcome": "'moved'",
	"output":  "{'account': context.account, 'typed': type(context.account) == int && type(account.id) == int && type(context.amount) == double}"}

// moverContext is an invocation's context whose integers are past 2^53.
func moverContext() map[string]any {
	return map[string]any{"account": json.Number(wideID), "after": json.Number(wideAfter), "seq": json.Number(wideSeq), "amount": json.Number("12.50")}
}

// wantMoverRequests are what the ledger receives from a run of moverDef,
// or from the same two calls made with call_operation: every digit of the
// integers; the amount an expression gave is written as its double.
var wantMoverRequests = []ledgerRequest{
	{Method: "GET", URI: "/accounts/" + wideID + "?after=" + wideAfter, Seq: wideSeq},
	{Method: "POST", URI: "/transfers", Body: `{"amount":12.5,"from":` + wideID + `}`},
}

// wantMoverArgs are the recorded args of those two calls.
var wantMoverArgs = []string{
	`ok {"X-Seq":` + wideSeq + `,"after":` + wideAfter + `,"id":` + wideID + `}`,
	`ok {"amount":12.5,"from":` + wideID + `}`,
}

// checkMoved checks the run id of a definition that makes moverDef's calls:
// the ledger received them with every digit, they are recorded so, and
// output, the run's, is the account with every digit, an int in
// expressions as the amount is a double.
func checkMoved(t *testing.T, h *harness, w *ledgerWorld, id string, output []byte) {
	t.Helper()
	if diff := cmp.Diff(wantMoverRequests, w.requests()); diff != "" {
		t.Errorf("the ledger's requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMoverArgs, callArgs(t, h, w.admin, id)); diff != "" {
		t.Errorf("recorded args (-want +got):\n%s", diff)
	}
	if want := `{"account":` + wideID + `,"typed":true}`; string(output) != want {
		t.Errorf("output %s, want %s", output, want)
	}
}

// moveAndReplay deploys def as the agent name, invokes it with ctx,
// checks the run (checkMoved) and a dry-run replay of it against the same
// version, which is served the recorded answers and sends nothing.
func moveAndReplay(t *testing.T, h *harness, w *ledgerWorld, name string, def, ctx map[string]any) {
	t.Helper()
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": name, "definition": def}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	r := h.do("POST", "/v1/agents/"+name+"/invoke", w.admin, map[string]any{"goal": "move 12.50", "context": ctx})
	var wf externalWorkflow
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "moved" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	checkMoved(t, h, w, wf.ID, wf.Output)

	rp := h.do("POST", "/v1/workflows/"+wf.ID+"/replay", w.admin, map[string]any{"target_agent_version": name + "@1"})
	var res replayResult
	rp.json(t, &res)
	if rp.Status != 201 || res.ReplayOutcome != "moved" || !cmp.Equal(res.Delta, delta(0, 0, 0, 0)) {
		t.Errorf("replay: %d %s", rp.Status, rp.Body)
	}
	if n := len(w.requests()); n != 2 {
		t.Errorf("the dry-run replay sent %d requests to the ledger", n-2)
	}
}

// TestCallStepArgsFromContextKeepEveryDigit: a call step whose args are
// expressions over the invocation's context and an earlier answer sends
// an integer past 2^53 with every digit, in the path, the query, a header
// and the body, and records it so; in expressions it is an int, the
// amount a double; a replay is served the recorded answers.
func TestCallStepArgsFromContextKeepEveryDigit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	moveAndReplay(t, h, newLedgerWorld(t, h), "mover", moverDef, moverContext())
}

// TestMCPCallOperationKeepsEveryDigit: call_operation's args, and the
// context of an agent's MCP tool, reach the tool with every digit of an
// integer past 2^53 and are recorded so; a replay of the direct call is
// served its recorded answer.
func TestMCPCallOperationKeepsEveryDigit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newLedgerWorld(t, h)
	tok := h.token("acme", "mcp:use agents:invoke tool:ledger workflows:read")
	cs := mcpSession(t, h, tok)
	var workflows []string
	for _, args := range []string{
		`{"tool": "ledger", "operation": "getAccount", "args": {"id": ` + wideID + `, "after": ` + wideAfter + `, "X-Seq": ` + wideSeq + `}}`,
		`{"tool": "ledger", "operation": "createTransfer", "args": {"from": ` + wideID + `, "amount": 12.50}}`,
	} {
		var called struct {
			WorkflowID string `json:"workflow_id"`
			Status     string `json:"status"`
		}
		if res := callTool(t, cs, "call_operation", json.RawMessage(args), &called); res.IsError || called.Status != "ok" {
			t.Fatalf("call_operation %s: %s", args, resultText(res))
		}
		workflows = append(workflows, called.WorkflowID)
	}
	if diff := cmp.Diff(wantMoverRequests, w.requests()); diff != "" {
		t.Errorf("the ledger's requests (-want +got):\n%s", diff)
	}
	var recorded []string
	for _, id := range workflows {
		recorded = append(recorded, callArgs(t, h, tok, id)...)
	}
	if diff := cmp.Diff(wantMoverArgs, recorded); diff != "" {
		t.Errorf("recorded args (-want +got):\n%s", diff)
	}
	rp := h.do("POST", "/v1/workflows/"+workflows[0]+"/replay", w.admin, map[string]any{"target_agent_version": "mcp@ledger.getAccount"})
	var res replayResult
	rp.json(t, &res)
	if rp.Status != 201 || !cmp.Equal(res.Delta, delta(0, 0, 0, 0)) {
		t.Errorf("replay: %d %s", rp.Status, rp.Body)
	}

	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "mover", "definition": moverDef}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	var invoked externalWorkflow
	if res := callTool(t, cs, "agent_mover", map[string]any{"goal": "move 12.50", "context": moverContext()}, &invoked); res.IsError || invoked.Outcome != "moved" {
		t.Fatalf("agent_mover: %s", resultText(res))
	}
	if diff := cmp.Diff(slices.Concat(wantMoverRequests, wantMoverRequests), w.requests()); diff != "" {
		t.Errorf("the ledger's requests (-want +got):\n%s", diff)
	}
}

// TestScheduledRunArgsKeepEveryDigit: a schedule's context reaches its
// runs' call args with every digit of an integer past 2^53.
func TestScheduledRunArgsKeepEveryDigit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newLedgerWorld(t, h)
	admin := h.token("acme", adminScopes+" schedules:write")
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "mover", "definition": moverDef}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	r := h.do("POST", "/v1/schedules", admin, map[string]any{"agent": "mover", "cron": "0 9 * * 1-5", "goal": "move 12.50", "context": moverContext()})
	var sch struct {
		ID string `json:"id"`
	}
	r.json(t, &sch)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/schedules/"+sch.ID+"/trigger", admin, nil); r.Status != 202 {
		t.Fatalf("trigger: %d %s", r.Status, r.Body)
	}
	waitFor(t, func() bool { return len(w.requests()) == 2 })
	if diff := cmp.Diff(wantMoverRequests, w.requests()); diff != "" {
		t.Errorf("the ledger's requests (-want +got):\n%s", diff)
	}
}

// TestA2AContextKeepsEveryDigit: the data part of an A2A message, the
// context, reaches the run's call args, the record and the output artifact
// with every digit of an integer past 2^53, as an invoke's does; a retry of
// the message finds its task, and the message id sent again with an id one
// lower (the same double) is another message, refused.
func TestA2AContextKeepsEveryDigit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newLedgerWorld(t, h)
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "mover", "definition": moverDef}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	send := func(ctx map[string]any) rpcReply {
		return h.rpc(t, "mover", w.admin, "SendMessage", map[string]any{"message": a2aMessage("d-1", "move 12.50", ctx)})
	}
	var sent struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Artifacts []struct {
				Parts []struct {
					Data json.RawMessage `json:"data"`
				} `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	}
	rep := send(moverContext())
	json.Unmarshal(rep.Result, &sent)
	task := sent.Task
	if rep.Error != nil || task.Status.State != "TASK_STATE_COMPLETED" || len(task.Artifacts) != 1 {
		t.Fatalf("SendMessage: %s %+v", rep.Result, rep.Error)
	}
	checkMoved(t, h, w, task.ID, task.Artifacts[0].Parts[0].Data)

	rep = send(moverContext())
	json.Unmarshal(rep.Result, &sent)
	if rep.Error != nil || sent.Task.ID != task.ID {
		t.Errorf("the retried message: task %s (first %s) %+v", sent.Task.ID, task.ID, rep.Error)
	}
	lower := moverContext()
	lower["account"] = json.Number("1234567890123456788")
	if rep := send(lower); rep.Error == nil || rep.Error.Data["type"] == nil || !strings.HasSuffix(rep.Error.Data["type"].(string), "idempotency-key-reused") {
		t.Errorf("the message id sent with another account: %s %+v", rep.Result, rep.Error)
	}
	if n := len(w.requests()); n != 2 {
		t.Errorf("the ledger received %d requests, want the 2 of the first message", n)
	}
}

// TestCallStepLiteralArgsKeepEveryDigit: integers past 2^53 written
// literally in a definition, in a call step's args and in a set step, reach
// the tool with every digit and are recorded so; in expressions the set
// integer is an int and the set amount a double, as they are read from a
// context; a replay is served the recorded answers.
func TestCallStepLiteralArgsKeepEveryDigit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	def := map[string]any{"tools": []string{"ledger"}, "policies": ledgerPolicies,
		"steps": []any{
			map[string]any{"action": "read", "call": "ledger.getAccount",
				"args": map[string]any{"id": json.Number(wideID), "after": json.Number(wideAfter), "X-Seq": json.Number(wideSeq)}},
			map[string]any{"action": "remember", "set": map[string]any{"account": json.Number(wideID), "amount": json.Number("12.50")}},
			map[string]any{"action": "move", "call": "ledger.createTransfer",
				"args": map[string]any{"from": json.Number(wideID), "amount": json.Number("12.50")}},
		},
		"outcome": "'moved'",
		"output":  "{'account': account, 'typed': type(account) == int && type(amount) == double}"}
	moveAndReplay(t, h, newLedgerWorld(t, h), "literal", def, nil)
}
