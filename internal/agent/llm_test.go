package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

// llmDef is the smallest LLM agent, with the plan's parameters set.
const llmDef = `{
  "model": "gpt-4o-mini",
  "instructions": "'You help ' + context.customer + '. Be brief.'",
  "tools": ["payments", "cases"],
  "steps": [
    {"action": "solve", "plan": {"prompt": "goal", "save_as": "answer", "temperature": 0.2, "max_output_tokens": 500}}
  ],
  "output": "answer",
  "outcome": "'answered'"
}`

// answerSchema is an output_schema: {"verdict": "fraud"|"ok", "amount": number}.
const answerSchema = `{"type":"object","required":["verdict"],"properties":{"verdict":{"enum":["fraud","ok"]},"amount":{"type":"number"}}}`

// reply is one scripted answer of a completer: a response or an error.
type reply struct {
	resp ChatResponse
	err  error
}

// scripted is a Completer answering completions in order from its script;
// it keeps every request and the step and number it was given.
type scripted struct {
	script []reply
	reqs   []ChatRequest
	steps  []int
	ns     []int
}

func (s *scripted) Complete(_ context.Context, step, n int, req ChatRequest) (ChatResponse, error) {
	s.reqs, s.steps, s.ns = append(s.reqs, req), append(s.steps, step), append(s.ns, n)
	if len(s.reqs) > len(s.script) {
		return ChatResponse{}, fmt.Errorf("script exhausted at completion %d", n)
	}
	r := s.script[len(s.reqs)-1]
	return r.resp, r.err
}

// says is a final text answer that used in and out tokens.
func says(text string, in, out int64) reply {
	return reply{resp: ChatResponse{Message: ChatMessage{Role: RoleAssistant, Content: text},
		Usage: &Usage{InputTokens: in, OutputTokens: out}, FinishReason: "stop"}}
}

// asks is an answer calling one function with the arguments' JSON text.
func asks(name, args string, in, out int64) reply {
	return reply{resp: ChatResponse{Message: ChatMessage{Role: RoleAssistant, ToolCalls: []ChatToolCall{{ID: "call_" + name, Name: name, Arguments: args}}},
		Usage: &Usage{InputTokens: in, OutputTokens: out}, FinishReason: "tool_calls"}}
}

// completed is the event of a completion answered with status ok.
func completed(step int, action, model string, u Usage, finish string) Event {
	return Event{Step: step, Action: action, Kind: KindCompletion, Status: StatusOK, Model: model, Usage: &u, FinishReason: finish}
}

func llmInput() Input {
	in := fraudInput("tool:*")
	in.Goal = "Is transaction tx_1 fraud?"
	in.Context = map[string]any{"transaction_id": "tx_1", "customer": "the payments team"}
	return in
}

func TestPlanToolCallThenAnswer(t *testing.T) {
	p := mustCompile(t, parseDef(t, llmDef))
	llm := &scripted{script: []reply{
		asks("payments__getTransaction", `{"id":"tx_1"}`, 100, 20),
		says("It looks fine.", 150, 10),
	}}
	tools := fraudEnv("15")
	events, res, err := p.Execute(context.Background(), llmInput(), NewEnv(tools, llm, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		completed(1, "solve", "gpt-4o-mini", Usage{InputTokens: 100, OutputTokens: 20}, "tool_calls"),
		{Step: 2, Action: "solve", Kind: KindPlan, Status: StatusOK, Tool: "payments", Operation: "getTransaction",
			Args: map[string]any{"id": "tx_1"}, Result: json.RawMessage(`{"id":"tx_1","amount":15}`)},
		completed(3, "solve", "gpt-4o-mini", Usage{InputTokens: 150, OutputTokens: 10}, "stop"),
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantRes := Result{Outcome: "answered", Status: WorkflowCompleted, Output: "It looks fine.", Steps: 3, ToolCalls: 1,
		Usage: Usage{InputTokens: 250, OutputTokens: 30}, Completions: 2}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 3}, llm.steps); diff != "" {
		t.Errorf("steps given to Complete (-want +got):\n%s", diff)
	}
	first := llm.reqs[0]
	if first.Model != "gpt-4o-mini" || first.Temperature == nil || *first.Temperature != 0.2 || first.MaxOutputTokens != 500 {
		t.Errorf("request: model %q, temperature %v, max_output_tokens %d", first.Model, first.Temperature, first.MaxOutputTokens)
	}
	if got := first.Messages[0].Content; got != "You help the payments team. Be brief." {
		t.Errorf("system message = %q, want the instructions evaluated with the context", got)
	}
	if got := llm.reqs[1].Messages[3]; got.Role != RoleTool || got.ToolCallID != "call_payments__getTransaction" {
		t.Errorf("the second request's tool message = %+v", got)
	}
	if diff := cmp.Diff([]string{"call_payments__getTransaction"}, tools.callIDs); diff != "" {
		t.Errorf("call ids given to the Env (-want +got):\n%s", diff)
	}
}

// TestPlanPolicyReadsAModelsNumbers: a policy rule sees the numbers of a
// model's call as it sees every number read from JSON: a double, whether
// written 12 or 12.50, so double arithmetic holds for both; an integer
// past 2^53 is an int, every digit kept.
func TestPlanPolicyReadsAModelsNumbers(t *testing.T) {
	for _, tc := range []struct {
		args, want string
	}{
		{`{"amount": 12}`, StatusOK},
		{`{"amount": 12.50}`, StatusOK},
		{`{"amount": 5000}`, StatusDenied},
		{`{"amount": 1234567890123456789}`, StatusOK},
	} {
		t.Run(tc.args, func(t *testing.T) {
			def := parseDef(t, llmDef)
			def.Policies = map[string]Policy{"financial": {Allow: "type(args.amount) == int ? args.amount == 1234567890123456789 : args.amount * 1.0 <= 1000.0"}}
			p := mustCompile(t, def)
			llm := &scripted{script: []reply{asks("payments__refund", tc.args, 10, 5), says("done", 10, 5)}}
			events, _, err := p.Execute(context.Background(), llmInput(), NewEnv(fraudEnv("15"), llm, nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(events) < 2 || events[1].Status != tc.want {
				t.Fatalf("events %+v, want the call %s", events, tc.want)
			}
			if tc.want == StatusDenied && !strings.Contains(events[1].Error, "policy financial denied the call") {
				t.Errorf("the call was refused with %q, want the rule to deny it", events[1].Error)
			}
		})
	}
}

// TestPlanUserMessage: the first user message holds the goal, the context
// when there is one, and the prompt when it says more than the goal.
func TestPlanUserMessage(t *testing.T) {
	const def = `{"model": "gpt-4o-mini", "tools": ["payments"], "steps": [{"action": "solve", "plan": {"prompt": %q}}]}`
	for _, tc := range []struct {
		prompt string
		ctx    map[string]any
		want   string
	}{
		{"goal", nil, "Goal: Is tx_1 fraud?"},
		{"goal", map[string]any{"id": "tx_1"}, "Goal: Is tx_1 fraud?\n\nContext: {\"id\":\"tx_1\"}"},
		{"'Be brief.'", nil, "Goal: Is tx_1 fraud?\n\nBe brief."},
	} {
		p := mustCompile(t, parseDef(t, fmt.Sprintf(def, tc.prompt)))
		llm := &scripted{script: []reply{says("no", 1, 1)}}
		in := Input{Goal: "Is tx_1 fraud?", Context: tc.ctx, Caller: Caller{Scopes: []string{"tool:*"}}}
		if _, _, err := p.Execute(context.Background(), in, NewEnv(fraudEnv("1"), llm, nil)); err != nil {
			t.Fatal(err)
		}
		if got := llm.reqs[0].Messages[1].Content; got != tc.want {
			t.Errorf("prompt %s, context %v: user message %q, want %q", tc.prompt, tc.ctx, got, tc.want)
		}
	}
}

// TestPlanMakesTheGoodCallsOfAnAnswer: an answer with a valid and an
// invalid call makes the valid one and tells the model about the other.
func TestPlanMakesTheGoodCallsOfAnAnswer(t *testing.T) {
	p := mustCompile(t, parseDef(t, llmDef))
	both := reply{resp: ChatResponse{Message: ChatMessage{ToolCalls: []ChatToolCall{
		{ID: "c1", Name: "payments__getTransaction", Arguments: `{"id":"tx_1"}`},
		{ID: "c2", Name: "payments__getTransaction", Arguments: `{"id":true}`},
	}}, FinishReason: "tool_calls"}}
	llm := &scripted{script: []reply{both, says("done", 1, 1)}}
	events, res, err := p.Execute(context.Background(), llmInput(), NewEnv(fraudEnv("15"), llm, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{completionOK, callOK, completionOK}, kindsOf(events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	msgs := llm.reqs[1].Messages
	if len(msgs) != 5 || msgs[3].ToolCallID != "c1" || msgs[4].ToolCallID != "c2" || !strings.Contains(msgs[4].Content, "do not match its parameters") {
		t.Errorf("conversation after the answer: %+v", msgs[2:])
	}
	if res.Outcome != "answered" || res.Output != "done" {
		t.Errorf("result = %+v", res)
	}
}

// kindsOf lists events as "action:kind:status[:error_code]".
func kindsOf(events []Event) []string {
	var out []string
	for _, ev := range events {
		s := ev.Action + ":" + ev.Kind + ":" + ev.Status
		if ev.ErrorCode != "" {
			s += ":" + ev.ErrorCode
		}
		out = append(out, s)
	}
	return out
}

const (
	completionOK  = "solve:completion:ok"
	completionBad = "solve:completion:error:llm_error"
	callOK        = "solve:plan:ok"
)

func TestPlanAnswers(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		script []reply
		want   []string
		// outcome, output and errCode of the result; errHas is in its error.
		outcome, errCode, errHas string
		output                   any
		// toolReply is in the first tool message the model was sent.
		toolReply string
	}{
		{name: "output_schema valid at once", schema: answerSchema,
			script: []reply{says(`{"verdict":"ok","amount":15}`, 10, 5)},
			want:   []string{completionOK}, outcome: "answered", output: map[string]any{"verdict": "ok", "amount": 15.0}},
		{name: "output_schema with an integer past 2^53", schema: answerSchema,
			script: []reply{says(`{"verdict":"ok","amount":1234567890123456789}`, 10, 5)},
			want:   []string{completionOK}, outcome: "answered", output: map[string]any{"verdict": "ok", "amount": int64(1234567890123456789)}},
		{name: "output_schema in a code fence", schema: answerSchema,
			script: []reply{says("```json\n{\"verdict\":\"fraud\"}\n```", 10, 5)},
			want:   []string{completionOK}, outcome: "answered", output: map[string]any{"verdict": "fraud"}},
		{name: "a repair turn, then valid", schema: answerSchema,
			script: []reply{says("It is fraud.", 10, 5), says(`{"verdict":"fraud"}`, 20, 5)},
			want:   []string{completionOK, completionOK}, outcome: "answered", output: map[string]any{"verdict": "fraud"}},
		{name: "still invalid after the repair turn", schema: answerSchema,
			script: []reply{says(`{"verdict":"maybe"}`, 10, 5), says(`{"verdict":"perhaps"}`, 20, 5)},
			want:   []string{completionOK, completionBad}, outcome: OutcomeFailed, errCode: ErrorCodeLLM,
			errHas: "still not valid after a repair turn: the answer does not match output_schema: /verdict"},
		{name: "an unknown function, then a good call",
			script: []reply{asks("payments__delete", `{}`, 10, 5), asks("payments__getTransaction", `{"id":"tx_1"}`, 10, 5), says("fine", 10, 5)},
			want:   []string{completionOK, completionOK, callOK, completionOK}, outcome: "answered", output: "fine",
			toolReply: `{"error":"no function named \"payments__delete\" was offered`},
		{name: "arguments not JSON twice",
			script: []reply{asks("payments__getTransaction", `{"id":`, 10, 5), asks("payments__getTransaction", `[1]`, 10, 5)},
			want:   []string{completionOK, completionBad}, outcome: OutcomeFailed, errCode: ErrorCodeLLM,
			errHas: "a second invalid answer in a row: the arguments of payments__getTransaction are not a JSON object", toolReply: "not a JSON object"},
		{name: "arguments failing the operation's schema",
			script: []reply{asks("payments__getTransaction", `{"id":5}`, 10, 5), asks("payments__getTransaction", `{"id":"tx_1"}`, 10, 5), says("fine", 10, 5)},
			want:   []string{completionOK, completionOK, callOK, completionOK}, outcome: "answered", output: "fine",
			toolReply: "the arguments of payments__getTransaction do not match its parameters: /id: "},
		{name: "an empty answer",
			script: []reply{says("  ", 10, 0)},
			want:   []string{completionBad}, outcome: OutcomeFailed, errCode: ErrorCodeLLM, errHas: "neither text nor a function call"},
		{name: "truncated",
			script: []reply{{resp: ChatResponse{Message: ChatMessage{Content: `{"verd`}, FinishReason: FinishLength}}},
			schema: answerSchema,
			want:   []string{completionBad}, outcome: OutcomeFailed, errCode: ErrorCodeLLM, errHas: "cut off at the output token limit"},
		{name: "the model fails",
			script: []reply{{err: &LLMError{Status: 400, Message: "This model's maximum context length is 128000 tokens."}}},
			want:   []string{completionBad}, outcome: OutcomeFailed, errCode: ErrorCodeLLM,
			errHas: "the model answered 400: This model's maximum context length is 128000 tokens."},
		{name: "the model's daily budget is spent",
			script: []reply{{err: &BudgetError{Reason: `model "gpt-4o-mini" has used its daily budget of 1000 tokens for this tenant`}}},
			want:   []string{ActionTokenLimitReached + ":plan:limit_exceeded"}, outcome: OutcomeLimitExceeded,
			errHas: "daily budget of 1000 tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := parseDef(t, llmDef)
			def.Steps[0].Plan.OutputSchema = json.RawMessage(tc.schema)
			p := mustCompile(t, def)
			llm := &scripted{script: tc.script}
			events, res, err := p.Execute(context.Background(), llmInput(), NewEnv(fraudEnv("15"), llm, nil))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, kindsOf(events)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if res.Outcome != tc.outcome || res.ErrorCode != tc.errCode || !strings.Contains(res.Error, tc.errHas) {
				t.Errorf("result: outcome %q, error_code %q, error %q; want %q, %q, containing %q", res.Outcome, res.ErrorCode, res.Error, tc.outcome, tc.errCode, tc.errHas)
			}
			if diff := cmp.Diff(tc.output, res.Output); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if last := events[len(events)-1]; last.Status == StatusError && last.Error == "" {
				t.Error("the failed completion's event says nothing of why")
			}
			if tc.toolReply != "" {
				if got := toolMessage(llm.reqs[1]); !strings.Contains(got, tc.toolReply) {
					t.Errorf("the model was told %q, want it to contain %q", got, tc.toolReply)
				}
			}
		})
	}
}

// toolMessage is the content of a request's first tool message.
func toolMessage(req ChatRequest) string {
	for _, m := range req.Messages {
		if m.Role == RoleTool {
			return m.Content
		}
	}
	return ""
}

func TestPlanRepairTurnAndSchemaInstructions(t *testing.T) {
	def := parseDef(t, llmDef)
	def.Steps[0].Plan.OutputSchema = json.RawMessage(answerSchema)
	p := mustCompile(t, def)
	llm := &scripted{script: []reply{says("fraud, clearly", 10, 5), says(`{"verdict":"fraud"}`, 20, 5)}}
	if _, _, err := p.Execute(context.Background(), llmInput(), NewEnv(fraudEnv("15"), llm, nil)); err != nil {
		t.Fatal(err)
	}
	first := llm.reqs[0]
	if string(first.OutputSchema) != answerSchema {
		t.Errorf("request output_schema = %s", first.OutputSchema)
	}
	if sys := first.Messages[0].Content; !strings.HasPrefix(sys, "You help the payments team.") || !strings.Contains(sys, answerSchema) {
		t.Errorf("system message %q lacks the instructions or the schema", sys)
	}
	msgs := llm.reqs[1].Messages
	last := msgs[len(msgs)-1]
	if last.Role != RoleUser || !strings.Contains(last.Content, "not a JSON object") || !strings.Contains(last.Content, "only the JSON object") {
		t.Errorf("repair message = %+v", last)
	}
	if prev := msgs[len(msgs)-2]; prev.Role != RoleAssistant || prev.Content != "fraud, clearly" {
		t.Errorf("the invalid answer is not in the conversation: %+v", prev)
	}
}

func TestMaxLLMTokens(t *testing.T) {
	tests := []struct {
		name      string
		defLimit  int64
		invokeMax int64
	}{
		{name: "the invocation's bound", invokeMax: 150},
		{name: "the definition's default", defLimit: 150},
		{name: "the invocation's bound over the definition's", defLimit: 100_000, invokeMax: 150},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := parseDef(t, llmDef)
			if tc.defLimit > 0 {
				def.Limits = &Limits{MaxLLMTokens: tc.defLimit}
			}
			p := mustCompile(t, def)
			if p.MaxLLMTokens() != tc.defLimit {
				t.Errorf("MaxLLMTokens() = %d, want %d", p.MaxLLMTokens(), tc.defLimit)
			}
			// The first completion uses 160 tokens: the second is not requested.
			llm := &scripted{script: []reply{asks("payments__getTransaction", `{"id":"tx_1"}`, 120, 40), says("done", 10, 5)}}
			in := llmInput()
			in.MaxLLMTokens = tc.invokeMax
			events, res, err := p.Execute(context.Background(), in, NewEnv(fraudEnv("15"), llm, nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(llm.reqs) != 1 {
				t.Errorf("the completer was asked %d times, want once", len(llm.reqs))
			}
			want := []string{completionOK, callOK, ActionTokenLimitReached + ":plan:limit_exceeded"}
			if diff := cmp.Diff(want, kindsOf(events)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if res.Outcome != OutcomeLimitExceeded || res.Usage.Total() != 160 || res.Completions != 1 ||
				!strings.Contains(res.Error, "max_llm_tokens (150) reached") {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestPlanUnrecordedCompletion(t *testing.T) {
	p := mustCompile(t, parseDef(t, llmDef))
	llm := &scripted{script: []reply{{err: ErrUnrecorded}}}
	events, res, err := p.Execute(context.Background(), llmInput(), NewEnv(fraudEnv("15"), llm, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"solve:completion:unrecorded"}, kindsOf(events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if res.Outcome != "answered" || res.Output != nil {
		t.Errorf("result = %+v, want the run to go on with answer null", res)
	}
}

func TestCompileLLMFields(t *testing.T) {
	noDefault := func() *Catalog {
		c := testCatalog()
		delete(c.models, DefaultModel)
		return c
	}
	tests := []struct {
		name    string
		def     string
		catalog func() *Catalog
		want    []problem.FieldError
	}{
		{name: "unknown agent model",
			def:  `{"model": "gpt-9", "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`,
			want: []problem.FieldError{{Field: "model", Message: `no model named "gpt-9": register it with POST /v1/models`}}},
		{name: "unknown step model",
			def:  `{"tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal", "model": "claude-x"}}]}`,
			want: []problem.FieldError{{Field: "steps[0].plan.model", Message: `step 1 (a): no model named "claude-x": register it with POST /v1/models`}}},
		{name: "no default model", catalog: noDefault,
			def:  `{"tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`,
			want: []problem.FieldError{{Field: "steps[0].plan.model", Message: `step 1 (a): the step uses the model "default" and the server defines none: set model on the agent or the step, or start the server with --llm-base-url`}}},
		{name: "no default model, but the agent names one", catalog: noDefault,
			def: `{"model": "gpt-4o-mini", "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`},
		{name: "output_schema not a schema",
			def:  `{"tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal", "output_schema": {"type": "thing"}}}]}`,
			want: []problem.FieldError{{Field: "steps[0].plan.output_schema"}}},
		{name: "output_schema not of an object",
			def:  `{"tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal", "output_schema": {"type": "string"}}}]}`,
			want: []problem.FieldError{{Field: "steps[0].plan.output_schema", Message: `step 1 (a): must describe an object: give it "type": "object"`}}},
		{name: "temperature, max_output_tokens, limits",
			def: `{"limits": {"max_llm_tokens": 100000001}, "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal", "temperature": 2.5, "max_output_tokens": 1000001}}]}`,
			want: []problem.FieldError{
				{Field: "limits.max_llm_tokens", Message: "must be between 1 and 100000000 (10^8), or left out for no bound"},
				{Field: "steps[0].plan.temperature", Message: "step 1 (a): must be between 0 and 2"},
				{Field: "steps[0].plan.max_output_tokens", Message: "step 1 (a): must be between 1 and 1000000"},
			}},
		{name: "negative bounds",
			def: `{"limits": {"max_llm_tokens": -1}, "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal", "temperature": -0.1, "max_output_tokens": -1}}]}`,
			want: []problem.FieldError{
				{Field: "limits.max_llm_tokens", Message: "must be between 1 and 100000000 (10^8), or left out for no bound"},
				{Field: "steps[0].plan.temperature", Message: "step 1 (a): must be between 0 and 2"},
				{Field: "steps[0].plan.max_output_tokens", Message: "step 1 (a): must be between 1 and 1000000"},
			}},
		{name: "two save_as",
			def:  `{"tools": ["payments"], "steps": [{"action": "a", "save_as": "x", "plan": {"prompt": "goal", "save_as": "y"}}]}`,
			want: []problem.FieldError{{Field: "steps[0].plan.save_as", Message: `step 1 (a): the step saves as "x" and its plan as "y": keep one of them`}}},
		{name: "the same save_as twice",
			def: `{"tools": ["payments"], "steps": [{"action": "a", "save_as": "x", "plan": {"prompt": "goal", "save_as": "x"}}], "output": "x"}`},
		{name: "bad instructions",
			def:  `{"instructions": "goal +", "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`,
			want: []problem.FieldError{{Field: "instructions"}}},
		{name: "instructions not a string",
			def:  `{"instructions": "1 + 2", "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`,
			want: []problem.FieldError{{Field: "instructions"}}},
		{name: "reserved action",
			def:  `{"tools": ["payments"], "steps": [{"action": "token_limit_reached", "plan": {"prompt": "goal"}}]}`,
			want: []problem.FieldError{{Field: "steps[0].action", Message: `step 1 (token_limit_reached): "token_limit_reached" is reserved`}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cat := testCatalog()
			if tc.catalog != nil {
				cat = tc.catalog()
			}
			_, errs := Compile(parseDef(t, tc.def), cat)
			// A want without a message checks only the field.
			for i := range errs {
				if i < len(tc.want) && tc.want[i].Message == "" {
					errs[i].Message = ""
				}
			}
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewVersionListsModels(t *testing.T) {
	var asked []string
	cats := catalogsFunc(func(_ context.Context, _ string, _, models []string) (*Catalog, error) {
		asked = models
		return testCatalog(), nil
	})
	v, err := NewVersion(context.Background(), cats, "acme", Deployment{Name: "helper", Definition: json.RawMessage(
		`{"model": "gpt-4o-mini", "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}, {"action": "b", "plan": {"prompt": "goal", "model": "default"}}]}`)}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpt-4o-mini", "default"}
	if !cmp.Equal(want, v.Models) || !cmp.Equal(want, asked) {
		t.Errorf("version models %v, catalog asked for %v; want %v", v.Models, asked, want)
	}
	_, err = NewVersion(context.Background(), cats, "acme", Deployment{Name: "helper", Definition: json.RawMessage(
		`{"model": "gpt-9", "tools": ["payments"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`)}, time.Time{})
	var pe *problem.Error
	if !errors.As(err, &pe) || len(pe.Errors) != 1 || pe.Errors[0].Field != "definition.model" {
		t.Errorf("err = %v, want 422 on definition.model", err)
	}
}
