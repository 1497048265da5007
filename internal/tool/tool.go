// Package tool is the registry of the APIs agents may call: a Tool is an API
// registered from its OpenAPI, GraphQL or SOAP specification; its Operations
// are what a caller can invoke, each with the binding needed to call it.
// The importers in the subpackages turn a document into a Spec.
package tool

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/redact"
)

// Kinds of specification.
const (
	OpenAPI = "openapi"
	GraphQL = "graphql"
	SOAP    = "soap"
	// MCP is an MCP server reached over Streamable HTTP: its tools are the
	// operations.
	MCP = "mcp"
	// A2A is a remote A2A agent, registered by its agent card: its skills
	// are the operations.
	A2A = "a2a"
)

// Authentication schemes of a tool's backing API.
const (
	AuthNone   = "none"
	AuthOAuth2 = "oauth2"
	AuthAPIKey = "api_key"
	AuthBearer = "bearer"
	AuthBasic  = "basic"
)

// Operation kinds.
const (
	Read  = "read"
	Write = "write"
)

// Auth configures how calls authenticate to the backing API. SecretsRef is a
// reference (env://, file://, vault://); the secret itself is never stored.
type Auth struct {
	Type       string   `json:"type"`
	SecretsRef string   `json:"secrets_ref,omitempty"`
	ClientID   string   `json:"client_id,omitempty"`
	TokenURL   string   `json:"token_url,omitempty"`
	Scopes     []string `json:"scopes,omitempty"`
	// Header names the API-key header (api_key); default X-API-Key.
	Header string `json:"header,omitempty"`
	// In is where an api_key goes: header (default) or query.
	In string `json:"in,omitempty"`
	// Name is the api_key's query parameter name when In is query.
	Name string `json:"name,omitempty"`
}

// Tool is a registered API.
type Tool struct {
	ID                 string   `json:"id"`
	Tenant             string   `json:"-"`
	Name               string   `json:"name"`
	Type               string   `json:"type"`
	SpecURL            string   `json:"spec_url,omitempty"`
	EndpointURL        string   `json:"endpoint_url,omitempty"`
	Auth               Auth     `json:"auth"`
	PolicyClass        string   `json:"policy_class"`
	SideEffects        []string `json:"side_effects"`
	IdempotencySupport bool     `json:"idempotency_support"`
	// Limits protect the backing API; OperationLimits override them per
	// operation id.
	Limits          *Limits           `json:"limits,omitempty"`
	OperationLimits map[string]Limits `json:"operation_limits,omitempty"`
	// Redact is what of the tool's calls is masked before it is stored or
	// sent on; a workflow masks by the revision it started with.
	Redact *redact.Config `json:"redact,omitempty"`
	// Refresh is how often the scheduler refreshes the tool's description
	// (a Go duration, "" for never).
	Refresh string `json:"refresh,omitempty"`
	// RefreshDue is when the scheduled refresh is next due, as the store
	// keeps it (zero without one); only DueToolRefreshes sets it.
	RefreshDue     time.Time `json:"-"`
	SpecSHA256     string    `json:"spec_sha256"`
	Revision       int       `json:"revision"`
	OperationCount int       `json:"operations"`
	IndexedAt      time.Time `json:"indexed_at"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// BaseURL is where calls go: EndpointURL if set, else the spec's server.
	BaseURL string `json:"base_url,omitempty"`
	// TokenURL found in the spec (OpenAPI oauth2 client credentials).
	SpecTokenURL string `json:"-"`
	// Warnings are the importer's, from the registration or update that
	// indexed the tool; they are not stored.
	Warnings []string `json:"-"`
}

// ScopeRequired is the scope a caller needs to use the tool.
func (t *Tool) ScopeRequired() string { return "tool:" + t.Name }

// Operation is one invocable operation of a tool.
type Operation struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Summary     string          `json:"summary,omitempty"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input_schema,omitempty"`
	Output      json.RawMessage `json:"output_schema,omitempty"`
	// Exactly one binding is set, by the tool's type.
	HTTP    *HTTPBinding    `json:"http,omitempty"`
	GraphQL *GraphQLBinding `json:"graphql,omitempty"`
	SOAP    *SOAPBinding    `json:"soap,omitempty"`
	MCP     *MCPBinding     `json:"mcp,omitempty"`
	A2A     *A2ABinding     `json:"a2a,omitempty"`
}

// ArgumentNames are the names a call of the operation may pass, the ones
// its binding knows; nil when it takes other names too (an HTTP request
// body's members, an MCP tool's arguments), where only the call can tell.
func (op *Operation) ArgumentNames() []string {
	names := []string{}
	switch {
	case op.HTTP != nil && op.HTTP.Body == nil:
		for _, p := range op.HTTP.Params {
			names = append(names, p.Name)
		}
	case op.GraphQL != nil:
		for _, a := range op.GraphQL.Args {
			names = append(names, a.Name)
		}
	case op.SOAP != nil:
		for _, p := range op.SOAP.Parts {
			names = append(names, p.Name)
		}
	default:
		return nil
	}
	return names
}

// MCPBinding is how to call an MCP server's tool: tools/call of Name at the
// tool's base URL.
type MCPBinding struct {
	Name string `json:"name"`
}

// A2ABinding is how to call a remote A2A agent's skill: a blocking
// SendMessage to the JSON-RPC endpoint at the tool's base URL.
type A2ABinding struct {
	Skill string `json:"skill"`
	// InputModes and OutputModes are the media types the skill takes and
	// answers (its own, else the card's defaults), compared by a refresh.
	InputModes  []string `json:"input_modes,omitempty"`
	OutputModes []string `json:"output_modes,omitempty"`
}

// HTTPBinding is how to call an OpenAPI operation.
type HTTPBinding struct {
	Method string  `json:"method"`
	Path   string  `json:"path"`
	Params []Param `json:"params,omitempty"`
	// Body is nil when the operation takes no request body.
	Body *Body `json:"body,omitempty"`
	// Security lists scheme names from the spec that the operation requires.
	Security []string `json:"security,omitempty"`
}

// Param is an OpenAPI path, query or header parameter.
type Param struct {
	Name     string          `json:"name"`
	In       string          `json:"in"`
	Required bool            `json:"required,omitempty"`
	Schema   json.RawMessage `json:"schema,omitempty"`
}

// Body is an OpenAPI request body.
type Body struct {
	Required    bool            `json:"required,omitempty"`
	ContentType string          `json:"content_type"`
	Schema      json.RawMessage `json:"schema,omitempty"`
}

// GraphQLBinding is how to call a GraphQL root field.
type GraphQLBinding struct {
	// Root is "query" or "mutation".
	Root  string `json:"root"`
	Field string `json:"field"`
	Args  []Arg  `json:"args,omitempty"`
	// Selection is a bounded selection set for the field's type, outer
	// braces included: "{ id name owner { id } }"; "" for a scalar or enum
	// result.
	Selection string `json:"selection,omitempty"`
}

// Arg is a GraphQL field argument.
type Arg struct {
	Name string `json:"name"`
	// Type is the GraphQL type reference, e.g. "ID!" or "[String!]".
	Type     string `json:"type"`
	Required bool   `json:"required,omitempty"`
}

// SOAPBinding is how to call a SOAP operation.
type SOAPBinding struct {
	// Version is "1.1" or "1.2".
	Version string `json:"version"`
	Action  string `json:"action,omitempty"`
	// Style is "document" or "rpc".
	Style string `json:"style"`
	// Endpoint is the soap:address location of the port.
	Endpoint string `json:"endpoint,omitempty"`
	// Namespace and Element name the request's body element (the input
	// message's element for document style; the operation for rpc).
	Namespace string `json:"namespace,omitempty"`
	Element   string `json:"element"`
	// Parts are the input message parts (or the element's children) in order.
	Parts []Part `json:"parts,omitempty"`
	// ResponseElement names the expected response body element.
	ResponseElement string `json:"response_element,omitempty"`
}

// Part is one SOAP input part or child element.
type Part struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Type is the XSD type name (local part), e.g. "string" or "int".
	Type     string `json:"type,omitempty"`
	Required bool   `json:"required,omitempty"`
}

// Spec is what an importer finds in a document.
type Spec struct {
	Operations []Operation
	// BaseURL is the spec's server or service address, resolved against the
	// spec's own URL when relative; "" when the spec names none.
	BaseURL string
	// TokenURL is an oauth2 client-credentials token URL found in the spec.
	TokenURL string
	// Warnings are defects that did not stop indexing.
	Warnings []string
}

// Source is a specification document and where it came from.
type Source struct {
	Data []byte
	// URL the document was fetched from; "" for an inline spec.
	URL string
}

// Importer reads one kind of specification. Errors for documents that are
// not a valid spec of the kind are problem.SpecInvalid errors whose detail
// says what is wrong and where.
type Importer interface {
	Import(ctx context.Context, src Source) (*Spec, error)
}

// ListOptions pages through tools.
type ListOptions struct {
	Limit int
	// After is the id of the last tool of the previous page.
	After string
}

// Store keeps tools and their operations, always within one tenant.
type Store interface {
	// CreateTool stores t and its operations; problem.Conflict when the name is taken.
	CreateTool(ctx context.Context, t *Tool, ops []Operation, rec *audit.Record) error
	// UpdateTool replaces t (same id and tenant) and its operations.
	UpdateTool(ctx context.Context, t *Tool, ops []Operation, rec *audit.Record) error
	// DeleteTool deletes a tool; problem.Conflict while an agent version names it.
	DeleteTool(ctx context.Context, tenant, id string, rec *audit.Record) error
	// Tool returns a tool by id, or problem.NotFound.
	Tool(ctx context.Context, tenant, id string) (*Tool, error)
	// ToolByName returns a tool by name, or problem.NotFound.
	ToolByName(ctx context.Context, tenant, name string) (*Tool, error)
	// ListTools returns tools ordered by id.
	ListTools(ctx context.Context, tenant string, opt ListOptions) ([]*Tool, error)
	// Operations returns a tool's operations ordered by id, those matching q
	// (case-insensitive, in id, summary or description) when q is not "".
	Operations(ctx context.Context, tenant, toolID, q string) ([]Operation, error)
	// Operation returns one operation, or problem.NotFound.
	Operation(ctx context.Context, tenant, toolID, opID string) (*Operation, error)
	// ToolRevision returns the tool named name as it was at an earlier
	// revision, with its operations ordered by id, from the snapshot kept
	// when an update replaced that revision; problem.NotFound when none is
	// kept. An update keeps the revision it replaces and those a running
	// or waiting workflow started with; a delete keeps none.
	ToolRevision(ctx context.Context, tenant, name string, revision int) (*Tool, []Operation, error)
	RefreshStore
}

// FirstLine is the first line of a description, trimmed and cut to 200
// characters: an operation's summary where the specification has none.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}
