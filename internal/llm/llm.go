// Package llm calls the models agents use: a Client per registered model,
// speaking its provider's wire format (bodies encoded and answers read
// here; Chat Completions sent as one POST through the outbound client,
// Messages through the official anthropic-sdk-go), with the
// model's own timeout, retries, concurrency bound, GenAI spans and metrics.
// The same per-model client relays external agents' own requests in the
// providers' wire formats (Relayer), and Normalize reads such an exchange
// as a completion.
package llm

import (
	"context"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
)

// Client requests completions of one model. req.Model names the registered
// model and is not sent; the provider's model id is. A failure of the
// model (a provider error, an unusable answer, a time-out of its own) is an
// *agent.LLMError carrying the provider's words; the context's own end is
// returned as the context's error, with, when the provider had read the
// request and no answer came, a response holding its Usage alone (the
// input estimated from the request, no output).
type Client interface {
	Complete(ctx context.Context, req agent.ChatRequest) (agent.ChatResponse, error)
}

// Clients gives the client of a model, made once per model revision.
type Clients interface {
	Client(m *model.Model) (Client, error)
}

// ClientFunc is a Client made of a function.
type ClientFunc func(ctx context.Context, req agent.ChatRequest) (agent.ChatResponse, error)

// Complete implements Client.
func (f ClientFunc) Complete(ctx context.Context, req agent.ChatRequest) (agent.ChatResponse, error) {
	return f(ctx, req)
}

// SameClient is Clients giving every model c.
func SameClient(c Client) Clients { return sameClient{c} }

type sameClient struct{ c Client }

func (s sameClient) Client(*model.Model) (Client, error) { return s.c, nil }
