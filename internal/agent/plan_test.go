package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
