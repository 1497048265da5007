package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// loadOpenAPI parses the embedded document, resolving its $refs.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openAPIDoc)
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	return doc
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadOpenAPI(t)
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	// kin-openapi validates 3.1 documents with 3.1 rules (type arrays,
	// const, license identifiers, empty security lists). Examples are not
	// validated because the document has none; schema keywords kin-openapi
	// does not model (the conformance test compiles them with a full JSON
	// Schema 2020-12 validator) are ignored by it, not refused.
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	if doc.Info.Title != "agentplane" || doc.Info.Version != "1" {
		t.Errorf("info = %q %q, want agentplane 1", doc.Info.Title, doc.Info.Version)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/" {
		t.Errorf("servers = %v, want [/]", doc.Servers)
	}
}

// TestOpenAPICoversEveryRoute checks the document against the route table:
// the same operations, and the same security review.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	routes := NewServer(Config{}, Deps{}).routes

	// The console's pages and forms are HTML for a browser with a
	// session, not API operations: docs/console.md describes them.
	routes = slices.DeleteFunc(routes, func(rt route) bool { return rt.console || rt.pattern == "GET /console/assets/{file}" })
	var want, got []string
	for _, rt := range routes {
		want = append(want, rt.pattern)
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			got = append(got, method+" "+path)
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("operations of openapi.json vs the route table (-routes +document):\n%s", diff)
	}

	for _, rt := range routes {
		t.Run(rt.pattern, func(t *testing.T) {
			method, path, _ := strings.Cut(rt.pattern, " ")
			op := doc.Paths.Value(path).GetOperation(method)
			if op.OperationID == "" || op.Summary == "" || op.Description == "" {
				t.Errorf("operationId %q, summary %q, description %q: all are required", op.OperationID, op.Summary, op.Description)
			}
			checkSecurity(t, rt, op)
			checkParameters(t, rt, path, op)
			checkResponses(t, rt, method, op)
		})
	}
}

func checkSecurity(t *testing.T, rt route, op *openapi3.Operation) {
	t.Helper()
	if rt.gateway {
		want := openapi3.SecurityRequirements{{"runToken": {}}}
		if op.Security == nil || !cmp.Equal(want, *op.Security) {
			t.Errorf("gateway route: security = %v, want the run token", op.Security)
		}
		return
	}
	if rt.public {
		if op.Security == nil || len(*op.Security) != 0 {
			t.Errorf("public route: security = %v, want []", op.Security)
		}
		return
	}
	if rt.scope == "" {
		if op.Security != nil {
			t.Errorf("any valid token: security = %v, want the global requirement", *op.Security)
		}
		return
	}
	want := openapi3.SecurityRequirements{{"bearerAuth": {rt.scope}}, {"oauth2": {rt.scope}}}
	if op.Security == nil {
		t.Fatalf("security is not set; want scope %s", rt.scope)
	}
	if diff := cmp.Diff(want, *op.Security); diff != "" {
		t.Errorf("security (-want +got):\n%s", diff)
	}
}

func checkParameters(t *testing.T, rt route, path string, op *openapi3.Operation) {
	t.Helper()
	has := func(in, name string) bool {
		return slices.ContainsFunc(op.Parameters, func(p *openapi3.ParameterRef) bool {
			return p.Value.In == in && p.Value.Name == name
		})
	}
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			if !has(openapi3.ParameterInPath, name) {
				t.Errorf("path parameter %q is not documented", name)
			}
		}
	}
	if rt.idempotent != has(openapi3.ParameterInHeader, "Idempotency-Key") {
		t.Errorf("route idempotent = %v, but Idempotency-Key documented = %v", rt.idempotent, !rt.idempotent)
	}
}

func checkResponses(t *testing.T, rt route, method string, op *openapi3.Operation) {
	t.Helper()
	need := []int{http.StatusInternalServerError}
	if rt.gateway {
		// The run gateway answers in the provider's shape, not problem
		// documents, and is neither rate limited nor idempotent.
		need = append(need, http.StatusUnauthorized)
		if op.RequestBody != nil {
			need = append(need, http.StatusBadRequest, http.StatusRequestEntityTooLarge)
		}
		for _, status := range need {
			if op.Responses.Status(status) == nil {
				t.Errorf("no %d response", status)
			}
		}
		for code, r := range op.Responses.Map() {
			if code >= "400" && code != "405" && r.Value.Content.Get("application/json") == nil {
				t.Errorf("error response %s is not the provider's JSON error", code)
			}
		}
		return
	}
	if !rt.public {
		need = append(need, http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable)
	} else if !rt.noAudit {
		need = append(need, http.StatusTooManyRequests) // limited per client IP
	}
	if rt.idempotent {
		need = append(need, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge)
	}
	if op.RequestBody != nil && op.RequestBody.Value.Content.Get("application/json") != nil {
		need = append(need, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity)
	}
	if (method == http.MethodPost || method == http.MethodPut) && rt.pattern != "POST /oauth/token" && op.RequestBody == nil && !rt.idempotent {
		t.Errorf("%s without a request body", method)
	}
	for _, status := range need {
		if op.Responses.Status(status) == nil {
			t.Errorf("no %d response", status)
		}
	}
	success := false
	for code, r := range op.Responses.Map() {
		if strings.HasPrefix(code, "2") {
			success = true
		}
		if r.Value.Headers["Request-Id"] == nil {
			t.Errorf("response %s does not document Request-Id", code)
		}
		if code >= "400" && rt.pattern != "POST /oauth/token" {
			if r.Value.Content.Get("application/problem+json") == nil {
				t.Errorf("error response %s is not a problem document", code)
			}
		}
	}
	if !success {
		t.Error("no success response")
	}
}

// TestOpenAPISchemasMatchViews validates the values the handlers write,
// fully populated and minimal, against the document's schemas, so that a
// field added to a view without the document (or a required field that
// can be left out) fails here even before a request can produce it.
func TestOpenAPISchemasMatchViews(t *testing.T) {
	const base = "https://agentplane.test/openapi.json"
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPIDoc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(base, raw); err != nil {
		t.Fatal(err)
	}

	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	score := 0.91
	step := workflow.Step{Step: 1, Action: "fetch", Kind: "call", Status: "ok", Tool: "pets", Operation: "listPets",
		Args: json.RawMessage(`{"limit":1}`), Score: &score, Queue: "fraud-review", Outcome: "escalated",
		Result: json.RawMessage(`[{"id":1}]`), Error: "boom", Request: json.RawMessage(`{"method":"GET"}`),
		HTTPStatus: 200, Attempts: 1, StartedAt: now, DurationMS: 12, Sent: true}
	injected := workflow.Step{Step: 2, Action: "fetch", Kind: "call", Status: "error", Tool: "pets", Operation: "listPets",
		Result: json.RawMessage(`{"error":"down"}`), Error: "the API answered 503", ErrorCode: "upstream_error", HTTPStatus: 503,
		Injected: &fault.Injected{Fault: 0, Status: 503}}
	rate := 0.5
	faults := []fault.Fault{{Tool: "pets", Operation: "listPets", When: "args.limit > 0", Rate: &rate,
		Result: fault.Result{Status: 503, Body: json.RawMessage(`{"error":"down"}`), Headers: map[string]string{"Retry-After": "30"}}},
		{Tool: "pets", Result: fault.Result{Error: fault.ErrorTimeout}}}
	failure := json.RawMessage(mustMarshal(t, (&problem.Error{Code: problem.WorkflowFailed, Detail: "interrupted"}).Doc("/v1/workflows/wf_x", "", "")))
	wf := &workflow.Workflow{ID: "wf_01J00000000000000000000000", Agent: "triage", AgentVersion: "2", Status: workflow.Failed,
		Outcome: workflow.OutcomeFailed, StartedAt: now, FinishedAt: now.Add(time.Second), Error: failure}
	outcome, finished := "escalated", "2026-11-21T10:00:01.000Z"
	fullWorkflow := workflowView{workflowSummary: workflowSummary{WorkflowID: wf.ID, Agent: "triage", AgentVersion: "2", Status: workflow.Completed,
		Outcome: &outcome, DurationMS: 1000, StartedAt: "2026-11-21T10:00:00.000Z", FinishedAt: &finished,
		Output: json.RawMessage(`{"queue":"fraud-review"}`)}, Steps: []any{workflow.StepView("triage", step)}, Error: failure}
	detail := fullWorkflow
	detail.Steps = []any{stepDetail{Step: step}, stepDetail{Step: workflow.Step{Step: 2, Action: "x", Kind: "call", Status: "denied", Tool: "pets", StartedAt: now}, Hidden: true},
		stepDetail{Step: injected}}
	detail.Goal, detail.Context, detail.MaxToolCalls, detail.ReplayOf, detail.Faults = "triage", json.RawMessage(`{"amount":1}`), 20, wf.ID, faults
	detail.Caller = &callerView{Sub: "alice", ClientID: "cli_1"}

	version := &agent.Version{Name: "triage", Version: "2", Description: "d", Tools: []string{"pets"}, DeployedAt: now, Default: true,
		Definition: json.RawMessage(`{"tools":["pets"],"steps":[{"action":"done","finish":"cleared"}]}`)}
	external := &agent.Version{Name: "triage", Version: "3", Tools: []string{"pets"}, DeployedAt: now,
		External: &agent.External{URL: "https://agents.example.com/triage",
			Auth:    &agent.ExternalAuth{Type: agent.ExternalAuthAPIKey, SecretsRef: "env://TOOL_AGENT_KEY", Header: "X-Key"},
			Timeout: "20m", MaxAttempts: 4, Tools: []string{"pets"}, Models: []string{"gpt"},
			Policies:  map[string]agent.Policy{"standard": {Allow: "true"}},
			Approvals: []agent.ApprovalRule{{When: "operation == 'createPet'", Reason: "'new'", ApproverScope: "approve:pets", Timeout: "1h", OnTimeout: "approve", AllowSelf: true}},
			Inputs:    json.RawMessage(`{"type":"object"}`), Limits: &agent.ExternalLimits{MaxToolCalls: 20, MaxLLMTokens: 1000}, MaxConcurrency: 8}}
	ag := &agent.Agent{Name: "triage", DefaultVersion: "2", LatestVersion: "3", Versions: 3, Description: "d", CreatedAt: now, UpdatedAt: now}
	type agentWithDefault struct { // as handleGetAgent writes it
		agentView
		Default versionView `json:"default"`
	}

	fullTool := viewTool(&tool.Tool{ID: "tool_01J00000000000000000000000", Name: "pets", Type: tool.OpenAPI, SpecURL: "https://x.example/spec.json",
		EndpointURL: "https://api.example", BaseURL: "https://api.example", PolicyClass: "financial", SideEffects: []string{"create"},
		IdempotencySupport: true, SpecSHA256: strings.Repeat("a", 64), Revision: 2, OperationCount: 1, IndexedAt: now, CreatedAt: now, UpdatedAt: now,
		Auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_X", ClientID: "c", TokenURL: "https://x.example/token", Scopes: []string{"a"},
			Header: "X-Key", In: "header", Name: "key"},
		Limits: &tool.Limits{Rate: "50/s", Concurrency: 8, Timeout: "10s", Retries: &tool.RetryLimits{Max: 3, On: []int{429, 503}},
			Circuit: &tool.CircuitLimits{Failures: 5, Window: "30s", OpenFor: "30s"}},
		OperationLimits: map[string]tool.Limits{"listPets": {Rate: "600/m"}}})
	fullTool.OperationList = []opSummary{{ID: "listPets", Kind: tool.Read, Summary: "List"}}
	schema := json.RawMessage(`{"type":"object"}`)
	ops := []tool.Operation{
		{ID: "listPets", Kind: tool.Read, Summary: "s", Description: "d", Input: schema, Output: schema,
			HTTP: &tool.HTTPBinding{Method: "GET", Path: "/pets", Params: []tool.Param{{Name: "limit", In: "query", Required: true, Schema: schema}},
				Body: &tool.Body{Required: true, ContentType: "application/json", Schema: schema}, Security: []string{"key"}}},
		{ID: "book", Kind: tool.Read, GraphQL: &tool.GraphQLBinding{Root: "query", Field: "book", Args: []tool.Arg{{Name: "id", Type: "ID!", Required: true}}, Selection: "{ id }"}},
		{ID: "Quote", Kind: tool.Write, SOAP: &tool.SOAPBinding{Version: "1.1", Action: "urn:q", Style: "document", Endpoint: "https://x.example/soap",
			Namespace: "urn:x", Element: "Quote", Parts: []tool.Part{{Name: "sym", Namespace: "urn:x", Type: "string", Required: true}}, ResponseElement: "QuoteResponse"}},
	}

	for _, tc := range []struct {
		name, schema string
		v            any
	}{
		{"webhook, every field", "Webhook", webhookView{Webhook: &webhook.Webhook{ID: "whk_01J00000000000000000000000", URL: "https://h.example/in",
			Events: []string{webhook.WorkflowCompleted}, Agent: "triage", Description: "d", CreatedAt: now, Secret: "whsec_x"}, Secret: "whsec_x"}},
		{"webhook, fewest fields", "Webhook", webhookView{Webhook: &webhook.Webhook{ID: "whk_01J00000000000000000000000", URL: "https://h.example/in",
			Events: []string{webhook.ApprovalDecided}, CreatedAt: now}}},
		{"delivery, every field", "Delivery", &webhook.Delivery{ID: "msg_x", WebhookID: "whk_x", Type: webhook.WorkflowFailed, OrderKey: wf.ID,
			Status: webhook.Pending, Attempts: 2, NextAttempt: now, LastStatus: 500, LastError: "answered 500", CreatedAt: now, DeliveredAt: now}},
		{"delivery, fewest fields", "Delivery", &webhook.Delivery{ID: "msg_x", WebhookID: "whk_x", Type: webhook.WorkflowWaiting, Status: webhook.Pending, CreatedAt: now}},
		{"schedule, every field", "Schedule", viewSchedule(&schedule.Schedule{ID: "sch_01J00000000000000000000000", Agent: "triage@2",
			Cron: "0 9 * * 1-5", Timezone: "Europe/Paris", Goal: "sweep", Context: json.RawMessage(`{"q":1}`), MaxToolCalls: new(3),
			Overlap: schedule.OverlapSkip, Creator: workflow.Caller{Sub: "alice", ClientID: "cli_1", Scopes: []string{"agents:invoke"}},
			CreatedAt: now, UpdatedAt: now, LastDue: now, NextDue: now})},
		{"schedule, fewest fields", "Schedule", viewSchedule(&schedule.Schedule{ID: "sch_01J00000000000000000000000", Agent: "triage",
			Cron: "@every 1h", Timezone: "UTC", Goal: "sweep", Context: json.RawMessage(`{}`), Overlap: schedule.OverlapAllow, Paused: true,
			Creator: workflow.Caller{Sub: "alice"}, CreatedAt: now, UpdatedAt: now})},
		{"tool, every field", "Tool", fullTool},
		{"tool, fewest fields", "Tool", viewTool(&tool.Tool{ID: "tool_01J00000000000000000000000", Name: "p", Type: tool.GraphQL,
			Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SpecSHA256: strings.Repeat("0", 64), Revision: 1})},
		{"operations, full", "OperationPage", func() operationPage {
			pg := operationPage{ToolID: "tool_01J00000000000000000000000", Query: "pet", NextCursor: new("20")}
			for _, h := range tool.NewSearchIndex("pets", ops).Search("", "") {
				score := 1.5
				pg.Operations = append(pg.Operations, opResult{OperationRef: h.OperationRef, Score: &score, Input: schema, Output: schema})
			}
			return pg
		}()},
		{"operations, slim", "OperationPage", operationPage{Operations: []opResult{{OperationRef: tool.OperationRef{ID: "a", Tool: "t", Kind: tool.Read}}}}},
		{"version, every field", "AgentVersion", viewVersion(version, true)},
		{"version, fewest fields", "AgentVersion", viewVersion(&agent.Version{Name: "a", Version: "1", DeployedAt: now}, false)},
		{"external version, every field", "AgentVersion", viewVersion(external, true)},
		{"external version, fewest fields", "AgentVersion", viewVersion(&agent.Version{Name: "a", Version: "1", DeployedAt: now,
			External: &agent.External{URL: "https://a.example", Tools: []string{}}}, false)},
		{"agent", "Agent", viewAgent(ag)},
		{"agent with its default", "AgentWithDefault", agentWithDefault{viewAgent(ag), viewVersion(version, true)}},
		{"workflow, finished", "Workflow", fullWorkflow},
		{"workflow, running", "Workflow", workflowView{workflowSummary: workflowSummary{WorkflowID: wf.ID, Agent: "a", AgentVersion: "1", Status: workflow.Running,
			StartedAt: "2026-11-21T10:00:00.000Z", Output: json.RawMessage("null")}, Steps: []any{}}},
		{"workflow detail", "WorkflowDetail", detail},
		{"step event", "StreamEvent", workflow.StepView("triage", step)},
		{"step event of an injected call", "StreamEvent", workflow.StepView("triage", injected)},
		{"step event, fewest fields", "StreamEvent", workflow.StepView("triage", workflow.Step{Step: 1, Action: "a", Status: "unrecorded"})},
		{"complete event", "StreamEvent", workflow.CompleteView(wf)},
		{"complete event of a failed stream", "StreamEvent", map[string]any{"event": "complete", "workflow_id": wf.ID, // as stream writes it
			"outcome": workflow.OutcomeFailed, "status": workflow.Failed, "duration_ms": 3, "error": (&problem.Error{Code: problem.Unavailable}).Doc("/v1/agents/a/invoke", "req_01J00000000000000000000000", "")}},
		{"problem with errors", "Problem", problem.Validation(problem.FieldError{Field: "name", Message: "is required"}).Doc("/v1/tools", "", "")},
		{"replay, every field", "Replay", viewReplay(&replay.Replay{ID: "rpl_01J00000000000000000000000", WorkflowID: wf.ID, Status: replay.StatusCompleted, Target: "triage@3",
			OriginalVersion: "triage@2", OriginalOutcome: "escalated", ReplayOutcome: "failed", ReplayError: "boom", ReplayWorkflowID: wf.ID,
			Delta: replay.Delta{StepsAdded: 1, StepsChanged: 1, StepsRemoved: 1, ToolCallsChanged: 2}, CreatedAt: now, Faults: faults,
			Steps: []replay.Entry{{Kind: replay.Same, Original: &step, Replay: &step}, {Kind: replay.Changed, Fields: []string{"args", "status"}, Original: &step, Replay: &step},
				{Kind: replay.Changed, Fields: []string{"status", "result", "injected"}, Original: &step, Replay: &injected},
				{Kind: replay.Added, Replay: &step}, {Kind: replay.Removed, Original: &step}}}, "https://agentplane.test/replays/rpl_x?exp=1&sig=x")},
		{"replay page, fewest fields", "ReplayPage", map[string]any{"replays": []replayView{viewReplay(&replay.Replay{ID: "rpl_01J00000000000000000000000", WorkflowID: wf.ID, Status: replay.StatusRunning,
			Target: "triage@3", DryRun: true, OriginalVersion: "triage@2", CreatedAt: now, Steps: []replay.Entry{}}, "http://127.0.0.1:8080/replays/rpl_x?exp=1&sig=x")}, "next_cursor": nil}},
		{"replay batch, running", "ReplayBatch", signedBatch(replay.NewBatch("acme", "triage@3", 10, replay.Creator{Sub: "u"}, now))},
		{"batch progress", "BatchEvent", batchEvent{Event: "progress", Done: 3, Total: 10, Changed: 1}},
		{"batch complete", "BatchEvent", func() batchEvent {
			v := signedBatch(replay.NewBatch("acme", "triage@3", 0, replay.Creator{Sub: "u"}, now))
			return batchEvent{Event: "complete", Batch: &v}
		}()},
		{"replay batch, finished", "ReplayBatch", func() batchView {
			b := replay.NewBatch("acme", "triage@3", 3, replay.Creator{Sub: "u"}, now)
			b.Status, b.Error, b.FinishedAt, b.Spec.Faults = replay.BatchFailed, "boom", &now, faults
			b.Count([]replay.BatchCell{{From: "escalated", To: "cleared", Count: 2, Delta: replay.Delta{StepsChanged: 4}}, {From: "cleared", To: "cleared", Count: 1}})
			return signedBatch(b)
		}()},
		{"verify report", "AuditVerifyReport", audit.Report{OK: false, RecordsChecked: 3, FirstBadSeq: new(int64)}},
		{"model, every field", "Model", &model.Model{ID: "mdl_01J00000000000000000000000", Tenant: "acme", Name: "gpt", Provider: model.OpenAI,
			BaseURL: "https://x.openai.azure.com/openai/v1", Model: "gpt-4o-mini", Auth: model.Auth{Type: model.AuthAPIKey, SecretsRef: "env://TOOL_X", Header: "api-key"},
			Headers: map[string]string{"X-Team": "a"}, Timeout: 90 * time.Second, MaxConcurrency: 2, Price: &model.Price{InputPerMTok: 1, OutputPerMTok: 2, Currency: "EUR"},
			DailyTokenBudget: 10, Revision: 2, CreatedAt: now, UpdatedAt: now}},
		{"model page, fewest fields", "ModelPage", map[string]any{"models": []*model.Model{{ID: "mdl_01J00000000000000000000000", Name: "local",
			Provider: model.Anthropic, BaseURL: "http://127.0.0.1:11434/v1", Model: "m", Auth: model.Auth{Type: model.AuthNone}, Timeout: model.DefaultTimeout,
			Revision: 1, CreatedAt: now, UpdatedAt: now}}, "next_cursor": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Compile(base + "#/components/schemas/" + tc.schema)
			if err != nil {
				t.Fatal(err)
			}
			b := mustMarshal(t, tc.v)
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(v); err != nil {
				t.Errorf("%s does not conform to %s: %v", b, tc.schema, err)
			}
		})
	}
}

func signedBatch(b *replay.Batch) batchView {
	v := viewBatch(b)
	v.ViewerURL = "https://agentplane.test/replay-batches/" + b.ID + "?exp=1&tools=&sig=x"
	return v
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
