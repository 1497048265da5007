// Package model is the registry of the LLM endpoints a tenant's agents may
// use (SPEC §4 "Models and LLM agents"). A Model names a provider's API
// root, the provider's model id, how to authenticate (by secret reference
// only) and what its tokens cost; agents and plan steps name it.
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
)

// Providers: the wire format a model speaks.
const (
	// OpenAI is the Chat Completions API with tool calling (OpenAI, Azure
	// OpenAI's v1 endpoint, Ollama, vLLM, LiteLLM, …).
	OpenAI = "openai"
	// Anthropic is the Messages API with tool use.
	Anthropic = "anthropic"
)

// Authentication schemes of a model endpoint.
const (
	AuthNone   = "none"
	AuthBearer = "bearer"
	AuthAPIKey = "api_key"
)

// DefaultName is the server-wide model the --llm-* flags define; every
// tenant may use it, and none may register a model of that name.
const DefaultName = "default"

// DefaultID is the id of the server-wide model.
const DefaultID = "mdl_default"

// Limits and defaults.
const (
	DefaultTimeout = 120 * time.Second
	MaxTimeout     = 15 * time.Minute
	// DefaultCurrency is a price's currency when none is given.
	DefaultCurrency = "USD"
)

// Auth is how calls authenticate to the model's endpoint. SecretsRef is a
// reference (env://, file://, vault://); the secret is never stored.
type Auth struct {
	Type       string `json:"type"`
	SecretsRef string `json:"secrets_ref,omitempty"`
	// Header names the header an api_key goes in (default: the provider's
	// own, Authorization for openai and x-api-key for anthropic).
	Header string `json:"header,omitempty"`
}

// Price is what a million tokens cost, each way.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
	Currency      string  `json:"currency,omitempty"`
}

// Cost is the price of a completion's tokens.
func (p *Price) Cost(inputTokens, outputTokens int64) float64 {
	if p == nil {
		return 0
	}
	return (float64(inputTokens)*p.InputPerMTok + float64(outputTokens)*p.OutputPerMTok) / 1e6
}

// Model is a registered LLM endpoint.
type Model struct {
	ID       string `json:"id"`
	Tenant   string `json:"-"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// BaseURL is the API root as the provider documents it
	// ("https://api.openai.com/v1", "http://127.0.0.1:11434/v1").
	BaseURL string `json:"base_url"`
	// Model is the provider's model id ("gpt-4o-mini", "claude-sonnet-4-5").
	Model string `json:"model"`
	Auth  Auth   `json:"auth"`
	// Headers are sent with every request (no secrets: use Auth).
	Headers map[string]string `json:"headers,omitempty"`
	// HTTP2PriorKnowledge has requests to an http:// BaseURL speak HTTP/2
	// without TLS from their first byte (h2c with prior knowledge, RFC
	// 9113 §3.3), so the requests in flight share a few connections; the
	// server must speak it. An https:// BaseURL negotiates HTTP/2 by ALPN
	// without it.
	HTTP2PriorKnowledge bool `json:"http2_prior_knowledge,omitempty"`
	// Timeout bounds one request, retries excluded (default 120s, at most 15m).
	Timeout time.Duration `json:"-"`
	// MaxConcurrency bounds this replica's requests in flight (0: no bound).
	MaxConcurrency int    `json:"max_concurrency,omitempty"`
	Price          *Price `json:"price,omitempty"`
	// DailyTokenBudget bounds the tenant's tokens (input + output) per UTC
	// day through this model (0: no bound).
	DailyTokenBudget int64     `json:"daily_token_budget,omitempty"`
	Revision         int       `json:"revision"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// Lookup finds the model an agent names, in the tenant's registry or the
// server-wide default. A name neither holds is problem.NotFound.
type Lookup interface {
	Model(ctx context.Context, tenant, name string) (*Model, error)
}

// modelJSON is a Model as JSON: the timeout as a Go duration string
// ("120s", "2m30s"), which the struct's own field cannot be, and times as
// the API writes them (UTC, milliseconds, a Z).
type modelJSON struct {
	*modelFields
	Timeout   string `json:"timeout"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// timeFormat is the API's timestamp form.
const timeFormat = "2006-01-02T15:04:05.000Z"

// modelFields is Model without its methods, so encoding it does not recurse.
type modelFields Model

// MarshalJSON writes the model with its timeout as a duration string.
func (m Model) MarshalJSON() ([]byte, error) {
	f := modelFields(m)
	return json.Marshal(modelJSON{modelFields: &f, Timeout: m.Timeout.String(),
		CreatedAt: m.CreatedAt.UTC().Format(timeFormat), UpdatedAt: m.UpdatedAt.UTC().Format(timeFormat)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Model) UnmarshalJSON(data []byte) error {
	v := modelJSON{modelFields: (*modelFields)(m)}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	m.Timeout = 0
	if v.Timeout != "" {
		d, err := time.ParseDuration(v.Timeout)
		if err != nil {
			return fmt.Errorf("timeout: %w", err)
		}
		m.Timeout = d
	}
	for _, t := range []struct {
		s   string
		dst *time.Time
	}{{v.CreatedAt, &m.CreatedAt}, {v.UpdatedAt, &m.UpdatedAt}} {
		*t.dst = time.Time{}
		if t.s == "" {
			continue
		}
		p, err := time.Parse(time.RFC3339Nano, t.s)
		if err != nil {
			return fmt.Errorf("time %q: %w", t.s, err)
		}
		*t.dst = p.UTC()
	}
	return nil
}

// ListOptions pages through a tenant's models, ordered by name.
type ListOptions struct {
	Limit int
	// After is the name of the last model of the previous page.
	After string
}

// Store keeps the registry. Every write stores its audit record in the
// same transaction.
type Store interface {
	// CreateModel stores m; problem.Conflict when its name is taken.
	CreateModel(ctx context.Context, m *Model, rec *audit.Record) error
	// UpdateModel replaces the model of m's tenant and id, whose stored
	// revision must be m.Revision-1: problem.Conflict when another update
	// came first.
	UpdateModel(ctx context.Context, m *Model, rec *audit.Record) error
	// DeleteModel deletes a model by name; problem.Conflict while an agent
	// version names it.
	DeleteModel(ctx context.Context, tenant, name string, rec *audit.Record) error
	// ModelByName returns a model, or problem.NotFound.
	ModelByName(ctx context.Context, tenant, name string) (*Model, error)
	// ListModels returns models ordered by name.
	ListModels(ctx context.Context, tenant string, opt ListOptions) ([]*Model, error)
}

// EncodeColumns is how stores keep a model's structured fields: auth and
// headers as JSON objects, price as a JSON object or null.
func EncodeColumns(m *Model) (auth, headers, price []byte, err error) {
	if auth, err = json.Marshal(m.Auth); err != nil {
		return nil, nil, nil, fmt.Errorf("encode model auth: %w", err)
	}
	h := m.Headers
	if h == nil {
		h = map[string]string{}
	}
	if headers, err = json.Marshal(h); err != nil {
		return nil, nil, nil, fmt.Errorf("encode model headers: %w", err)
	}
	if price, err = json.Marshal(m.Price); err != nil {
		return nil, nil, nil, fmt.Errorf("encode model price: %w", err)
	}
	return auth, headers, price, nil
}

// DecodeColumns reads what EncodeColumns wrote into m.
func DecodeColumns(m *Model, auth, headers, price []byte) error {
	if err := json.Unmarshal(auth, &m.Auth); err != nil {
		return fmt.Errorf("decode model auth: %w", err)
	}
	if err := json.Unmarshal(headers, &m.Headers); err != nil {
		return fmt.Errorf("decode model headers: %w", err)
	}
	if len(m.Headers) == 0 {
		m.Headers = nil
	}
	if err := json.Unmarshal(price, &m.Price); err != nil {
		return fmt.Errorf("decode model price: %w", err)
	}
	return nil
}

// LookupFunc is a Lookup made of a function.
type LookupFunc func(ctx context.Context, tenant, name string) (*Model, error)

// Model implements Lookup.
func (f LookupFunc) Model(ctx context.Context, tenant, name string) (*Model, error) {
	return f(ctx, tenant, name)
}
