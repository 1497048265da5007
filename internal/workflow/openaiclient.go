package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
)

// OpenAIDefault is the server-wide default model (the --llm-* flags) served
// by agent.OpenAIPlanner, standing in as Options.Models and Options.LLM
// until the llm package's pool and the model registry are wired. It reads
// the usage, finish reason, id and model off the SDK's raw response.
type OpenAIDefault struct {
	planner *agent.OpenAIPlanner
	model   string
}

// NewOpenAIDefault serves modelID at baseURL as the model named default.
func NewOpenAIDefault(baseURL, modelID, apiKey string, hc *http.Client) *OpenAIDefault {
	c := *hc
	c.Transport = &capturing{next: cmpTransport(hc.Transport)}
	return &OpenAIDefault{planner: agent.NewOpenAIPlanner(baseURL, modelID, apiKey, &c), model: modelID}
}

// Model implements model.Lookup: default is the only model.
func (d *OpenAIDefault) Model(_ context.Context, tenant, name string) (*model.Model, error) {
	if name != model.DefaultName {
		return nil, problem.New(problem.NotFound, "no model named %q", name)
	}
	return &model.Model{Tenant: tenant, Name: name, Provider: model.OpenAI, Model: d.model}, nil
}

// Client implements llm.Clients.
func (d *OpenAIDefault) Client(*model.Model) (llm.Client, error) { return d, nil }

// Complete implements llm.Client.
func (d *OpenAIDefault) Complete(ctx context.Context, req agent.ChatRequest) (agent.ChatResponse, error) {
	raw := &bytes.Buffer{}
	resp, err := d.planner.Complete(context.WithValue(ctx, captureKey{}, raw), 0, 0, req)
	if err != nil {
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		return resp, &agent.LLMError{Message: strings.TrimPrefix(err.Error(), "chat completion 0: ")}
	}
	var body struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(raw.Bytes(), &body) == nil {
		resp.ID, resp.Model = body.ID, body.Model
		if len(body.Choices) > 0 {
			resp.FinishReason = body.Choices[0].FinishReason
		}
		if body.Usage != nil {
			resp.Usage = &agent.Usage{InputTokens: body.Usage.PromptTokens, OutputTokens: body.Usage.CompletionTokens}
		}
	}
	return resp, nil
}

type captureKey struct{}

// capturing keeps a copy of each response body in the buffer its request's
// context carries (the last try's, when the SDK retries).
type capturing struct{ next http.RoundTripper }

func (c *capturing) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	buf, ok := r.Context().Value(captureKey{}).(*bytes.Buffer)
	if err != nil || !ok {
		return resp, err
	}
	buf.Reset()
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, buf), resp.Body}
	return resp, nil
}

func cmpTransport(t http.RoundTripper) http.RoundTripper {
	if t == nil {
		return http.DefaultTransport
	}
	return t
}
