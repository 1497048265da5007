package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// External is an external agent version (SPEC §4 "External agents"): a
// program reached over HTTP, which agentplane invokes with the goal and a
// run gateway through which every model request and tool call it makes
// goes. Tools, Policies, Inputs and Limits mean what they mean in a
// Definition.
//
//	{
//	  "url": "https://agents.example.com/triage",
//	  "auth": {"type": "bearer", "secrets_ref": "env://TRIAGE_AGENT_TOKEN"},
//	  "timeout": "10m", "max_attempts": 3,
//	  "tools": ["payments"], "models": ["gpt"],
//	  "policies": {"financial": {"allow": "args.amount < 1000.0"}},
//	  "approvals": [{"when": "operation == 'refund'", "approver_scope": "approve:refunds"}],
//	  "limits": {"max_tool_calls": 20, "max_llm_tokens": 200000}
//	}
type External struct {
	URL  string        `json:"url"`
	Auth *ExternalAuth `json:"auth,omitempty"`
	// Timeout bounds the whole run, every attempt included (a Go duration,
	// default 10m, at most 1h).
	Timeout string `json:"timeout,omitempty"`
	// MaxAttempts bounds the attempts of one run (default 3, 1..10).
	MaxAttempts int      `json:"max_attempts,omitempty"`
	Tools       []string `json:"tools"`
	// Operations narrows what the gateway offers to these, each a tool of
	// Tools (all its operations) or <tool>.<operation>, as a plan's
	// operations are; absent, every operation of Tools.
	Operations []string          `json:"operations,omitempty"`
	Models     []string          `json:"models,omitempty"`
	Policies   map[string]Policy `json:"policies,omitempty"`
	Approvals  []ApprovalRule    `json:"approvals,omitempty"`
	Inputs     json.RawMessage   `json:"inputs,omitempty"`
	Limits     *ExternalLimits   `json:"limits,omitempty"`
	// MaxConcurrency bounds the runs of the version in flight at once on
	// one replica, what-if batches included (0: no bound of its own).
	MaxConcurrency int `json:"max_concurrency,omitempty"`
}

// ExternalAuth is how agentplane authenticates to the agent. SecretsRef is
// a reference (env://, file://, vault://); the secret is never stored.
type ExternalAuth struct {
	Type       string `json:"type"`
	SecretsRef string `json:"secrets_ref,omitempty"`
	// Header names the header an api_key goes in (default X-API-Key).
	Header string `json:"header,omitempty"`
}

// Authentication schemes of an external agent.
const (
	ExternalAuthNone   = "none"
	ExternalAuthBearer = "bearer"
	ExternalAuthAPIKey = "api_key"
)

// ExternalLimits bound every run of an external version.
type ExternalLimits struct {
	MaxToolCalls int   `json:"max_tool_calls,omitempty"`
	MaxLLMTokens int64 `json:"max_llm_tokens,omitempty"`
	// OnExhausted and Ask mean what they mean in a definition's Limits.
	OnExhausted string     `json:"on_exhausted,omitempty"`
	Ask         *BudgetAsk `json:"ask,omitempty"`
}

// ApprovalRule holds a gateway tool call for a person's decision when When
// holds. When is a CEL bool over tool, operation, args, caller, goal and
// context; Reason a CEL string over the same. The other fields mean what
// they mean on an approve step.
type ApprovalRule struct {
	When          string `json:"when"`
	Reason        string `json:"reason,omitempty"`
	ApproverScope string `json:"approver_scope,omitempty"`
	Timeout       string `json:"timeout,omitempty"`
	OnTimeout     string `json:"on_timeout,omitempty"`
	AllowSelf     bool   `json:"allow_self,omitempty"`
}

// Bounds and defaults of an external version.
const (
	DefaultExternalTimeout     = 10 * time.Minute
	MaxExternalTimeout         = time.Hour
	MinExternalTimeout         = time.Second
	DefaultExternalMaxAttempts = 3
	MaxExternalMaxAttempts     = 10
	MaxExternalApprovals       = 32
	MaxExternalConcurrency     = 10_000
	// MaxExternalOperations bounds an external version's operations.
	MaxExternalOperations = 1000
)

// ModelNames lists the models the version may use, each once.
func (x External) ModelNames() []string {
	var out []string
	for _, m := range x.Models {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// RunTimeout is the version's time limit of a run.
func (x External) RunTimeout() time.Duration {
	if d, err := time.ParseDuration(x.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultExternalTimeout
}

// Attempts is the version's bound on a run's attempts.
func (x External) Attempts() int {
	if x.MaxAttempts > 0 {
		return x.MaxAttempts
	}
	return DefaultExternalMaxAttempts
}

// DecodeExternal decodes an external block strictly: unknown fields are
// named, as in a definition.
func DecodeExternal(raw json.RawMessage) (External, []problem.FieldError) {
	var x External
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil {
		return External{}, []problem.FieldError{locateDecodeError(raw, err)}
	}
	if dec.More() {
		return External{}, []problem.FieldError{{Message: "trailing data after the external block"}}
	}
	return x, nil
}

// Governance is an external version compiled against the tenant's tools
// and models: what its gateway checks on every exchange.
type Governance struct {
	x         External
	prog      *Program
	approvals []*compiledRule
	ops       []GatewayOperation
	byName    map[string]GatewayOperation
	models    []string
}

// compiledRule is an approvals rule, compiled.
type compiledRule struct {
	when *expr
	capprove
}

// GatewayOperation is an operation the gateway's MCP server offers: named
// <tool>__<operation> (FunctionName), with a suffix _2, _3, … where two
// operations' names would be the same.
type GatewayOperation struct {
	Name string
	Tool string
	OperationInfo
}

// CompileExternal checks an external version against the tenant's tools
// and models. Field paths are relative to the external block.
func CompileExternal(x External, catalog ToolCatalog) (*Governance, []problem.FieldError) {
	def := Definition{Tools: x.Tools, Inputs: x.Inputs, Policies: x.Policies,
		Steps: []Step{{Action: "external", Finish: &Finish{Outcome: "answered", Literal: true}}}}
	if x.Limits != nil {
		def.Limits = &Limits{MaxLLMTokens: x.Limits.MaxLLMTokens, OnExhausted: x.Limits.OnExhausted, Ask: x.Limits.Ask}
	}
	p, errs := Compile(def, catalog)
	c := &compiler{def: def, catalog: catalog, allowed: map[string]bool{}, declared: map[string]bool{}, errs: errs}
	checkExternalFields(c, x)
	var err error
	if _, c.polEnv, err = newEnvs(nil); err != nil {
		c.bad("approvals", err.Error())
		return nil, c.errs
	}
	g := &Governance{x: x, prog: p, byName: map[string]GatewayOperation{}, models: x.ModelNames()}
	for i, a := range x.Approvals {
		field := fmt.Sprintf("approvals[%d]", i)
		if strings.TrimSpace(a.When) == "" {
			c.bad(field+".when", "is required: a CEL bool over tool, operation, args and caller, e.g. \"operation == 'refund'\"")
			continue
		}
		ca := c.compileApprove(field, &Approve{Reason: "", ApproverScope: a.ApproverScope, Timeout: a.Timeout, OnTimeout: a.OnTimeout, AllowSelf: a.AllowSelf})
		rule := &compiledRule{when: c.expr(c.polEnv, a.When, field+".when", wantBool), capprove: *ca}
		if a.Reason != "" {
			rule.reason = c.expr(c.polEnv, a.Reason, field+".reason", wantString)
		}
		g.approvals = append(g.approvals, rule)
	}
	for i, m := range x.Models {
		if !catalog.HasModel(m) {
			c.bad(fmt.Sprintf("models[%d]", i), missingModel(m))
		}
	}
	offer := func(name string, op OperationInfo) {
		taken := func(n string) bool { _, ok := g.byName[n]; return ok }
		gop := GatewayOperation{Name: uniqueFunctionName(name, op.ID, taken), Tool: name, OperationInfo: op}
		g.ops = append(g.ops, gop)
		g.byName[gop.Name] = gop
	}
	switch n := len(x.Operations); {
	case n > MaxExternalOperations:
		c.bad("operations", fmt.Sprintf("lists %d operations, at most %d", n, MaxExternalOperations))
	case n > 0:
		for _, name := range x.Tools {
			c.allowed[name] = true
		}
		for _, t := range c.operationTargets("operations", x.Operations) {
			offer(t.tool, t.op)
		}
	default:
		for _, name := range x.Tools {
			if !catalog.Has(name) {
				continue // reported under tools[]
			}
			for _, op := range catalog.Operations(name) {
				offer(name, op)
			}
		}
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return g, nil
}

// checkExternalFields checks the fields no definition has.
func checkExternalFields(c *compiler, x External) {
	u, err := url.Parse(x.URL)
	switch {
	case x.URL == "":
		c.bad("url", "is required: the agent's HTTP endpoint, e.g. \"https://agents.example.com/triage\"")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		c.bad("url", fmt.Sprintf("%q is not an http(s) URL", x.URL))
	case u.User != nil:
		c.bad("url", "must not carry credentials (user:password@): use auth with a secrets_ref")
	case u.Fragment != "":
		c.bad("url", "must not have a #fragment")
	}
	if a := x.Auth; a != nil {
		switch a.Type {
		case ExternalAuthNone, "":
		case ExternalAuthBearer, ExternalAuthAPIKey:
			if a.SecretsRef == "" {
				c.bad("auth.secrets_ref", fmt.Sprintf("is required for auth type %s: a reference such as \"env://AGENT_TOKEN\"", a.Type))
			}
		default:
			c.bad("auth.type", fmt.Sprintf("must be none, bearer or api_key, not %q", a.Type))
		}
		if a.Header != "" && a.Type != ExternalAuthAPIKey {
			c.bad("auth.header", "applies to auth type api_key only")
		}
	}
	if x.Timeout != "" {
		d, err := time.ParseDuration(x.Timeout)
		switch {
		case err != nil:
			c.bad("timeout", fmt.Sprintf("%q is not a duration such as \"10m\"", x.Timeout))
		case d < MinExternalTimeout || d > MaxExternalTimeout:
			c.bad("timeout", fmt.Sprintf("must be from %v to %v", MinExternalTimeout, MaxExternalTimeout))
		}
	}
	if n := x.MaxAttempts; n != 0 && (n < 1 || n > MaxExternalMaxAttempts) {
		c.bad("max_attempts", fmt.Sprintf("must be from 1 to %d", MaxExternalMaxAttempts))
	}
	if n := x.MaxConcurrency; n < 0 || n > MaxExternalConcurrency {
		c.bad("max_concurrency", fmt.Sprintf("must be from 1 to %d, or left out for no bound", MaxExternalConcurrency))
	}
	if l := x.Limits; l != nil && (l.MaxToolCalls < 0 || l.MaxToolCalls > 1000) {
		c.bad("limits.max_tool_calls", "must be from 1 to 1000, or left out for the invocation's")
	}
	if len(x.Approvals) > MaxExternalApprovals {
		c.bad("approvals", fmt.Sprintf("lists %d rules, over the limit of %d", len(x.Approvals), MaxExternalApprovals))
	}
	seen := map[string]bool{}
	for i, m := range x.Models {
		if seen[m] {
			c.bad(fmt.Sprintf("models[%d]", i), fmt.Sprintf("model %q is listed twice", m))
		}
		seen[m] = true
	}
}

// External returns the version the governance was compiled from.
func (g *Governance) External() External { return g.x }

// Operations are the operations the gateway offers, in the order of the
// version's tools.
func (g *Governance) Operations() []GatewayOperation { return g.ops }

// Operation finds an offered operation by its gateway name.
func (g *Governance) Operation(name string) (GatewayOperation, bool) {
	op, ok := g.byName[name]
	return op, ok
}

// Models are the registered model names the version may use.
func (g *Governance) Models() []string { return g.models }

// AllowsModel reports whether the version may use the named model.
func (g *Governance) AllowsModel(name string) bool { return slices.Contains(g.models, name) }

// ValidateContext checks an invocation's context against the version's inputs.
func (g *Governance) ValidateContext(ctx map[string]any) []problem.FieldError {
	return g.prog.ValidateContext(ctx)
}

// MaxLLMTokens is the version's limits.max_llm_tokens (0: none).
func (g *Governance) MaxLLMTokens() int64 { return g.prog.MaxLLMTokens() }

// BudgetApproval is the approval a spent budget b of a run whose
// invocation says onExhausted asks for, or nil when the exchange is
// refused instead (Program.BudgetApproval).
func (g *Governance) BudgetApproval(onExhausted string, b Budget) *ApprovalRequest {
	return g.prog.BudgetApproval(onExhausted, b)
}

// MaxToolCalls is the version's limits.max_tool_calls (0: the invocation's).
func (g *Governance) MaxToolCalls() int {
	if g.x.Limits == nil {
		return 0
	}
	return g.x.Limits.MaxToolCalls
}

// activation is the variables of a check of one call.
func (g *Governance) activation(in Input, toolName, opID string, args map[string]any) *activation {
	scopes := make([]any, len(in.Caller.Scopes))
	for i, s := range in.Caller.Scopes {
		scopes[i] = s
	}
	if args == nil {
		args = map[string]any{}
	}
	return &activation{
		goal: in.Goal, context: normalize(in.Context),
		caller: map[string]any{"sub": in.Caller.Sub, "tenant": in.Caller.Tenant, "scopes": scopes},
		saved:  map[string]any{}, declared: map[string]bool{},
		policy: &policyVars{tool: toolName, operation: opID, args: normalize(args)},
	}
}

// Refusal says why the invoker's scopes or the version's policies refuse
// a call, or "" when they allow it.
func (g *Governance) Refusal(ctx context.Context, in Input, op GatewayOperation, args map[string]any) string {
	r := &runner{ctx: ctx, p: g.prog, in: in, act: g.activation(in, op.Tool, op.ID, args)}
	return r.refusal(target{tool: op.Tool, op: op.OperationInfo}, args)
}

// Approval is the request for a decision a call needs under the version's
// approvals rules (the first rule that holds), or nil when none holds. A
// rule that fails to evaluate asks for a decision, saying why.
func (g *Governance) Approval(ctx context.Context, in Input, op GatewayOperation, args map[string]any) *ApprovalRequest {
	act := g.activation(in, op.Tool, op.ID, args)
	for i, rule := range g.approvals {
		ok, err := rule.when.evalBool(ctx, act)
		reason := fmt.Sprintf("%s.%s matches approvals[%d]", op.Tool, op.ID, i)
		switch {
		case err != nil:
			reason = fmt.Sprintf("approvals[%d].when failed, so the call waits for a person: %v", i, err)
		case !ok:
			continue
		case rule.reason != nil:
			if s, err := rule.reason.evalString(ctx, act); err == nil {
				reason = s
			}
		}
		return &ApprovalRequest{Action: op.Name, Reason: reason, ApproverScope: rule.scope,
			Timeout: rule.timeout, OnTimeout: rule.onTimeout, AllowSelf: rule.allowSelf}
	}
	return nil
}
