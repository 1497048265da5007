package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/wire"
	"github.com/agentplane/agentplane/internal/model"
)

// sdkAnthropic is the Messages provider as it was through
// anthropic-sdk-go's MessageNewParams and Message.
type sdkAnthropic struct {
	model string
	svc   anthropic.MessageService
}

func newSDKAnthropic(c *client) provider {
	return &sdkAnthropic{model: c.model.Model, svc: anthropic.NewMessageService(anthropicOptions(c)...)}
}

func (p *sdkAnthropic) name() string { return "anthropic" }

func (p *sdkAnthropic) attempt(ctx context.Context, req agent.ChatRequest, rec *exchange) (agent.ChatResponse, error) {
	params, err := p.params(req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	capture := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		return rec.capture(r, next)
	})
	resp, err := p.svc.New(ctx, params, capture)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	return sdkAnthropicResponse(resp, len(req.OutputSchema) > 0)
}

func (p *sdkAnthropic) params(req agent.ChatRequest) (anthropic.MessageNewParams, error) {
	params := anthropic.MessageNewParams{Model: anthropic.Model(p.model), MaxTokens: DefaultAnthropicMaxTokens}
	if req.MaxOutputTokens > 0 {
		params.MaxTokens = req.MaxOutputTokens
	}
	if req.Temperature != nil {
		params.Temperature = param.NewOpt(*req.Temperature)
	}
	for _, m := range req.Messages {
		var role anthropic.MessageParamRole
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case agent.RoleSystem:
			if m.Content != "" {
				params.System = append(params.System, anthropic.TextBlockParam{Text: m.Content})
			}
			continue
		case agent.RoleUser:
			role = anthropic.MessageParamRoleUser
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
		case agent.RoleTool:
			role = anthropic.MessageParamRoleUser
			blocks = append(blocks, anthropic.NewToolResultBlock(m.ToolCallID, m.Content, false))
		case agent.RoleAssistant:
			role = anthropic.MessageParamRoleAssistant
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, sdkToolInput(tc.Arguments), tc.Name))
			}
		default:
			return params, &agent.LLMError{Message: fmt.Sprintf("chat message role %q is not system, user, assistant or tool", m.Role)}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == role {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, blocks...)
			continue
		}
		params.Messages = append(params.Messages, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for _, t := range req.Tools {
		tool, err := sdkAnthropicTool(t.Name, t.Description, t.Parameters)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	if len(req.OutputSchema) > 0 {
		tool, err := sdkAnthropicTool(outputSchemaName, "Give your final answer: call this with the answer as its input.", req.OutputSchema)
		if err != nil {
			return params, err
		}
		if len(req.Tools) == 0 {
			params.ToolChoice = anthropic.ToolChoiceParamOfTool(outputSchemaName)
		} else {
			params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
		}
		params.Tools = append(params.Tools, tool)
	}
	return params, nil
}

func sdkToolInput(arguments string) any {
	var obj map[string]any
	if json.Unmarshal([]byte(arguments), &obj) != nil || obj == nil {
		return map[string]any{}
	}
	return json.RawMessage(arguments)
}

func sdkAnthropicTool(name, description string, parameters json.RawMessage) (anthropic.ToolUnionParam, error) {
	schema, err := sdkSchemaObject(parameters, "parameters of function "+name)
	if err != nil {
		return anthropic.ToolUnionParam{}, err
	}
	tool := anthropic.ToolParam{Name: name, InputSchema: toolInputSchema(schema)}
	if description != "" {
		tool.Description = param.NewOpt(description)
	}
	return anthropic.ToolUnionParam{OfTool: &tool}, nil
}

func sdkAnthropicResponse(resp *anthropic.Message, structured bool) (agent.ChatResponse, error) {
	out := agent.ChatResponse{
		Message:      agent.ChatMessage{Role: agent.RoleAssistant},
		FinishReason: wire.AnthropicFinish(string(resp.StopReason)),
		ID:           resp.ID,
		Model:        string(resp.Model),
		Usage: &agent.Usage{
			InputTokens:  resp.Usage.InputTokens + resp.Usage.CacheCreationInputTokens + resp.Usage.CacheReadInputTokens,
			OutputTokens: resp.Usage.OutputTokens,
		},
	}
	if !resp.JSON.Usage.Valid() {
		out.Usage = nil
	}
	var text []string
	var answer json.RawMessage
	for _, b := range resp.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			if structured && b.Name == outputSchemaName {
				answer = b.Input
				continue
			}
			args := string(b.Input)
			if len(b.Input) == 0 {
				args = "{}"
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, agent.ChatToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Message.Content = strings.Join(text, "")
	if answer != nil && len(out.Message.ToolCalls) == 0 {
		out.Message.Content = string(answer)
		out.FinishReason = "stop"
	}
	if len(resp.Content) == 0 && resp.StopReason == "" {
		return agent.ChatResponse{}, &agent.LLMError{Message: "its answer has no content and no stop_reason"}
	}
	return out, nil
}

// anthropicMessage is a Messages answer.
const anthropicMessage = `{"id":"msg_9","type":"message","role":"assistant","model":"test-model-1-2026","content":[` +
	`{"type":"text","text":"Both ","citations":null},{"type":"text","text":"are refunded."}],"stop_reason":"end_turn","stop_sequence":null,` +
	`"usage":{"input_tokens":321,"output_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":7,"service_tier":"standard"}}`

func TestAnthropicRequestsAsTheSDKSentThem(t *testing.T) {
	plain := richRequest()
	plain.Temperature, plain.MaxOutputTokens, plain.Tools = nil, 0, nil
	bad := func(f func(*agent.ChatRequest)) agent.ChatRequest {
		r := richRequest()
		f(&r)
		return r
	}
	cases := map[string]agent.ChatRequest{
		"rich":                     richRequest(),
		"output schema alone":      plain,
		"without an output schema": bad(func(r *agent.ChatRequest) { r.OutputSchema = nil }),
		"schemas of every shape": bad(func(r *agent.ChatRequest) {
			r.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":null,"required":["id",3,null],"$defs":{"a":{"type":"string"}},"description":"x"}`)
			r.Tools[1].Parameters = json.RawMessage(`{"properties":{"a":{}},"required":[]}`)
			r.Tools[2].Parameters = json.RawMessage(`{"type":"string","required":"a"}`)
			r.OutputSchema = json.RawMessage(`{}`)
		}),
		"arguments not objects": bad(func(r *agent.ChatRequest) {
			r.Messages[2].ToolCalls[0].Arguments = `[1]`
			r.Messages[2].ToolCalls[1].Arguments = `null`
			r.Messages[5].ToolCalls[0].Arguments = `{"a":`
		}),
		"parameters an array":     bad(func(r *agent.ChatRequest) { r.Tools[0].Parameters = json.RawMessage(`[{"type":"object"}]`) }),
		"output schema null":      bad(func(r *agent.ChatRequest) { r.OutputSchema = json.RawMessage(`null`) }),
		"a role of no provider":   bad(func(r *agent.ChatRequest) { r.Messages[1].Role = "critic" }),
		"only a system message":   {Messages: []agent.ChatMessage{{Role: agent.RoleSystem, Content: "be brief"}}},
		"max_tokens to stream":    bad(func(r *agent.ChatRequest) { r.MaxOutputTokens = 64000 }),
		"max_tokens just allowed": bad(func(r *agent.ChatRequest) { r.MaxOutputTokens = 21333 }),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			own, viaSDK := bothWays(t, model.Anthropic, newSDKAnthropic, req, rawAnswer{200, "application/json", anthropicMessage})
			compareOutcomes(t, own, viaSDK)
		})
	}
}

func TestAnthropicAnswersReadAsTheSDKReadThem(t *testing.T) {
	js := "application/json"
	structured := richRequest()
	plain := richRequest()
	plain.OutputSchema = nil
	cases := map[string]struct {
		req agent.ChatRequest
		ans rawAnswer
	}{
		"text blocks with usage": {plain, rawAnswer{200, js, anthropicMessage}},
		"tool calls": {plain, rawAnswer{200, js, `{"id":"msg_2","type":"message","model":"m","content":[{"type":"thinking","thinking":"hm","signature":"s"},` +
			`{"type":"text","text":"Refunding."},{"type":"tool_use","id":"toolu_1","name":"payments__refund","input":{"id":"p1"}},` +
			`{"type":"tool_use","id":"toolu_2","name":"payments__get"},{"type":"tool_use","id":"toolu_3","name":"x","input":null},` +
			`{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}`}},
		"the final answer": {structured, rawAnswer{200, js, `{"id":"msg_3","model":"m","content":[{"type":"text","text":"Here."},` +
			`{"type":"tool_use","id":"toolu_9","name":"final_answer","input":{"refunded":["p1"]}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}`}},
		"the final answer beside a call": {structured, rawAnswer{200, js, `{"id":"msg_3","model":"m","content":[` +
			`{"type":"tool_use","id":"toolu_9","name":"final_answer","input":{"refunded":["p1"]}},{"type":"tool_use","id":"toolu_8","name":"payments__get","input":{}}],"stop_reason":"tool_use"}`}},
		"the final answer null": {structured, rawAnswer{200, js, `{"id":"msg_3","model":"m","content":[{"type":"text","text":"Here."},` +
			`{"type":"tool_use","id":"toolu_9","name":"final_answer","input":null}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}`}},
		"without usage":            {plain, rawAnswer{200, js, `{"id":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"max_tokens"}`}},
		"usage null":               {plain, rawAnswer{200, js, `{"id":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"refusal","usage":null}`}},
		"no content, a stop":       {plain, rawAnswer{200, js, `{"id":"m","content":[],"stop_reason":"end_turn"}`}},
		"no content and no stop":   {plain, rawAnswer{200, js, `{"id":"m","content":[],"stop_reason":null}`}},
		"not JSON":                 {plain, rawAnswer{200, js, `{"content":[}`}},
		"an HTML page":             {plain, rawAnswer{200, "text/html", `<html>gateway</html>`}},
		"JSON sent as text/plain":  {plain, rawAnswer{200, "text/plain", anthropicMessage}},
		"400 in Anthropic's words": {plain, rawAnswer{400, js, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}`}},
		"404":                      {plain, rawAnswer{404, js, `{"type":"error","error":{"type":"not_found_error","message":"model: test-model-1"}}`}},
		"529 retried":              {plain, rawAnswer{529, js, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}},
		"500 as HTML, retried":     {plain, rawAnswer{500, "text/html", `<html>oops</html>`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			own, viaSDK := bothWays(t, model.Anthropic, newSDKAnthropic, tc.req, tc.ans)
			compareOutcomes(t, own, viaSDK)
		})
	}
}
