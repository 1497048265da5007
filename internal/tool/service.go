package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
)

// Registration is the body of POST and PUT /v1/tools.
type Registration struct {
	Name               string   `json:"name"`
	Type               string   `json:"type"`
	SpecURL            string   `json:"spec_url,omitempty"`
	Spec               string   `json:"spec,omitempty"`
	EndpointURL        string   `json:"endpoint_url,omitempty"`
	Auth               *Auth    `json:"auth,omitempty"`
	PolicyClass        string   `json:"policy_class,omitempty"`
	SideEffects        []string `json:"side_effects,omitempty"`
	IdempotencySupport bool     `json:"idempotency_support,omitempty"`
	// OperationKinds overrides the read/write kind the importer inferred,
	// per operation id, where its rule misreads a name.
	OperationKinds map[string]string `json:"operation_kinds,omitempty"`
	// Limits and OperationLimits protect the backing API (rate,
	// concurrency, timeout, retries, circuit).
	Limits          *Limits           `json:"limits,omitempty"`
	OperationLimits map[string]Limits `json:"operation_limits,omitempty"`
	// Redact names what of the tool's calls is masked before it is stored
	// or sent on; a change applies to workflows started after it.
	Redact *redact.Config `json:"redact,omitempty"`
	// Refresh, a Go duration of at least MinRefresh, has the scheduler
	// refresh the tool's description that often (SPEC §4 "Tool drift").
	Refresh string `json:"refresh,omitempty"`
}

// Fetcher fetches specification documents through the hardened client.
type Fetcher interface {
	Fetch(ctx context.Context, rawURL string) (data []byte, finalURL string, err error)
}

// Introspector POSTs the GraphQL introspection query to an endpoint.
type Introspector interface {
	Introspect(ctx context.Context, endpoint string) ([]byte, error)
}

// MCPLister lists an MCP server's tools (every page of tools/list) as a
// JSON array of MCP tool objects.
type MCPLister interface {
	ListMCPTools(ctx context.Context, endpoint string) ([]byte, error)
}

// IntrospectorFunc adapts a function to Introspector.
type IntrospectorFunc func(ctx context.Context, endpoint string) ([]byte, error)

// Introspect implements Introspector.
func (f IntrospectorFunc) Introspect(ctx context.Context, endpoint string) ([]byte, error) {
	return f(ctx, endpoint)
}

// SecretPolicy says whether a tenant may use a secrets reference.
type SecretPolicy interface {
	Check(tenant, ref string) error
}

// Forgetter drops what is kept in memory for a tool's calls (OAuth tokens,
// compiled schemas) once the tool is updated or deleted.
type Forgetter interface {
	Forget(toolID string)
}

// Service registers tools: it validates, fetches and indexes specifications.
type Service struct {
	Store     Store
	Fetcher   Fetcher
	Importers map[string]Importer
	// MCPLister lists the tools of an MCP server (type mcp).
	MCPLister MCPLister
	// Introspector is used when a graphql spec_url answers neither SDL nor
	// introspection JSON to a GET.
	Introspector Introspector
	Secrets      SecretPolicy
	// MaxSpecBytes limits inline specs (fetched ones are limited by the Fetcher).
	MaxSpecBytes int
	Now          func() time.Time
	// Calls, when set, forgets a tool this service updated or deleted.
	Calls Forgetter
}

var (
	nameRE   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	classRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	authKind = []string{AuthNone, AuthOAuth2, AuthAPIKey, AuthBearer, AuthBasic}
	effects  = []string{"create", "update", "delete", "external"}
	specKind = []string{OpenAPI, GraphQL, SOAP, MCP, A2A}
)

// maxKindOverrides bounds operation_kinds: more than any document indexed here.
const maxKindOverrides = 10000

// Validate checks a registration without fetching anything.
func (s *Service) Validate(tenant string, reg *Registration) error {
	var tokenURL string
	if reg.Auth != nil {
		tokenURL = reg.Auth.TokenURL
	}
	for _, u := range []struct {
		field, raw string
		file       bool
	}{{"spec_url", reg.SpecURL, reg.Type != MCP}, {"endpoint_url", reg.EndpointURL, false}, {"auth.token_url", tokenURL, false}} {
		if err := refusedScheme(u.field, u.raw, u.file); err != nil {
			return err
		}
	}
	var errs []problem.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, problem.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if reg.Name == "" {
		add("name", "is required")
	} else if !nameRE.MatchString(reg.Name) {
		add("name", "must match ^[a-zA-Z0-9_-]{1,64}$")
	}
	if reg.Type == "" {
		add("type", "is required: one of openapi, graphql, soap, mcp, a2a")
	} else if !slices.Contains(specKind, reg.Type) {
		add("type", "must be one of openapi, graphql, soap, mcp, a2a")
	}
	switch {
	case reg.SpecURL == "" && reg.Spec == "":
		add("spec_url", "one of spec_url or spec is required")
	case reg.SpecURL != "" && reg.Spec != "":
		add("spec", "give spec_url or spec, not both")
	case reg.SpecURL != "":
		if msg := checkURL(reg.SpecURL); msg != "" {
			add("spec_url", "%s", msg)
		}
	}
	if reg.Type == MCP && reg.SpecURL == "" && reg.Spec != "" {
		add("spec_url", "an mcp tool is its server: give spec_url, the server's Streamable HTTP endpoint")
	}
	if reg.Type == A2A && reg.SpecURL == "" && reg.Spec != "" {
		add("spec_url", "an a2a tool is its agent: give spec_url, the URL of its agent card")
	}
	if s.MaxSpecBytes > 0 && len(reg.Spec) > s.MaxSpecBytes {
		return problem.New(problem.SpecTooLarge, "the inline spec is %d bytes, over the %d byte limit", len(reg.Spec), s.MaxSpecBytes)
	}
	if reg.EndpointURL != "" {
		if msg := checkURL(reg.EndpointURL); msg != "" {
			add("endpoint_url", "%s", msg)
		}
	}
	if reg.PolicyClass == "" {
		reg.PolicyClass = "standard"
	} else if !classRE.MatchString(reg.PolicyClass) {
		add("policy_class", "must match ^[a-z][a-z0-9_-]{0,62}$")
	}
	for i, e := range reg.SideEffects {
		if !slices.Contains(effects, e) {
			add(fmt.Sprintf("side_effects[%d]", i), "must be one of create, update, delete, external")
		}
	}
	if reg.Auth == nil {
		reg.Auth = &Auth{Type: AuthNone}
	}
	a := reg.Auth
	if a.Type == "" {
		a.Type = AuthNone
	}
	if !slices.Contains(authKind, a.Type) {
		add("auth.type", "must be one of none, oauth2, api_key, bearer, basic")
	}
	if a.Type != AuthNone && a.SecretsRef == "" {
		add("auth.secrets_ref", "is required when auth.type is %s", a.Type)
	}
	if a.Type == AuthNone && a.SecretsRef != "" {
		add("auth.secrets_ref", "is not used when auth.type is none")
	}
	if a.TokenURL != "" {
		if msg := checkURL(a.TokenURL); msg != "" {
			add("auth.token_url", "%s", msg)
		}
	}
	if a.In != "" && a.In != "header" && a.In != "query" {
		add("auth.in", "must be header or query")
	}
	if len(reg.OperationKinds) > maxKindOverrides {
		add("operation_kinds", "names %d operations, over the limit of %d", len(reg.OperationKinds), maxKindOverrides)
	}
	for _, id := range slices.Sorted(maps.Keys(reg.OperationKinds)) {
		if k := reg.OperationKinds[id]; k != Read && k != Write {
			add("operation_kinds."+id, "must be read or write, not %q", k)
		}
	}
	validateLimits(reg, add)
	reg.Redact.Validate("redact", add)
	if reg.Refresh != "" {
		switch d, err := time.ParseDuration(reg.Refresh); {
		case err != nil:
			add("refresh", "%q is not a duration: give a Go duration such as \"24h\"", reg.Refresh)
		case d < MinRefresh:
			add("refresh", "is %s, under the least of %s: a description is fetched at most once an hour", d, MinRefresh)
		case reg.SpecURL == "":
			add("refresh", "needs spec_url: a scheduled refresh fetches spec_url again")
		}
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	if a.SecretsRef != "" && s.Secrets != nil {
		if err := s.Secrets.Check(tenant, a.SecretsRef); err != nil {
			return err
		}
	}
	return nil
}

// checkURL returns what is wrong with an absolute http(s) URL, or "".
func checkURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs():
		return "must be an absolute URL"
	case u.User != nil:
		return "must not carry a user name or password: put the credential in auth.secrets_ref"
	case u.Scheme != "file" && u.Host == "":
		return "must name a host"
	}
	return ""
}

// refusedScheme is the problem.URLNotAllowed error of a URL of another
// scheme than http or https (or file, when allowFile), or nil.
func refusedScheme(field, raw string, allowFile bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil // not an absolute URL: a rule the field breaks
	}
	switch u.Scheme {
	case "http", "https":
		return nil
	case "file":
		if allowFile {
			return nil // the fetcher allows it with --allow-file-specs
		}
	}
	return problem.New(problem.URLNotAllowed, "%s: scheme %q is not allowed: use http or https", field, u.Scheme)
}

// Register validates, fetches and indexes a new tool, storing rec with it.
func (s *Service) Register(ctx context.Context, tenant string, reg Registration, rec *audit.Record) (*Tool, error) {
	if err := s.Validate(tenant, &reg); err != nil {
		return nil, err
	}
	if _, err := s.Store.ToolByName(ctx, tenant, reg.Name); err == nil {
		return nil, problem.New(problem.Conflict, "a tool named %q already exists", reg.Name)
	}
	now := s.Now().UTC()
	t := &Tool{ID: ids.NewAt(ids.Tool, now), Tenant: tenant, Revision: 1, CreatedAt: now}
	ops, size, err := s.index(ctx, t, reg, now)
	if err != nil {
		return nil, err
	}
	defer releaseMemory(size)
	if rec != nil {
		rec.Resource = audit.Resource{Type: "tool", ID: t.ID}
	}
	if err := s.Store.CreateTool(ctx, t, ops, rec); err != nil {
		return nil, err
	}
	return t, nil
}

// Update re-fetches and re-indexes a tool; its name cannot change.
func (s *Service) Update(ctx context.Context, tenant, id string, reg Registration, rec *audit.Record) (*Tool, error) {
	old, err := s.Store.Tool(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(tenant, &reg); err != nil {
		return nil, err
	}
	if reg.Name != old.Name {
		return nil, problem.Field("name", "cannot change (the tool is %q); register a new tool instead", old.Name)
	}
	now := s.Now().UTC()
	t := &Tool{ID: old.ID, Tenant: tenant, Revision: old.Revision + 1, CreatedAt: old.CreatedAt}
	ops, size, err := s.index(ctx, t, reg, now)
	if err != nil {
		return nil, err
	}
	defer releaseMemory(size)
	if err := s.Store.UpdateTool(ctx, t, ops, rec); err != nil {
		return nil, err
	}
	s.forget(t.ID)
	return t, nil
}

// Delete deletes a tool, storing rec with the deletion; problem.Conflict
// while an agent version names it.
func (s *Service) Delete(ctx context.Context, tenant, id string, rec *audit.Record) error {
	if err := s.Store.DeleteTool(ctx, tenant, id, rec); err != nil {
		return err
	}
	s.forget(id)
	return nil
}

func (s *Service) forget(id string) {
	if s.Calls != nil {
		s.Calls.Forget(id)
	}
}

// largeSpec is the document size from which an import's garbage (several
// times the document: the parsed tree, resolved schemas) is handed back to
// the operating system at once rather than over the scavenger's minutes.
const largeSpec = 1 << 20

// releaseMemory returns the heap an import of a size-byte document left
// behind to the operating system, when the document was large: a forced
// collection costs milliseconds, and registrations are rare.
func releaseMemory(size int) {
	if size >= largeSpec {
		debug.FreeOSMemory()
	}
}

// index fetches the document, runs the importer and fills t; it returns
// the operations and the document's size.
func (s *Service) index(ctx context.Context, t *Tool, reg Registration, now time.Time) ([]Operation, int, error) {
	imp, ok := s.Importers[reg.Type]
	if !ok {
		return nil, 0, problem.Field("type", "no importer for %q", reg.Type)
	}
	src, endpoint, err := s.source(ctx, reg)
	if err != nil {
		return nil, 0, err
	}
	spec, err := imp.Import(ctx, src)
	if err != nil {
		return nil, 0, err
	}
	if len(spec.Operations) == 0 {
		// A valid document that offers nothing to call breaks a rule of
		// registration; it is not an invalid document.
		field := "spec"
		if reg.SpecURL != "" {
			field = "spec_url"
		}
		return nil, 0, problem.Validation(problem.FieldError{Field: field,
			Message: fmt.Sprintf("the %s document defines no callable operation (webhooks, callbacks and subscriptions are not called)", reg.Type)})
	}
	if err := overrideKinds(spec.Operations, reg.OperationKinds); err != nil {
		return nil, 0, err
	}
	if err := checkOperationLimits(spec.Operations, reg.OperationLimits); err != nil {
		return nil, 0, err
	}
	sum := sha256.Sum256(src.Data)
	t.Name, t.Type, t.SpecURL, t.EndpointURL = reg.Name, reg.Type, reg.SpecURL, reg.EndpointURL
	t.Auth, t.PolicyClass, t.SideEffects = *reg.Auth, reg.PolicyClass, reg.SideEffects
	if t.SideEffects == nil {
		t.SideEffects = []string{}
	}
	t.IdempotencySupport = reg.IdempotencySupport
	t.Limits, t.OperationLimits = nil, reg.OperationLimits
	if !reg.Limits.IsZero() {
		t.Limits = reg.Limits
	}
	t.Redact = nil
	if !reg.Redact.IsZero() {
		t.Redact = reg.Redact
	}
	t.Refresh = reg.Refresh
	t.SpecSHA256 = hex.EncodeToString(sum[:])
	t.OperationCount = len(spec.Operations)
	t.IndexedAt, t.UpdatedAt = now, now
	t.SpecTokenURL = spec.TokenURL
	t.Warnings = spec.Warnings
	switch {
	case reg.EndpointURL != "":
		t.BaseURL = reg.EndpointURL
	case endpoint != "":
		t.BaseURL = endpoint
	default:
		t.BaseURL = spec.BaseURL
	}
	return spec.Operations, len(src.Data), nil
}

// overrideKinds sets the kind of each operation the registration names,
// refusing ids the document does not define.
func overrideKinds(ops []Operation, kinds map[string]string) error {
	if len(kinds) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(kinds))
	for i := range ops {
		if k, ok := kinds[ops[i].ID]; ok {
			ops[i].Kind, seen[ops[i].ID] = k, true
		}
	}
	var errs []problem.FieldError
	for _, id := range slices.Sorted(maps.Keys(kinds)) {
		if !seen[id] {
			errs = append(errs, problem.FieldError{Field: "operation_kinds." + id,
				Message: "names no operation of the document; GET /v1/tools/{id}/operations lists their ids"})
		}
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	return nil
}

// source returns the document to import and, for an introspected GraphQL
// endpoint, that endpoint.
func (s *Service) source(ctx context.Context, reg Registration) (Source, string, error) {
	if reg.Spec != "" {
		return Source{Data: []byte(reg.Spec)}, "", nil
	}
	if reg.Type == MCP {
		if s.MCPLister == nil {
			return Source{}, "", problem.Field("type", "this server cannot reach MCP servers")
		}
		data, err := s.MCPLister.ListMCPTools(ctx, reg.SpecURL)
		if err != nil {
			return Source{}, "", err
		}
		return Source{Data: data, URL: reg.SpecURL}, reg.SpecURL, nil
	}
	data, final, err := s.Fetcher.Fetch(ctx, reg.SpecURL)
	if err == nil && (reg.Type != GraphQL || looksLikeGraphQL(data)) {
		return Source{Data: data, URL: final}, "", nil
	}
	if reg.Type != GraphQL || s.Introspector == nil {
		return Source{}, "", err
	}
	// A GraphQL endpoint rarely answers GET with its schema: ask it.
	data, ierr := s.Introspector.Introspect(ctx, reg.SpecURL)
	if ierr != nil {
		if err != nil {
			return Source{}, "", err
		}
		return Source{}, "", ierr
	}
	return Source{Data: data, URL: reg.SpecURL}, reg.SpecURL, nil
}

// looksLikeGraphQL reports whether a GET answered SDL or introspection JSON
// rather than an HTML page or an error document.
func looksLikeGraphQL(data []byte) bool {
	s := strings.TrimSpace(string(data[:min(len(data), 4096)]))
	if strings.HasPrefix(s, "{") {
		return strings.Contains(string(data), "__schema")
	}
	return s != "" && !strings.HasPrefix(s, "<")
}
