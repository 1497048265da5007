package model

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// Registration is the body of POST /v1/models and PUT /v1/models/{name}.
type Registration struct {
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	BaseURL  string            `json:"base_url"`
	Model    string            `json:"model"`
	Auth     *Auth             `json:"auth,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	// HTTP2PriorKnowledge is Model.HTTP2PriorKnowledge, for http://
	// base URLs only.
	HTTP2PriorKnowledge bool `json:"http2_prior_knowledge,omitempty"`
	// Timeout is a Go duration ("120s", "2m"); default DefaultTimeout.
	Timeout          string `json:"timeout,omitempty"`
	MaxConcurrency   int    `json:"max_concurrency,omitempty"`
	Price            *Price `json:"price,omitempty"`
	DailyTokenBudget int64  `json:"daily_token_budget,omitempty"`
}

var (
	// NameRE is the rule of model names (SPEC §1).
	NameRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
	// headerRE is an HTTP header name (RFC 9110 token).
	headerRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
)

// Limits of a registration.
const (
	maxHeaders        = 32
	maxHeaderValue    = 4096
	maxModelID        = 256
	maxConcurrencyCap = 100000
	maxPricePerMTok   = 1e6
)

// credentialHeaders carry credentials; a model's secret goes in auth, by
// reference, never in headers.
var credentialHeaders = []string{"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"}

// DefaultHeader is the header an api_key goes in when auth.header is not
// given: the one the provider documents.
func DefaultHeader(provider string) string {
	if provider == Anthropic {
		return "x-api-key"
	}
	return "Authorization"
}

// fieldErrors collects the broken rules of a body.
type fieldErrors []problem.FieldError

func (e *fieldErrors) add(field, format string, args ...any) {
	*e = append(*e, problem.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Build checks reg and returns the model it describes, without id, tenant,
// revision or times. Each broken rule is a field of one
// problem.ValidationFailed, but a base_url of another scheme than http or
// https, which is problem.URLNotAllowed; the secrets reference and the
// address of base_url are checked by the Service.
func Build(reg Registration) (*Model, error) {
	if u, err := url.Parse(reg.BaseURL); err == nil && u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https" {
		return nil, problem.New(problem.URLNotAllowed, "base_url: scheme %q is not allowed: use http or https", u.Scheme)
	}
	var errs fieldErrors
	m := &Model{
		Name: reg.Name, Provider: reg.Provider, BaseURL: reg.BaseURL, Model: reg.Model,
		Headers: reg.Headers, MaxConcurrency: reg.MaxConcurrency, DailyTokenBudget: reg.DailyTokenBudget,
		HTTP2PriorKnowledge: reg.HTTP2PriorKnowledge,
	}
	switch {
	case reg.Name == "":
		errs.add("name", "is required")
	case reg.Name == DefaultName:
		errs.add("name", "%q is reserved for the server-wide model (agentplane serve --llm-*); choose another name", DefaultName)
	case !NameRE.MatchString(reg.Name):
		errs.add("name", "must match %s", NameRE)
	}
	switch reg.Provider {
	case OpenAI, Anthropic:
	case "":
		errs.add("provider", "is required: openai (Chat Completions, also Azure OpenAI, Ollama, vLLM, LiteLLM) or anthropic (Messages)")
	default:
		errs.add("provider", "must be openai or anthropic, not %q", reg.Provider)
	}
	if msg := checkBaseURL(reg.BaseURL); msg != "" {
		errs.add("base_url", "%s", msg)
	} else if u, _ := url.Parse(reg.BaseURL); reg.HTTP2PriorKnowledge && u.Scheme != "http" {
		errs.add("http2_prior_knowledge", "applies to an http:// base_url only: over https, HTTP/2 is negotiated in the TLS handshake (ALPN) whenever the server speaks it")
	}
	switch {
	case strings.TrimSpace(reg.Model) == "":
		errs.add("model", "is required: the provider's model id, such as gpt-4o-mini or claude-sonnet-4-5")
	case len(reg.Model) > maxModelID || strings.ContainsFunc(reg.Model, isControl):
		errs.add("model", "must be at most %d characters without control characters", maxModelID)
	}
	m.Auth = checkAuth(&errs, reg.Auth)
	checkHeaders(&errs, reg.Headers, m.Auth)
	m.Timeout = checkTimeout(&errs, reg.Timeout)
	if reg.MaxConcurrency < 0 || reg.MaxConcurrency > maxConcurrencyCap {
		errs.add("max_concurrency", "must be between 0 (no bound) and %d", maxConcurrencyCap)
	}
	if reg.DailyTokenBudget < 0 {
		errs.add("daily_token_budget", "must be 0 (no bound) or more")
	}
	m.Price = checkPrice(&errs, reg.Price)
	if len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	return m, nil
}

// checkBaseURL returns what is wrong with a base_url, or "".
func checkBaseURL(raw string) string {
	if raw == "" {
		return "is required: the API root, such as https://api.openai.com/v1"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs():
		return "must be an absolute http or https URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case u.User != nil:
		return "must not carry a user name or password; put the credential in auth.secrets_ref"
	case u.RawQuery != "" || u.ForceQuery:
		return "must not have a query; an API key goes in auth, other parameters in headers"
	case u.Fragment != "":
		return "must not have a fragment"
	}
	return ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// checkAuth returns the auth with its default type filled in.
func checkAuth(errs *fieldErrors, a *Auth) Auth {
	if a == nil {
		return Auth{Type: AuthNone}
	}
	out := *a
	if out.Type == "" {
		out.Type = AuthNone
	}
	switch out.Type {
	case AuthNone:
		if out.SecretsRef != "" {
			errs.add("auth.secrets_ref", "is not used when auth.type is none; set auth.type to bearer or api_key")
		}
	case AuthBearer, AuthAPIKey:
		if out.SecretsRef == "" {
			errs.add("auth.secrets_ref", "is required when auth.type is %s: a reference such as env://OPENAI_API_KEY", out.Type)
		}
	default:
		errs.add("auth.type", "must be one of none, bearer, api_key, not %q", out.Type)
	}
	if out.Header != "" {
		switch {
		case out.Type != AuthAPIKey:
			errs.add("auth.header", "is used only when auth.type is api_key")
		case !headerRE.MatchString(out.Header):
			errs.add("auth.header", "must be an HTTP header name, such as api-key")
		}
	}
	return out
}

func checkHeaders(errs *fieldErrors, h map[string]string, a Auth) {
	if len(h) > maxHeaders {
		errs.add("headers", "has %d headers, over the limit of %d", len(h), maxHeaders)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(h)) {
		field := "headers." + name
		lower := strings.ToLower(name)
		switch {
		case !headerRE.MatchString(name):
			errs.add(field, "is not an HTTP header name")
		case slices.Contains(credentialHeaders, lower) || (a.Header != "" && strings.EqualFold(a.Header, name)):
			errs.add(field, "carries a credential: give it as auth {type: bearer or api_key, secrets_ref} instead, so the secret is never stored")
		case lower == "host" || lower == "content-length" || lower == "content-type" || lower == "transfer-encoding":
			errs.add(field, "is set by the server and cannot be overridden")
		case len(h[name]) > maxHeaderValue || strings.ContainsFunc(h[name], func(r rune) bool { return isControl(r) && r != '\t' }):
			errs.add(field, "must be at most %d characters without control characters", maxHeaderValue)
		}
	}
}

func checkTimeout(errs *fieldErrors, s string) time.Duration {
	if s == "" {
		return DefaultTimeout
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		errs.add("timeout", "must be a duration such as \"120s\" or \"2m\", not %q", s)
	case d <= 0:
		errs.add("timeout", "must be more than 0")
	case d > MaxTimeout:
		errs.add("timeout", "must be at most %s", "15m")
	}
	return d
}

func checkPrice(errs *fieldErrors, p *Price) *Price {
	if p == nil {
		return nil
	}
	out := *p
	for _, f := range []struct {
		name string
		v    float64
	}{{"price.input_per_mtok", p.InputPerMTok}, {"price.output_per_mtok", p.OutputPerMTok}} {
		if f.v < 0 || f.v > maxPricePerMTok || math.IsNaN(f.v) {
			errs.add(f.name, "must be between 0 and %g (the price of a million tokens)", float64(maxPricePerMTok))
		}
	}
	if out.Currency == "" {
		out.Currency = DefaultCurrency
	} else if !currencyRE.MatchString(out.Currency) {
		errs.add("price.currency", "must be an ISO 4217 code in capitals, such as USD or EUR, not %q", out.Currency)
	}
	return &out
}

// ServerDefault is the server-wide model DefaultName that the --llm-*
// flags define: provider (openai when ""), baseURL, modelID and
// http2PriorKnowledge checked as a registration's, authenticated with
// apiKeyRef when it is given (bearer for openai, the x-api-key header for
// anthropic).
func ServerDefault(provider, baseURL, modelID, apiKeyRef string, http2PriorKnowledge bool) (*Model, error) {
	if provider == "" {
		provider = OpenAI
	}
	reg := Registration{Name: "server-default", Provider: provider, BaseURL: baseURL, Model: modelID,
		HTTP2PriorKnowledge: http2PriorKnowledge}
	if apiKeyRef != "" {
		reg.Auth = &Auth{Type: AuthBearer, SecretsRef: apiKeyRef}
		if provider == Anthropic {
			reg.Auth.Type = AuthAPIKey
		}
	}
	m, err := Build(reg)
	if err != nil {
		return nil, err
	}
	m.ID, m.Name, m.Revision = DefaultID, DefaultName, 1
	return m, nil
}
