package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/tool"
)

const planDef = `{
  "purpose": "You triage card transactions.",
  "tools": ["payments", "cases"],
  "steps": [
    {"action": "investigate", "plan": {"prompt": "'Open a case if the transaction looks like fraud.'", "max_calls": 5}, "save_as": "summary"}
  ],
  "outcome": "'investigated'",
  "output": "summary"
}`

// chatRequest is the part of a chat-completions request the script checks.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// scriptedLLM is an OpenAI-compatible chat-completions server that answers
// each request with the next scripted assistant message.
type scriptedLLM struct {
	mu       sync.Mutex
	replies  []string // JSON of the assistant message
	requests []chatRequest
	authOK   bool
}

func (s *scriptedLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	s.authOK = r.Header.Get("Authorization") == "Bearer test-key"
	body, _ := io.ReadAll(r.Body)
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.requests = append(s.requests, req)
	if len(s.requests) > len(s.replies) {
		http.Error(w, "script exhausted", http.StatusInternalServerError)
		return
	}
	msg := s.replies[len(s.requests)-1]
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":%s}]}`,
		len(s.requests), req.Model, msg)
}

func toolCallMsg(id, name, args string) string {
	return fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}`, id, name, args)
}

func TestPlanWithOpenAIServer(t *testing.T) {
	llm := &scriptedLLM{replies: []string{
		toolCallMsg("call_1", "payments__getTransaction", `{"id":"tx_1"}`),
		toolCallMsg("call_2", "cases__createCase", `{"transaction":"tx_1","queue":"fraud-review"}`),
		`{"role":"assistant","content":"Opened case case_9."}`,
	}}
	srv := httptest.NewServer(llm)
	defer srv.Close()

	p := mustCompile(t, parseDef(t, planDef))
	tools := fraudEnv("1500")
	env := NewEnv(tools, NewOpenAIPlanner(srv.URL+"/v1/", "test-model", "test-key", srv.Client()), nil)
	events, res, err := p.Execute(context.Background(), fraudInput("tool:*"), env)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}

	wantEvents := []Event{
		completed(1, "investigate", DefaultModel, Usage{}, ""),
		{Step: 2, Action: "investigate", Kind: KindPlan, Status: StatusOK, Tool: "payments", Operation: "getTransaction",
			Args: map[string]any{"id": "tx_1"}, Result: json.RawMessage(`{"id":"tx_1","amount":1500}`)},
		completed(3, "investigate", DefaultModel, Usage{}, ""),
		{Step: 4, Action: "investigate", Kind: KindPlan, Status: StatusOK, Tool: "cases", Operation: "createCase",
			Args: openCaseArgs(), Result: json.RawMessage(`{"case_id":"case_9"}`)},
		completed(5, "investigate", DefaultModel, Usage{}, ""),
	}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantRes := Result{Outcome: "investigated", Status: WorkflowCompleted, Output: "Opened case case_9.", Steps: 5, ToolCalls: 2, Completions: 3}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	if len(llm.requests) != 3 {
		t.Fatalf("the server saw %d requests, want 3", len(llm.requests))
	}
	if !llm.authOK {
		t.Error("the API key was not sent as a bearer token")
	}
	first := llm.requests[0]
	var fns []string
	for _, tl := range first.Tools {
		fns = append(fns, tl.Type+":"+tl.Function.Name)
	}
	wantFns := []string{"function:payments__getTransaction", "function:payments__refund", "function:cases__createCase"}
	if diff := cmp.Diff(wantFns, fns); diff != "" {
		t.Errorf("functions offered (-want +got):\n%s", diff)
	}
	if got := first.Tools[0].Function.Parameters["required"]; !cmp.Equal(got, []any{"id"}) {
		t.Errorf("parameters of getTransaction: required = %v, want [id]", got)
	}
	if first.Model != "test-model" || first.Messages[0].Role != "system" || first.Messages[1].Role != "user" {
		t.Errorf("first request: model %q, roles %q, %q", first.Model, first.Messages[0].Role, first.Messages[1].Role)
	}
	if user, _ := first.Messages[1].Content.(string); !strings.Contains(user, "triage transaction tx_1") ||
		!strings.Contains(user, `{"transaction_id":"tx_1"}`) || !strings.Contains(user, "Open a case") {
		t.Errorf("user message lacks goal, context or prompt: %q", user)
	}
	// The third request carries the whole conversation: both calls and their results.
	var roles []string
	for _, m := range llm.requests[2].Messages {
		roles = append(roles, m.Role+":"+m.ToolCallID)
	}
	wantRoles := []string{"system:", "user:", "assistant:", "tool:call_1", "assistant:", "tool:call_2"}
	if diff := cmp.Diff(wantRoles, roles); diff != "" {
		t.Errorf("conversation (-want +got):\n%s", diff)
	}
	if got := llm.requests[2].Messages[3].Content; got != `{"id":"tx_1","amount":1500}` {
		t.Errorf("tool message content = %v, want the call's result", got)
	}
}

func TestOpenAIPlannerErrorHidesDetails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`)
	}))
	defer srv.Close()
	pl := NewOpenAIPlanner(srv.URL, "m", "secret-key-123", srv.Client())
	_, err := pl.Complete(context.Background(), 1, 1, ChatRequest{Messages: []ChatMessage{{Role: RoleUser, Content: "hi"}}})
	if err == nil || !strings.Contains(err.Error(), "answered 400") {
		t.Fatalf("err = %v, want the status", err)
	}
	if strings.Contains(err.Error(), "secret-key-123") {
		t.Error("the error reveals the API key")
	}
}

// scriptCompleter answers every completion with the same call.
type scriptCompleter struct{ n int }

func (s *scriptCompleter) Complete(_ context.Context, _, n int, _ ChatRequest) (ChatResponse, error) {
	s.n = n
	return ChatResponse{Message: ChatMessage{Role: RoleAssistant, ToolCalls: []ChatToolCall{
		{ID: fmt.Sprintf("c%d", n), Name: "payments__getTransaction", Arguments: `{"id":"tx_1"}`},
	}}}, nil
}

func TestPlanLimits(t *testing.T) {
	tests := []struct {
		name      string
		maxCalls  int // the plan's
		invokeMax int // the invocation's
		scopes    []string
		want      []string
		outcome   string
	}{
		{name: "max_calls stops the plan", maxCalls: 2, scopes: []string{"tool:*"},
			want: []string{"investigate:completion:ok", "investigate:plan:ok", "investigate:completion:ok", "investigate:plan:ok"}, outcome: "investigated"},
		{name: "max_tool_calls applies to plan calls", maxCalls: 5, invokeMax: 1, scopes: []string{"tool:*"},
			want: []string{"investigate:completion:ok", "investigate:plan:ok", "investigate:completion:ok", ActionLimitReached + ":plan:limit_exceeded"}, outcome: OutcomeLimitExceeded},
		{name: "a denied plan call ends the run", maxCalls: 5, scopes: []string{"tool:cases"},
			want: []string{"investigate:completion:ok", "investigate:plan:denied"}, outcome: OutcomeDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := parseDef(t, planDef)
			def.Steps[0].Plan.MaxCalls = tc.maxCalls
			def.Output = ""
			p := mustCompile(t, def)
			in := fraudInput(tc.scopes...)
			in.MaxToolCalls = tc.invokeMax
			events, res, err := p.Execute(context.Background(), in, NewEnv(fraudEnv("1500"), &scriptCompleter{}, nil))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range events {
				got = append(got, ev.Action+":"+ev.Kind+":"+ev.Status)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if res.Outcome != tc.outcome {
				t.Errorf("outcome = %q, want %q", res.Outcome, tc.outcome)
			}
		})
	}
}

func TestPlanWithoutPlanner(t *testing.T) {
	p := mustCompile(t, parseDef(t, planDef))
	_, res, err := p.Execute(context.Background(), fraudInput("tool:*"), NewEnv(fraudEnv("1"), nil, nil))
	if !errors.Is(err, ErrNoPlanner) {
		t.Fatalf("err = %v, want ErrNoPlanner", err)
	}
	if res.Outcome != OutcomeFailed {
		t.Errorf("outcome = %q, want failed", res.Outcome)
	}
}

// timingOutPlanner fails every completion with a time-out of its own.
type timingOutPlanner struct{}

func (timingOutPlanner) Complete(context.Context, int, int, ChatRequest) (ChatResponse, error) {
	return ChatResponse{}, fmt.Errorf("post completion: %w", context.DeadlineExceeded)
}

// TestPlannerTimeOutFailsTheRun checks that a planner's own time-out, with
// the run's context still live, fails the run rather than timing it out.
func TestPlannerTimeOutFailsTheRun(t *testing.T) {
	p := mustCompile(t, parseDef(t, planDef))
	_, res, err := p.Execute(context.Background(), fraudInput("tool:*"), NewEnv(fraudEnv("1"), timingOutPlanner{}, nil))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the planner's time-out", err)
	}
	if res.Outcome != OutcomeFailed || res.Status != WorkflowFailed {
		t.Errorf("result = %+v, want failed", res)
	}
}

// offerRecorder records the functions each completion is offered and
// answers without a call.
type offerRecorder struct{ offered [][]string }

func (o *offerRecorder) Complete(_ context.Context, _, _ int, req ChatRequest) (ChatResponse, error) {
	var names []string
	for _, f := range req.Tools {
		names = append(names, f.Name)
	}
	o.offered = append(o.offered, names)
	return ChatResponse{Message: ChatMessage{Role: RoleAssistant, Content: "done"}}, nil
}

// TestPlanOffersTheBestOperations: a plan over more operations than it
// offers gives each completion the best matches of the goal, the same ones
// on every run.
func TestPlanOffersTheBestOperations(t *testing.T) {
	cat := NewCatalog()
	var ops []tool.Operation
	for i := range 300 {
		ops = append(ops, tool.Operation{ID: fmt.Sprintf("listWidgets%03d", i), Kind: tool.Read, Summary: "List widgets of a kind"})
	}
	ops = append(ops, tool.Operation{ID: "refundTransaction", Kind: tool.Write, Summary: "Refund a card transaction"})
	cat.Add(&tool.Tool{Name: "shop"}, ops)
	cat.AddModel(DefaultModel)
	def := parseDef(t, `{"tools": ["shop"], "steps": [{"action": "act", "plan": {"prompt": "'Refund the transaction.'", "max_functions": 5}}], "outcome": "'done'"}`)
	p, errs := Compile(def, cat)
	if errs != nil {
		t.Fatal(errs)
	}
	var runs [][]string
	for range 3 {
		rec := &offerRecorder{}
		in := fraudInput("tool:*")
		in.Goal = "refund the customer's transaction tx_9"
		if _, _, err := p.Execute(context.Background(), in, NewEnv(fraudEnv("10"), rec, nil)); err != nil {
			t.Fatal(err)
		}
		if len(rec.offered) != 1 {
			t.Fatalf("%d completions, want 1", len(rec.offered))
		}
		runs = append(runs, rec.offered[0])
	}
	got := runs[0]
	if len(got) != 5 || got[0] != "shop__refundTransaction" && !slices.Contains(got, "shop__refundTransaction") {
		t.Errorf("offered %v: want 5 functions including shop__refundTransaction", got)
	}
	for _, r := range runs[1:] {
		if !slices.Equal(r, got) {
			t.Errorf("offered %v on another run, %v on the first: the choice must not vary", r, got)
		}
	}

	def.Steps[0].Plan.MaxFunctions = 500
	if _, errs := Compile(def, cat); errs == nil || !strings.Contains(fmt.Sprint(errs), "must be between 1 and 128") {
		t.Errorf("max_functions 500: %v", errs)
	}
}
