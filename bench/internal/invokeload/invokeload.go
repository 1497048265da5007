// Package invokeload is the invocation load of the benchmarks: a loopback
// tool service, an agent of three sequential calls to it, and one checked
// synchronous invocation. bench/invoke measures it alone; bench/retention
// measures it while a retention sweep runs.
package invokeload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

// ToolService is the loopback API the agent's steps call.
type ToolService struct {
	*httptest.Server
	// Hits counts the calls it answered.
	Hits atomic.Int64
}

// thingSpec is the tool service's OpenAPI document; %s is its base URL.
const thingSpec = `{"openapi": "3.0.3", "info": {"title": "things", "version": "1"},
 "servers": [{"url": "%s"}],
 "paths": {"/things/{id}": {"get": {"operationId": "getThing", "summary": "Read a thing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object",
     "properties": {"id": {"type": "string"}, "ok": {"type": "boolean"}}}}}}}}}}}`

// AgentName and AgentDefinition are the benchmarked agent: three sequential
// calls of svc.getThing with different arguments, then a literal outcome.
const (
	AgentName       = "bench-three-calls"
	AgentOutcome    = "done"
	AgentSteps      = 3
	AgentDefinition = `{
  "tools": ["svc"],
  "steps": [
    {"action": "get_a", "call": "svc.getThing", "args": {"id": "'a'"}, "save_as": "a"},
    {"action": "get_b", "call": "svc.getThing", "args": {"id": "'b'"}, "save_as": "b"},
    {"action": "get_c", "call": "svc.getThing", "args": {"id": "'c'"}, "save_as": "c"}
  ],
  "outcome": "'done'"
}`
)

// StartToolService starts the tool service on loopback.
func StartToolService() *ToolService {
	s := &ToolService{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/things/")
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		s.Hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(thingBody(id))
	}))
	return s
}

// thingBody is the service's answer for id; the agent's three are made once,
// so the load generator spends its CPU on requests, not on encoding.
func thingBody(id string) []byte {
	if b, ok := thingBodies[id]; ok {
		return b
	}
	b, _ := json.Marshal(map[string]any{"id": id, "ok": true})
	return b
}

var thingBodies = map[string][]byte{
	"a": []byte(`{"id":"a","ok":true}`),
	"b": []byte(`{"id":"b","ok":true}`),
	"c": []byte(`{"id":"c","ok":true}`),
}

// Spec is the service's OpenAPI document.
func (s *ToolService) Spec() string { return fmt.Sprintf(thingSpec, s.URL) }

// Setup registers the tool service on srv and deploys the agent.
func Setup(ctx context.Context, srv *benchserver.Server, svc *ToolService) error {
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": svc.Spec()}
	if st, body, err := srv.Do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	dep := map[string]any{"name": AgentName, "definition": json.RawMessage(AgentDefinition)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
		return fmt.Errorf("deploy agent: %d %s %v", st, body, err)
	}
	return nil
}

// invokeBody is the body of every invocation.
var invokeBody = []byte(`{"goal": "bench", "context": {}}`)

// answer is what is checked of a sync invocation.
type answer struct {
	WorkflowID string `json:"workflow_id"`
	Status     string `json:"status"`
	Outcome    string `json:"outcome"`
	Steps      []struct {
		Step   int    `json:"step"`
		Status string `json:"status"`
	} `json:"steps"`
}

// Invoke runs the agent once on srv, synchronously, through hc, and checks
// the answer; it returns the workflow's id.
func Invoke(ctx context.Context, hc *http.Client, srv *benchserver.Server) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", srv.BaseURL()+"/v1/agents/"+AgentName+"/invoke", bytes.NewReader(invokeBody))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return Check(resp.StatusCode, data)
}

// Check checks a workflow as invoke or GET /v1/workflows/{id} answered it:
// completed with the agent's outcome and its three steps ok.
func Check(status int, data []byte) (string, error) {
	if status != http.StatusOK {
		return "", fmt.Errorf("status %d: %.300s", status, data)
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return "", fmt.Errorf("answer: %w", err)
	}
	if a.Status != "completed" || a.Outcome != AgentOutcome || len(a.Steps) != AgentSteps {
		return "", fmt.Errorf("workflow %s: status %q, outcome %q, %d steps: %.300s", a.WorkflowID, a.Status, a.Outcome, len(a.Steps), data)
	}
	for i, s := range a.Steps {
		if s.Step != i+1 || s.Status != "ok" {
			return "", fmt.Errorf("workflow %s: step %d is %d with status %q", a.WorkflowID, i+1, s.Step, s.Status)
		}
	}
	return a.WorkflowID, nil
}
