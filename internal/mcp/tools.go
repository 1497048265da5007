package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// searchLimit is search_operations' default limit.
const searchLimit = 10

// agentToolOf describes an agent's default version as an MCP tool: a goal,
// and a context of the agent's inputs.
func agentToolOf(v *agent.Version) *sdk.Tool {
	contextSchema := json.RawMessage(`{"type":"object"}`)
	if in := v.Inputs(); len(in) > 0 {
		contextSchema = in
	}
	schema := fmt.Sprintf(`{"type":"object","properties":{"goal":{"type":"string","minLength":1,"maxLength":8000,"description":"what the agent should achieve"},"context":%s},"required":["goal"]}`, contextSchema)
	desc := strings.TrimSpace(v.Description)
	switch {
	case desc == "":
		desc = "Runs the agent " + v.Name + "."
	case !strings.ContainsAny(desc[len(desc)-1:], ".!?"):
		desc += "." // the sentence added after it must not run on from it
	}
	return &sdk.Tool{
		Name:        agentTool + v.Name,
		Title:       v.Name,
		Description: desc + " Invokes version " + v.Version + " (the default) and answers with the finished workflow; needs the scope agents:invoke.",
		InputSchema: json.RawMessage(schema),
	}
}

// toolError is a refusal or failure the model should see: a tool result
// with isError, not a JSON-RPC error.
func toolError(format string, args ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// problemText is an error as a tool error's text.
func problemText(err error) string {
	pe := problem.As(err)
	text := pe.Detail
	for _, fe := range pe.Errors {
		text += "; " + fe.Field + ": " + fe.Message
	}
	return text
}

// jsonResult is v as structured content and as its JSON text.
func jsonResult(v any, isError bool) (*sdk.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &sdk.CallToolResult{IsError: isError, StructuredContent: json.RawMessage(b),
		Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
}

// decodeArgs decodes a call's arguments strictly. The numbers of untyped
// values (call_operation's args, an agent tool's context) are json.Numbers,
// as an invoke's are, so an integer past 2^53 reaches the tool with every
// digit.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	return dec.Decode(v)
}

// agentStart checks a call of the agent tool of the agent name and is the
// start request of its workflow; a refusal is a tool error.
func agentStart(r *http.Request, req *sdk.CallToolRequest, name string) (workflow.StartRequest, *sdk.CallToolResult) {
	if err := frontdoor.Principal(r).Require(auth.ScopeAgentsInvoke); err != nil {
		return workflow.StartRequest{}, toolError("%s needs the scope %s, which this token lacks", req.Params.Name, auth.ScopeAgentsInvoke)
	}
	var in struct {
		Goal    string         `json:"goal"`
		Context map[string]any `json:"context"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return workflow.StartRequest{}, toolError("arguments: %v (want {\"goal\": \"…\", \"context\": {…}})", err)
	}
	return workflow.StartRequest{Agent: name, Goal: in.Goal, Context: in.Context}, nil
}

// invoke is the handler of the agent tool of the agent name.
func (s *Server) invoke(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		r, err := httpRequest(ctx)
		if err != nil {
			return nil, err
		}
		ctx, span := startSpan(ctx, req)
		defer span.End()
		sr, refusal := agentStart(r, req, name)
		if refusal != nil {
			return refusal, nil
		}
		run, err := s.run(ctx, r, req, sr)
		if err != nil {
			return toolError("%s", problemText(err)), nil
		}
		v, err := s.svc.View(r, run.wf, run.steps)
		if err != nil {
			return toolError("%s", problemText(err)), nil
		}
		return run.result(jsonResult(v, run.wf.Status == workflow.Failed))
	}
}

func (s *Server) search(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	r, err := httpRequest(ctx)
	if err != nil {
		return nil, err
	}
	var in struct {
		Query string `json:"query"`
		Tool  string `json:"tool"`
		Kind  string `json:"kind"`
		Limit int    `json:"limit"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return toolError("arguments: %v (want {\"query\": \"…\", \"tool\"?, \"kind\"?, \"limit\"?})", err), nil
	}
	// Full: each operation with its input schema, so a client knows the
	// arguments call_operation takes without another round trip.
	q := tool.FindQuery{Q: strings.TrimSpace(in.Query), Kind: in.Kind, Limit: in.Limit, Full: true}
	if q.Limit == 0 {
		q.Limit = searchLimit
	}
	if errs := q.Check("query"); len(errs) > 0 {
		return toolError("%s", problemText(problem.Validation(errs...))), nil
	}
	found, err := s.svc.Operations.Search(ctx, frontdoor.Principal(r).Tenant, in.Tool, q)
	if err != nil {
		return toolError("%s", problemText(err)), nil
	}
	return jsonResult(map[string]any{"operations": found.Operations}, false)
}

// callResult is what call_operation answers: the call's step.
type callResult struct {
	WorkflowID string          `json:"workflow_id"`
	Status     string          `json:"status"`
	HTTPStatus int             `json:"http_status,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
}

func (s *Server) call(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	r, err := httpRequest(ctx)
	if err != nil {
		return nil, err
	}
	ctx, span := startSpan(ctx, req)
	defer span.End()
	var in struct {
		Tool      string         `json:"tool"`
		Operation string         `json:"operation"`
		Args      map[string]any `json:"args"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil || in.Tool == "" || in.Operation == "" {
		return toolError("arguments: want {\"tool\": \"<name>\", \"operation\": \"<id>\", \"args\": {…}}, as search_operations lists them"), nil
	}
	one := 1
	run, err := s.run(ctx, r, req, workflow.StartRequest{
		Agent: agent.OperationAgent, Version: in.Tool + "." + in.Operation,
		Goal:    callTool + " " + in.Tool + "." + in.Operation,
		Context: map[string]any{"args": in.Args}, MaxToolCalls: &one,
	})
	if err != nil {
		text := problemText(err)
		if problem.Is(err, problem.ValidationFailed) {
			text += ": search_operations lists the operations there are"
		}
		return toolError("%s", text), nil
	}
	res := callResult{WorkflowID: run.wf.ID, Status: run.wf.Status}
	if len(run.steps) > 0 {
		st := run.steps[len(run.steps)-1]
		res.Status, res.HTTPStatus, res.Result = st.Status, st.HTTPStatus, st.Result
		if st.Error != "" {
			res.Error = st.Error
		}
	}
	return run.result(jsonResult(res, res.Status != agent.StatusOK))
}
