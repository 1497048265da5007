// Package goagent is an external agent written in Go with no framework: a
// loop over the OpenAI Chat Completions API (openai-go) whose tools come
// from the run gateway's MCP server (the MCP Go SDK). agentplane invokes it
// over HTTP; everything it asks a model or a tool goes through the gateway.
package goagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Invocation is what agentplane POSTs to an external agent.
type Invocation struct {
	Run struct {
		ID      string `json:"id"`
		Attempt int    `json:"attempt"`
	} `json:"run"`
	Goal    string          `json:"goal"`
	Context json.RawMessage `json:"context"`
	Gateway struct {
		Token         string `json:"token"`
		OpenAIBaseURL string `json:"openai_base_url"`
		MCPURL        string `json:"mcp_url"`
	} `json:"gateway"`
}

// Handler answers agentplane's invocations with the model named model
// (one of the version's models), taking at most maxTurns completions.
func Handler(model string, maxTurns int) http.Handler {
	return NewHandler(Options{Model: model, MaxTurns: maxTurns})
}

// Options configure an agent.
type Options struct {
	// Model names one of the version's models; MaxTurns bounds the
	// completions of a run.
	Model    string
	MaxTurns int
	// Instructions, when set, are the system message of every completion.
	Instructions string
}

// NewHandler answers agentplane's invocations as opts says.
func NewHandler(opts Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in Invocation
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "not an invocation: "+err.Error(), http.StatusBadRequest)
			return
		}
		answer, err := RunWith(r.Context(), in, opts)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"output": map[string]any{"answer": answer}, "outcome": "answered"})
	})
}

// Run works on one invocation's goal and returns the model's final answer.
func Run(ctx context.Context, in Invocation, model string, maxTurns int) (string, error) {
	return RunWith(ctx, in, Options{Model: model, MaxTurns: maxTurns})
}

// RunWith is Run as opts says.
func RunWith(ctx context.Context, in Invocation, opts Options) (string, error) {
	model, maxTurns := opts.Model, opts.MaxTurns
	// The four lines that point an agent at the gateway: the model
	// client's base URL and key, the MCP client's URL and token.
	llm := openai.NewClient(option.WithBaseURL(in.Gateway.OpenAIBaseURL), option.WithAPIKey(in.Gateway.Token))
	transport := &mcp.StreamableClientTransport{Endpoint: in.Gateway.MCPURL,
		HTTPClient: &http.Client{Transport: bearer{token: in.Gateway.Token}}, DisableStandaloneSSE: true}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "goagent", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		return "", fmt.Errorf("connect to the gateway's MCP server: %w", err)
	}
	defer session.Close()

	listed, err := session.ListTools(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("list tools: %w", err)
	}
	var tools []openai.ChatCompletionToolUnionParam
	for _, t := range listed.Tools {
		var params openai.FunctionParameters
		raw, _ := json.Marshal(t.InputSchema)
		_ = json.Unmarshal(raw, &params)
		tools = append(tools, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: params}))
	}
	var messages []openai.ChatCompletionMessageParamUnion
	if opts.Instructions != "" {
		messages = append(messages, openai.SystemMessage(opts.Instructions))
	}
	messages = append(messages, openai.UserMessage(in.Goal))
	for range maxTurns {
		resp, err := llm.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: messages, Tools: tools})
		var refused *openai.Error
		if errors.As(err, &refused) {
			return "", fmt.Errorf("completion: the gateway answered %d: %s", refused.StatusCode, refused.Message)
		}
		if err != nil {
			return "", fmt.Errorf("completion: %w", err)
		}
		if len(resp.Choices) == 0 {
			return "", fmt.Errorf("the model answered no choice")
		}
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			return msg.Content, nil
		}
		messages = append(messages, msg.ToParam())
		for _, call := range msg.ToolCalls {
			// The arguments go on as the model wrote them: decoded into
			// a map, an id past 2^53 would lose its last digits.
			var args json.RawMessage
			if json.Valid([]byte(call.Function.Arguments)) {
				args = json.RawMessage(call.Function.Arguments)
			}
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: call.Function.Name, Arguments: args})
			if err != nil {
				return "", fmt.Errorf("call %s: %w", call.Function.Name, err)
			}
			messages = append(messages, openai.ToolMessage(text(res), call.ID))
		}
	}
	return "", fmt.Errorf("no answer after %d turns", maxTurns)
}

// text is a tool result's text, for the model.
func text(res *mcp.CallToolResult) string {
	var out string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out += t.Text
		}
	}
	return out
}

// bearer sends the run token with every MCP request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
