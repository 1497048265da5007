package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/workflow"
)

// scripted is a model that first asks for a ledger read, then answers,
// reporting usage of each completion; it counts the requests it gets.
type scripted struct {
	mu       sync.Mutex
	requests []agent.ChatRequest
}

func (s *scripted) Client(*model.Model) (llm.Client, error) { return s, nil }

func (s *scripted) Complete(_ context.Context, req agent.ChatRequest) (agent.ChatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	resp := agent.ChatResponse{ID: fmt.Sprintf("chatcmpl-%d", len(s.requests)), Model: "gpt-test-2026",
		Usage: &agent.Usage{InputTokens: 100, OutputTokens: 20}}
	if len(req.Messages) == 2 {
		resp.FinishReason = "tool_calls"
		resp.Message = agent.ChatMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ChatToolCall{
			{ID: "call_model_1", Name: "ledger__getTransaction", Arguments: `{"note": "n"}`}}}
		return resp, nil
	}
	resp.FinishReason = "stop"
	resp.Message = agent.ChatMessage{Role: agent.RoleAssistant, Content: "settled"}
	return resp, nil
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

const plannedAgent = `{"tools": ["ledger"], "steps": [
	{"action": "think", "plan": {"prompt": "'settle'"}},
	{"action": "post", "call": "ledger.postEntry"}], "outcome": "'settled'"}`

// run starts an invocation of agentName and waits for its end.
func run(t *testing.T, r *workflow.Runner, agentName string) *workflow.Workflow {
	t.Helper()
	wf, err := r.Start(context.Background(), request(agentName))
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.Wait(context.Background(), "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

func llmRunner(db *sqlite.DB, ms modelTable, m *scripted) *workflow.Runner {
	return workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: &ledger{},
		Models: ms, LLM: m, Owner: "replica-a"})
}

// TestCompletionsAreRecordedWithUsage checks that each completion is
// recorded with its request, response, tokens and cost at the model's
// price, and counted in the tenant's usage of the day.
func TestCompletionsAreRecordedWithUsage(t *testing.T) {
	t.Parallel()
	db := setup(t)
	deploy(t, db, "planned", plannedAgent)
	m := &scripted{}
	ms := modelTable{model.DefaultName: {Model: "gpt-test", Price: &model.Price{InputPerMTok: 2, OutputPerMTok: 10}}}
	wf := run(t, llmRunner(db, ms, m), "planned")
	if wf.Status != workflow.Completed {
		t.Fatalf("workflow %s/%s: %s", wf.Status, wf.Outcome, wf.Error)
	}
	comps, err := db.WorkflowCompletions(context.Background(), wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(comps) != 2 || m.count() != 2 {
		t.Fatalf("%d completions recorded, %d requested; want 2", len(comps), m.count())
	}
	for i, c := range comps {
		want := workflow.Completion{WorkflowID: wf.ID, N: i + 1, Step: c.Step, Tenant: "acme", Agent: "planned",
			AgentVersion: wf.AgentVersion, Model: "default", ProviderModel: "gpt-test-2026", InputTokens: 100, OutputTokens: 20,
			Cost: (100*2 + 20*10) / 1e6, Currency: "USD", FinishReason: []string{"tool_calls", "stop"}[i], CreatedAt: c.CreatedAt, Data: c.Data}
		if diff := cmp.Diff(want, c); diff != "" {
			t.Errorf("completion %d (-want +got):\n%s", i+1, diff)
		}
		rc, err := agent.DecodeCompletion(c.Data)
		if err != nil || rc.Request == nil || len(rc.Request.Messages) < 2 || rc.Response.ID == "" {
			t.Fatalf("completion %d data = %s (%v): want the whole request and response", i+1, c.Data, err)
		}
		// The record is the request as sent, under its hash, with the
		// response, step and cost, in this order of members.
		req := m.requests[i]
		hash, err := req.Hash()
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(struct {
			agent.RecordedCompletion
			Step int            `json:"step"`
			Cost *workflow.Cost `json:"cost,omitempty"`
		}{agent.RecordedCompletion{RequestSHA256: hash, Request: &req, Response: rc.Response}, c.Step, &workflow.Cost{Amount: c.Cost, Currency: "USD"}})
		if err != nil {
			t.Fatal(err)
		}
		if string(c.Data) != string(data) {
			t.Errorf("completion %d data =\n%s\nwant\n%s", i+1, c.Data, data)
		}
	}
	// The end handed to the waiter carries the sums its execution counted,
	// so an invocation's answer reads none back.
	if wf.Usage == nil {
		t.Error("the workflow's end carries no usage")
	} else if diff := cmp.Diff(workflow.TotalCompletions(comps), *wf.Usage); diff != "" {
		t.Errorf("the usage the workflow's end carries, against the stored completions' (-stored +carried):\n%s", diff)
	}
	if comps[0].Step < 1 || comps[1].Step <= comps[0].Step {
		t.Errorf("steps of the completions = %d, %d: want increasing step numbers", comps[0].Step, comps[1].Step)
	}
	n, err := db.TokensToday(context.Background(), "acme", "default", time.Now())
	if err != nil || n != 240 {
		t.Errorf("TokensToday = %d, %v; want 240", n, err)
	}
}

// TestDailyBudgetStopsBeforeTheRequest checks that once the tenant's tokens
// through a model today reach its daily budget, the next completion is not
// requested, and a tenant's lookup failure names the model.
func TestDailyBudgetStopsBeforeTheRequest(t *testing.T) {
	t.Parallel()
	db := setup(t)
	deploy(t, db, "planned", plannedAgent)
	m := &scripted{}
	ms := modelTable{model.DefaultName: {Model: "gpt-test", DailyTokenBudget: 200}}
	r := llmRunner(db, ms, m)
	if wf := run(t, r, "planned"); wf.Status != workflow.Completed {
		t.Fatalf("first workflow %s/%s: %s; the budget was not reached before it", wf.Status, wf.Outcome, wf.Error)
	}
	// 240 tokens used: the budget of 200 is spent.
	wf := run(t, r, "planned")
	if m.count() != 2 {
		t.Errorf("the model got %d requests, want 2: none past the budget", m.count())
	}
	if wf.Outcome != workflow.OutcomeLimitExceeded {
		t.Errorf("workflow %s/%s, error %s: want it stopped by the daily budget", wf.Status, wf.Outcome, wf.Error)
	}
}

// TestAnUnregisteredModelFailsTheRun checks the error of a completion whose
// model is gone by the time it is requested (the version compiled while it
// was there): for the server-wide model, the registry's own words.
func TestAnUnregisteredModelFailsTheRun(t *testing.T) {
	t.Parallel()
	db := setup(t)
	deploy(t, db, "planned", plannedAgent)
	m := &scripted{}
	var lookups atomic.Int32
	vanishing := model.LookupFunc(func(ctx context.Context, tenant, name string) (*model.Model, error) {
		if lookups.Add(1) == 1 { // compiling the version at invoke
			return modelTable{model.DefaultName: {Model: "gpt-test"}}.Model(ctx, tenant, name)
		}
		return noModels{}.Model(ctx, tenant, name)
	})
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: &ledger{},
		Models: vanishing, LLM: m, Owner: "replica-a"})
	wf := run(t, r, "planned")
	if wf.Status != workflow.Failed || !strings.Contains(failureDetail(t, wf), `model "default": no model named`) || m.count() != 0 {
		t.Errorf("workflow %s, detail %q, %d requests; want failed naming the model, none sent", wf.Status, failureDetail(t, wf), m.count())
	}
}

type noModels struct{}

func (noModels) Model(ctx context.Context, tenant, name string) (*model.Model, error) {
	return modelTable{"x": {}}.Model(ctx, tenant, "none:"+name)
}

// TestGenAISpans checks the run's span and its tool calls' spans follow the
// OpenTelemetry GenAI conventions: a plan call carries the model's call id,
// a call step its workflow-and-step id.
func TestGenAISpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prevMP := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prevMP); mp.Shutdown(context.Background()) })
	db := setup(t)
	deploy(t, db, "planned", plannedAgent)
	wf := run(t, llmRunner(db, modelTable{}, &scripted{}), "planned")
	// The execution's span ends as it returns, just after the workflow's end
	// reached Wait.
	invoked := func() bool {
		for _, s := range rec.Ended() {
			for _, a := range s.Attributes() {
				if s.Name() == "invoke_agent planned" && a.Key == "gen_ai.conversation.id" && a.Value.AsString() == wf.ID {
					return true
				}
			}
		}
		return false
	}
	for deadline := time.Now().Add(5 * time.Second); !invoked() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	got := map[string]map[string]string{}
	for _, s := range rec.Ended() {
		if scope := s.InstrumentationScope(); strings.HasPrefix(s.Name(), "invoke_agent") || strings.HasPrefix(s.Name(), "execute_tool") {
			if scope.SchemaURL != telemetry.GenAISchemaURL {
				t.Errorf("span %s: schema URL %q, want %q", s.Name(), scope.SchemaURL, telemetry.GenAISchemaURL)
			}
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes() {
			if strings.HasPrefix(string(a.Key), "gen_ai.") {
				attrs[string(a.Key)] = a.Value.String()
			}
		}
		if len(attrs) > 0 && attrs["gen_ai.conversation.id"] != "" && attrs["gen_ai.conversation.id"] != wf.ID {
			continue // another test's
		}
		if strings.HasPrefix(s.Name(), "execute_tool") && !strings.Contains(attrs["gen_ai.tool.call.id"], "call_model") &&
			!strings.HasPrefix(attrs["gen_ai.tool.call.id"], wf.ID) {
			continue
		}
		got[s.Name()] = attrs
	}
	want := map[string]map[string]string{
		"invoke_agent planned": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planned",
			"gen_ai.agent.id": "planned@" + wf.AgentVersion, "gen_ai.conversation.id": wf.ID},
		"execute_tool ledger.getTransaction": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ledger",
			"gen_ai.tool.call.id": "call_model_1", "gen_ai.tool.type": "extension", "gen_ai.conversation.id": wf.ID},
		"execute_tool ledger.postEntry": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ledger",
			"gen_ai.tool.call.id": "<workflow>.<step>", "gen_ai.tool.type": "extension", "gen_ai.conversation.id": wf.ID},
	}
	if post := got["execute_tool ledger.postEntry"]; post != nil && strings.HasPrefix(post["gen_ai.tool.call.id"], wf.ID+".") {
		post["gen_ai.tool.call.id"] = "<workflow>.<step>"
	}
	for name, attrs := range want {
		if diff := cmp.Diff(attrs, got[name]); diff != "" {
			t.Errorf("span %s (-want +got):\n%s", name, diff)
		}
	}

	// Each tool call is one measurement of gen_ai.execute_tool.duration,
	// in seconds, on a meter of the gen-ai 1.42 schema. Other tests of the
	// package may call the ledger meanwhile: at least this run's two.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "gen_ai.execute_tool.duration" {
				continue
			}
			found = true
			if m.Unit != "s" || sm.Scope.SchemaURL != telemetry.GenAISchemaURL {
				t.Errorf("gen_ai.execute_tool.duration: unit %q, schema %q", m.Unit, sm.Scope.SchemaURL)
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("gen_ai.execute_tool.duration is a %T, want a histogram", m.Data)
			}
			var ledger uint64
			for _, dp := range h.DataPoints {
				op, _ := dp.Attributes.Value("gen_ai.operation.name")
				name, _ := dp.Attributes.Value("gen_ai.tool.name")
				typ, _ := dp.Attributes.Value("gen_ai.tool.type")
				if op.AsString() != "execute_tool" || typ.AsString() != "extension" {
					t.Errorf("data point attributes %v", dp.Attributes.ToSlice())
				}
				if _, hasErr := dp.Attributes.Value("error.type"); name.AsString() == "ledger" && !hasErr {
					ledger += dp.Count
				}
			}
			if ledger < 2 {
				t.Errorf("gen_ai.execute_tool.duration counts %d successful ledger calls, want at least 2", ledger)
			}
		}
	}
	if !found {
		t.Error("no gen_ai.execute_tool.duration metric")
	}
}

// completionSteps are the workflow's stored steps of kind completion, and
// its token_limit_reached step if any.
func completionSteps(t *testing.T, db *sqlite.DB, id string) (comps []workflow.Step, limit *workflow.Step) {
	t.Helper()
	steps, err := db.Steps(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		switch {
		case s.Kind == agent.KindCompletion:
			comps = append(comps, s)
		case s.Action == "token_limit_reached":
			limit = &steps[i]
		}
	}
	return comps, limit
}

// TestTokenBoundsStopBeforeTheRequest checks both token bounds, the
// invocation's max_llm_tokens and the model's daily budget: the completion
// that would start past one is not requested, the run ends limit_exceeded
// at a token_limit_reached step, and completion steps show their usage.
func TestTokenBoundsStopBeforeTheRequest(t *testing.T) {
	t.Parallel()
	db := setup(t)
	deploy(t, db, "planned", plannedAgent)
	m := &scripted{}
	r := llmRunner(db, modelTable{"default": {Model: "gpt-test", DailyTokenBudget: 300}}, m)
	req := request("planned")
	req.MaxLLMTokens = new(int64(100))
	wf, err := r.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if wf, err = r.Wait(context.Background(), "acme", wf.ID); err != nil {
		t.Fatal(err)
	}
	comps, limit := completionSteps(t, db, wf.ID)
	if len(comps) == 0 {
		// Wait returned the finished workflow: its steps are all stored.
		t.Fatalf("workflow %s finished (%s) with no completion step stored", wf.ID, wf.Outcome)
	}
	if m.count() != 1 || wf.Outcome != workflow.OutcomeLimitExceeded || limit == nil || limit.Status != agent.StatusLimitExceeded {
		t.Errorf("max_llm_tokens 100: %d requests, outcome %s, limit step %+v; want 1 request (120 tokens), then the limit", m.count(), wf.Outcome, limit)
	}
	if c := comps[0]; c.Model != "default" || c.Usage == nil || c.InputTokens != 100 || c.OutputTokens != 20 || c.FinishReason != "tool_calls" {
		t.Errorf("completion step %+v", c)
	}
	// 120 tokens today; another run uses 240 more (360 ≥ 300); the next asks nothing.
	if wf := run(t, r, "planned"); wf.Status != workflow.Completed {
		t.Fatalf("second workflow %s/%s: %s", wf.Status, wf.Outcome, wf.Error)
	}
	wf = run(t, r, "planned")
	_, limit = completionSteps(t, db, wf.ID)
	if m.count() != 3 || wf.Outcome != workflow.OutcomeLimitExceeded || limit == nil || !strings.Contains(limit.Error, "daily budget of 300 tokens") {
		t.Errorf("past the daily budget: %d requests, outcome %s, limit step %+v", m.count(), wf.Outcome, limit)
	}
}
