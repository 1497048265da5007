package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fraudWorld is a payments API and a cases API, real HTTP servers registered
// as tools, with SPEC's fraud-triage agent deployed against them.
type fraudWorld struct {
	h       *harness
	admin   string
	amounts sync.Map // transaction id → amount
	// payments and cases count the requests each API received.
	payments, cases atomic.Int32
	// caseBodies are the bodies createCase received.
	mu         sync.Mutex
	caseBodies []map[string]any
	// busy is set once createCase has answered 503 to a case for the
	// queue "busy", as it does the first time.
	busy atomic.Bool
	// gate, when set, holds getTransaction until closed.
	gate chan struct{}
	// traceparents are the traceparent headers getTransaction received.
	traceparents chan string
}

const adminScopes = "tools:read tools:write agents:read agents:write agents:invoke workflows:read tool:*"

func newFraudWorld(t *testing.T, h *harness) *fraudWorld {
	t.Helper()
	w := &fraudWorld{h: h, admin: h.token("acme", adminScopes), traceparents: make(chan string, 100)}
	payments := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(rw, paymentsSpec, "http://"+r.Host)
			return
		}
		id, ok := strings.CutPrefix(r.URL.Path, "/transactions/")
		if !ok || r.Method != "GET" {
			http.NotFound(rw, r)
			return
		}
		w.payments.Add(1)
		select {
		case w.traceparents <- r.Header.Get("traceparent"):
		default:
		}
		if g := w.gate; g != nil {
			<-g
		}
		amount, _ := w.amounts.Load(id)
		if amount == nil {
			amount = 20.0
		}
		json.NewEncoder(rw).Encode(map[string]any{"id": id, "amount": amount})
	}))
	t.Cleanup(payments.Close)
	cases := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(rw, casesSpec, "http://"+r.Host)
			return
		}
		if r.URL.Path != "/cases" || r.Method != "POST" {
			http.NotFound(rw, r)
			return
		}
		n := w.cases.Add(1)
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		w.mu.Lock()
		w.caseBodies = append(w.caseBodies, body)
		w.mu.Unlock()
		if body["queue"] == "busy" && w.busy.CompareAndSwap(false, true) {
			http.Error(rw, `{"error": "the queue is busy, try again"}`, http.StatusServiceUnavailable)
			return
		}
		rw.WriteHeader(http.StatusCreated)
		json.NewEncoder(rw).Encode(map[string]any{"case_id": fmt.Sprintf("case-%d", n), "queue": body["queue"]})
	}))
	t.Cleanup(cases.Close)

	for _, reg := range []map[string]any{
		{"name": "payments", "type": "openapi", "spec_url": payments.URL + "/openapi.json"},
		{"name": "cases", "type": "openapi", "spec_url": cases.URL + "/openapi.json", "policy_class": "financial", "side_effects": []string{"create"}},
	} {
		if r := h.do("POST", "/v1/tools", w.admin, reg); r.Status != 201 {
			t.Fatalf("register %s: %d %s", reg["name"], r.Status, r.Body)
		}
	}
	def, err := os.ReadFile("testdata/fraud_triage.json")
	if err != nil {
		t.Fatal(err)
	}
	r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "fraud-triage", "definition": json.RawMessage(def)})
	if r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	return w
}

const paymentsSpec = `{"openapi": "3.0.3", "info": {"title": "payments", "version": "1"},
 "servers": [{"url": "%s"}],
 "paths": {"/transactions/{id}": {"get": {"operationId": "getTransaction", "summary": "Read a transaction",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}}}}`

const casesSpec = `{"openapi": "3.0.3", "info": {"title": "cases", "version": "1"},
 "servers": [{"url": "%s"}],
 "paths": {"/cases": {"post": {"operationId": "createCase", "summary": "Open a case",
   "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object",
     "properties": {"transaction": {"type": "string"}, "queue": {"type": "string"}, "amount": {"type": "number"}}}}}},
   "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"type": "object"}}}}}}}}}`

// streamEvent is a server-sent event with its data decoded.
type streamEvent struct {
	ID   int
	Data map[string]any
}

func streamEvents(t *testing.T, body []byte) []streamEvent {
	t.Helper()
	var out []streamEvent
	for _, e := range parseSSE(t, "stream", body) {
		ev := streamEvent{ID: e.id}
		if err := json.Unmarshal([]byte(e.data), &ev.Data); err != nil {
			t.Fatalf("event data %q: %v", e.data, err)
		}
		out = append(out, ev)
	}
	return out
}

// brief is a step event reduced to what the tests compare.
type brief struct {
	Step                   int
	Action, Status         string
	Tool, Operation, Queue string
	Score                  float64
}

func briefOf(m map[string]any) brief {
	b := brief{Action: str(m["action"]), Status: str(m["status"]), Tool: str(m["tool"]), Operation: str(m["operation"]), Queue: str(m["queue"])}
	if n, ok := m["step"].(float64); ok {
		b.Step = int(n)
	}
	if s, ok := m["score"].(float64); ok {
		b.Score = s
	}
	return b
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

var escalated = []brief{
	{Step: 1, Action: "fetch_transaction", Status: "ok", Tool: "payments", Operation: "getTransaction"},
	{Step: 2, Action: "fraud_score", Status: "ok", Score: 0.91},
	{Step: 3, Action: "route_queue", Status: "ok", Queue: "fraud-review"},
	{Step: 4, Action: "open_case", Status: "ok", Tool: "cases", Operation: "createCase"},
}

func TestInvokeStreamsStepsThenOneComplete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-1", 1500.0)

	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin,
		map[string]any{"goal": "triage tx-1", "context": map[string]any{"transaction_id": "tx-1"}, "stream": true})
	if r.Status != 200 || r.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v %s", r.Status, r.Header, r.Body)
	}
	events := streamEvents(t, r.Body)
	if len(events) != 5 {
		t.Fatalf("events: %s", r.Body)
	}
	var steps []brief
	for i, ev := range events[:4] {
		if ev.ID != i+1 || ev.Data["event"] != "step" || ev.Data["agent"] != "fraud-triage" {
			t.Errorf("event %d: id %d %v", i, ev.ID, ev.Data)
		}
		steps = append(steps, briefOf(ev.Data))
	}
	if diff := cmp.Diff(escalated, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	done := events[4].Data
	wfID := r.Header.Get("Workflow-Id")
	if events[4].ID != 5 || done["event"] != "complete" || done["outcome"] != "escalated" || done["workflow_id"] != wfID || wfID == "" {
		t.Fatalf("complete %v (Workflow-Id %q)", done, wfID)
	}
	if _, ok := done["duration_ms"].(float64); !ok {
		t.Errorf("complete without duration_ms: %v", done)
	}

	var wf struct {
		WorkflowID string           `json:"workflow_id"`
		Status     string           `json:"status"`
		Outcome    string           `json:"outcome"`
		Steps      []map[string]any `json:"steps"`
		Output     map[string]any   `json:"output"`
	}
	g := h.do("GET", "/v1/workflows/"+wfID, w.admin, nil)
	g.json(t, &wf)
	if wf.WorkflowID != wfID || wf.Status != "completed" || wf.Outcome != "escalated" || len(wf.Steps) != 4 {
		t.Fatalf("GET workflow: %s", g.Body)
	}
	if req, _ := wf.Steps[3]["request"].(map[string]any); req["method"] != "POST" {
		t.Errorf("open_case request not recorded: %v", wf.Steps[3])
	}
	if diff := cmp.Diff(map[string]any{"queue": "fraud-review", "score": 0.91}, wf.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if w.cases.Load() != 1 || w.caseBodies[0]["queue"] != "fraud-review" || w.caseBodies[0]["transaction"] != "tx-1" {
		t.Errorf("cases API got %d requests: %v", w.cases.Load(), w.caseBodies)
	}

	// Sync mode returns the same steps.
	s := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin,
		map[string]any{"goal": "triage tx-1 again", "context": map[string]any{"transaction_id": "tx-1"}})
	var sync struct {
		Status  string           `json:"status"`
		Outcome string           `json:"outcome"`
		Steps   []map[string]any `json:"steps"`
	}
	s.json(t, &sync)
	steps = nil
	for _, st := range sync.Steps {
		steps = append(steps, briefOf(st))
	}
	if diff := cmp.Diff(escalated, steps); diff != "" || sync.Outcome != "escalated" || sync.Status != "completed" || s.Header.Get("Workflow-Id") == "" {
		t.Errorf("sync invoke %s\n(-want +got):\n%s", s.Body, diff)
	}
}

// invoke runs the agent synchronously and returns the workflow.
func (w *fraudWorld) invoke(t *testing.T, token string, body map[string]any) map[string]any {
	t.Helper()
	r := w.h.do("POST", "/v1/agents/fraud-triage/invoke", token, body)
	if r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	var wf map[string]any
	r.json(t, &wf)
	return wf
}

func actions(wf map[string]any) []string {
	var out []string
	for _, s := range wf["steps"].([]any) {
		m := s.(map[string]any)
		out = append(out, m["action"].(string)+":"+m["status"].(string))
	}
	return out
}

func TestCallerWithoutToolScopeIsDenied(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-2", 1500.0)
	tok := h.token("acme", "agents:invoke tool:payments")
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-2"}})
	if wf["outcome"] != "denied" || wf["status"] != "completed" {
		t.Fatalf("workflow %v", wf)
	}
	want := []string{"fetch_transaction:ok", "fraud_score:ok", "route_queue:ok", "open_case:denied"}
	if diff := cmp.Diff(want, actions(wf)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if n := w.cases.Load(); n != 0 {
		t.Fatalf("the cases API received %d requests", n)
	}
}

func TestMaxToolCallsIsEnforced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-3", 1500.0)
	wf := w.invoke(t, w.admin, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-3"}, "max_tool_calls": 1})
	if wf["outcome"] != "limit_exceeded" {
		t.Fatalf("workflow %v", wf)
	}
	want := []string{"fetch_transaction:ok", "fraud_score:ok", "route_queue:ok", "tool_call_limit_reached:limit_exceeded"}
	if diff := cmp.Diff(want, actions(wf)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if p, c := w.payments.Load(), w.cases.Load(); p != 1 || c != 0 {
		t.Fatalf("requests: payments %d, cases %d", p, c)
	}
}

func TestPolicyRuleBlocksACall(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-big", 9000.0)
	ctx := map[string]any{"transaction_id": "tx-big"}
	wf := w.invoke(t, w.admin, map[string]any{"goal": "triage", "context": ctx})
	if wf["outcome"] != "denied" || w.cases.Load() != 0 {
		t.Fatalf("without payments:large: %v, cases %d", wf, w.cases.Load())
	}
	wf = w.invoke(t, h.token("acme", adminScopes+" payments:large"), map[string]any{"goal": "triage", "context": ctx})
	if wf["outcome"] != "escalated" || w.cases.Load() != 1 {
		t.Fatalf("with payments:large: %v, cases %d", wf, w.cases.Load())
	}
}

func TestEventsResumeAfterLastEventID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-4", 1500.0)
	wf := w.invoke(t, w.admin, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-4"}})
	id := wf["workflow_id"].(string)
	r := h.do("GET", "/v1/workflows/"+id+"/events", w.admin, nil, "Last-Event-ID", "2")
	events := streamEvents(t, r.Body)
	if len(events) != 3 || events[0].ID != 3 || events[0].Data["action"] != "route_queue" || events[2].Data["event"] != "complete" {
		t.Fatalf("events after 2: %s", r.Body)
	}
}

func TestInvokeValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		status     int
		code       string
		field      string
		headers    []string
	}{
		{"no goal", "/v1/agents/fraud-triage/invoke", map[string]any{"context": map[string]any{"transaction_id": "x"}}, 422, "validation-failed", "goal", nil},
		{"max_tool_calls 0", "/v1/agents/fraud-triage/invoke", map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "x"}, "max_tool_calls": 0}, 422, "validation-failed", "max_tool_calls", nil},
		{"max_tool_calls 101", "/v1/agents/fraud-triage/invoke", map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "x"}, "max_tool_calls": 101}, 422, "validation-failed", "max_tool_calls", nil},
		{"context breaks inputs", "/v1/agents/fraud-triage/invoke", map[string]any{"goal": "g", "context": map[string]any{}}, 422, "validation-failed", "context.transaction_id", nil},
		{"a number no double holds", "/v1/agents/fraud-triage/invoke", map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "x", "caps": []any{1, json.Number("1e400")}}}, 422, "validation-failed", "context.caps[1]", nil},
		{"unknown agent", "/v1/agents/nobody/invoke", map[string]any{"goal": "g"}, 404, "not-found", "", nil},
		{"unknown version", "/v1/agents/fraud-triage@99/invoke", map[string]any{"goal": "g"}, 404, "agent-version-not-found", "", nil},
		{"empty version", "/v1/agents/fraud-triage@/invoke", map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "x"}}, 404, "agent-version-not-found", "", nil},
		{"key differs from the header", "/v1/agents/fraud-triage/invoke", map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "x"}, "idempotency_key": "a"}, 422, "validation-failed", "idempotency_key", []string{"Idempotency-Key", "b"}},
		{"empty key beside the header", "/v1/agents/fraud-triage/invoke", map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "x"}, "idempotency_key": ""}, 422, "validation-failed", "idempotency_key", []string{"Idempotency-Key", "b"}},
		{"key too long", "/v1/agents/fraud-triage/invoke", map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "x"}, "idempotency_key": strings.Repeat("k", 256)}, 422, "validation-failed", "Idempotency-Key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", tc.path, w.admin, tc.body, tc.headers...)
			if r.Status != tc.status {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			d := r.problem(t)
			if string(d.Code) != tc.code || (tc.field != "" && (len(d.Errors) == 0 || d.Errors[0].Field != tc.field)) {
				t.Errorf("problem %+v", d)
			}
		})
	}
}

func TestToolBodiesAreShownOnlyToToolScopeHolders(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-5", 1500.0)
	wf := w.invoke(t, w.admin, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-5"}})
	var got struct {
		Steps []map[string]any `json:"steps"`
	}
	h.do("GET", "/v1/workflows/"+wf["workflow_id"].(string), h.token("acme", "workflows:read tool:payments"), nil).json(t, &got)
	if got.Steps[0]["result"] == nil || got.Steps[0]["bodies_hidden"] != nil {
		t.Errorf("payments step hidden from a tool:payments holder: %v", got.Steps[0])
	}
	if got.Steps[3]["result"] != nil || got.Steps[3]["request"] != nil || got.Steps[3]["bodies_hidden"] != true {
		t.Errorf("cases step shown without tool:cases: %v", got.Steps[3])
	}
}

func TestCancelStopsARunningWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.gate = make(chan struct{})
	defer close(w.gate)
	done := make(chan response, 1)
	go func() {
		done <- h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-6"}})
	}()
	waitFor(t, func() bool { return w.payments.Load() == 1 })
	id := runningWorkflow(t, h, w.admin)
	c := h.do("POST", "/v1/workflows/"+id+"/cancel", w.admin, nil)
	var wf map[string]any
	c.json(t, &wf)
	if c.Status != 200 || wf["status"] != "cancelled" || wf["outcome"] != "cancelled" {
		t.Fatalf("cancel: %d %s", c.Status, c.Body)
	}
	r := <-done
	r.json(t, &wf)
	if wf["workflow_id"] != id || wf["status"] != "cancelled" {
		t.Fatalf("the invoke answered %s", r.Body)
	}
}

func TestIdempotentInvokeAttachesToTheRunningWorkflow(t *testing.T) {
	t.Parallel()
	store := &hookedStore{}
	h := newHarness(t, hookStore(store))
	w := newFraudWorld(t, h)
	release := gate(t, w)
	body := map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-7"}, "stream": true, "idempotency_key": "once"}
	first := make(chan response, 1)
	go func() { first <- h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body) }()
	waitFor(t, func() bool { return w.payments.Load() == 1 })
	waitLinked(t, h, "once")

	// The repeat arrives while the workflow waits on its first tool call.
	repeat := make(chan response, 1)
	go func() {
		repeat <- h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body, "Idempotency-Key", "once")
	}()
	waitAttached(t, store, "once")
	release()
	a, b := <-first, <-repeat
	if a.Status != 200 || b.Status != 200 || b.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("statuses %d %d (%v): %s %s", a.Status, b.Status, b.Header, a.Body, b.Body)
	}
	if a.Header.Get("Workflow-Id") == "" || a.Header.Get("Workflow-Id") != b.Header.Get("Workflow-Id") {
		t.Fatalf("workflow ids %q and %q", a.Header.Get("Workflow-Id"), b.Header.Get("Workflow-Id"))
	}
	ea, eb := streamEvents(t, a.Body), streamEvents(t, b.Body)
	if len(eb) != 4 || eb[3].Data["event"] != "complete" || eb[3].Data["outcome"] != "cleared" {
		t.Fatalf("attached stream: %s", b.Body)
	}
	if diff := cmp.Diff(ea, eb); diff != "" {
		t.Errorf("the attached stream differs (-first +repeat):\n%s", diff)
	}
	// Once finished, a repeat gets the stored response and runs nothing.
	c := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body)
	if c.Header.Get("Idempotent-Replayed") != "true" || string(c.Body) != string(a.Body) || w.payments.Load() != 1 {
		t.Fatalf("repeat: %v %s (payments %d)", c.Header, c.Body, w.payments.Load())
	}
}

// runningWorkflow waits until the tenant of tok has exactly one running
// workflow listed and returns its id. A workflow's execution begins while
// it is stored, so its first tool call can come before the list shows it.
func runningWorkflow(t *testing.T, h *harness, tok string) string {
	t.Helper()
	var list struct {
		Workflows []map[string]any `json:"workflows"`
	}
	waitFor(t, func() bool {
		h.do("GET", "/v1/workflows?status=running", tok, nil).json(t, &list)
		return len(list.Workflows) == 1
	})
	return list.Workflows[0]["workflow_id"].(string)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 5 s")
}

func TestToolCallsContinueTheInvokersTrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-9"}},
		"traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	got := <-w.traceparents
	if parts := strings.Split(got, "-"); len(parts) != 4 || parts[1] != trace || parts[2] == "00f067aa0ba902b7" {
		t.Fatalf("the tool got traceparent %q, want trace %s with the tool call's own span", got, trace)
	}
}

// TestInvokeStreamFieldDecidesOverAccept checks the answer's form: the
// body's stream field when given, else the Accept header.
func TestInvokeStreamFieldDecidesOverAccept(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-1", 10.0)
	body := func(stream any) map[string]any {
		b := map[string]any{"goal": "triage tx-1", "context": map[string]any{"transaction_id": "tx-1"}}
		if stream != nil {
			b["stream"] = stream
		}
		return b
	}
	tests := []struct {
		name   string
		stream any
		want   string
	}{
		{"accept alone", nil, "text/event-stream"},
		{"stream false", false, "application/json"},
		{"stream true", true, "text/event-stream"},
	}
	for _, tc := range tests {
		r := h.do("POST", "/v1/agents/fraud-triage/invoke", w.admin, body(tc.stream), "Accept", "text/event-stream")
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), tc.want) {
			t.Errorf("%s: %d %s, want 200 %s", tc.name, r.Status, r.Header.Get("Content-Type"), tc.want)
		}
	}
}
