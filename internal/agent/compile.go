package agent

import (
	"encoding/json"
	"fmt"
	"github.com/agentplane/agentplane/internal/tool"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
)

// Step kinds, as they appear in Event.Kind.
const (
	KindCall  = "call"
	KindScore = "score"
	KindRoute = "route"
	KindSet   = "set"
	KindGoto  = "goto"
	KindPlan  = "plan"
	// KindCompletion is the event of one completion of a plan step.
	KindCompletion = "completion"
	KindFinish     = "finish"
	KindApprove    = "approve"
)

// ActionLimitReached is the action of the event emitted when a call is
// refused because the invocation's max_tool_calls was reached.
const ActionLimitReached = "tool_call_limit_reached"

// Step guard and plan defaults.
const (
	DefaultMaxSteps = 1000
	MaxMaxSteps     = 10000
	// MaxDefinitionSteps bounds the steps a definition lists (loops with
	// goto may run more of them, up to max_steps).
	MaxDefinitionSteps  = 1000
	DefaultPlanMaxCalls = 10
	MaxPlanMaxCalls     = 100
	// MaxPlanFunctions is the most functions a plan step may offer a
	// model in one completion; DefaultPlanFunctions is its default.
	MaxPlanFunctions     = 128
	DefaultPlanFunctions = 64
	// MaxPlanOperations bounds the operations a plan step chooses among.
	MaxPlanOperations = 20000
	// DefaultApprovalTimeout and MaxApprovalTimeout bound how long an
	// approve step waits; MinApprovalTimeout is its shortest wait.
	DefaultApprovalTimeout = 24 * time.Hour
	MaxApprovalTimeout     = 30 * 24 * time.Hour
	MinApprovalTimeout     = time.Second
)

var slugRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// IsSlug reports whether s is a valid action or outcome: ^[a-z][a-z0-9_-]{0,62}$.
func IsSlug(s string) bool { return slugRE.MatchString(s) }

// OperationInfo is what the engine needs to know of a tool operation.
type OperationInfo struct {
	ID string
	// Kind is tool.Read or tool.Write.
	Kind string
	// PolicyClass is the policy class of the operation's tool.
	PolicyClass string
	// Description tells a model what the operation does.
	Description string
	// InputSchema is the JSON Schema of the operation's arguments object.
	InputSchema json.RawMessage
	// Arguments are the argument names a call may pass; nil when the
	// operation takes other names too (tool.Operation.ArgumentNames).
	Arguments []string
}

// ToolCatalog is the registered tools of the deploying tenant.
type ToolCatalog interface {
	// Has reports whether a tool of that name is registered.
	Has(tool string) bool
	// Operation returns one operation of a registered tool.
	Operation(tool, id string) (OperationInfo, bool)
	// Operations returns every operation of a tool, for plan steps.
	Operations(tool string) []OperationInfo
	// HasModel reports whether the tenant may use the model of that name
	// (a registered one, or "default" when the server defines it).
	HasModel(name string) bool
}

// Program is a compiled definition, safe for concurrent runs.
type Program struct {
	def      Definition
	steps    []*cstep
	policies map[string]*expr
	outcome  *expr
	output   *expr
	// instructions is the system message of plan steps, when the agent has them.
	instructions *expr
	inputs       *jsonschema.Schema
	maxSteps     int
	declared     map[string]bool
	// budgetAsk is the approval a spent budget asks for under
	// on_exhausted ask: the limits' ask, else the defaults.
	budgetAsk *capprove
}

// Definition returns the definition the program was compiled from.
func (p *Program) Definition() Definition { return p.def }

// Tools returns the tools the agent may call.
func (p *Program) Tools() []string { return append([]string(nil), p.def.Tools...) }

// cstep is a compiled step.
type cstep struct {
	field  string // "steps[i]"
	action string
	kind   string
	when   *expr

	target  target // call
	args    *valueTree
	saveAs  string
	score   *expr
	route   []croute
	set     *valueTree
	gotoIdx int
	plan    *cplan
	finLit  string
	finExpr *expr
	approve *capprove

	continueDenied bool
	continueError  bool
}

// target is a resolved tool operation.
type target struct {
	tool string
	op   OperationInfo
}

// capprove is a compiled approve step.
type capprove struct {
	when      *expr
	reason    *expr
	scope     string
	timeout   time.Duration
	onTimeout string
	allowSelf bool
}

type croute struct {
	when  *expr
	queue string
}

type cplan struct {
	prompt    *expr
	maxCalls  int
	functions []ChatTool
	byName    map[string]target
	// offer is how many functions each completion is offered; when the
	// plan has more, index ranks them for the goal and the conversation.
	offer int
	index *tool.SearchIndex
	// llm is what each completion asks of the model.
	llm *llmParams
}

// compiler gathers field errors while compiling one definition.
type compiler struct {
	def      Definition
	catalog  ToolCatalog
	stepEnv  *cel.Env
	polEnv   *cel.Env
	allowed  map[string]bool
	errs     []problem.FieldError
	declared map[string]bool
}

// bad records what is wrong with a field; one of a step says which step,
// numbered from 1 as events and the CLI number them, and its action.
func (c *compiler) bad(field, msg string) {
	if i, ok := stepIndex(field); ok && i < len(c.def.Steps) {
		msg = stepName(i, c.def.Steps[i].Action) + ": " + msg
	}
	c.errs = append(c.errs, problem.FieldError{Field: field, Message: msg})
}

// stepIndex is the index of the step a field path starts with ("steps[2]…").
func stepIndex(field string) (int, bool) {
	rest, ok := strings.CutPrefix(field, "steps[")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil && i >= 0
}

// stepName names the step at index i for a person: "step 3 (fraud_score)".
func stepName(i int, action string) string {
	if action == "" {
		return fmt.Sprintf("step %d", i+1)
	}
	return fmt.Sprintf("step %d (%s)", i+1, action)
}

func (c *compiler) expr(env *cel.Env, src, field string, w want) *expr {
	e, msg := compileExpr(env, src, w)
	if msg != "" {
		c.bad(field, msg)
	}
	return e
}

// Compile validates def against the catalog and compiles it. Field paths in
// the errors are relative to the definition ("steps[2].score",
// "policies.financial.allow"); the HTTP layer may prefix them.
func Compile(def Definition, catalog ToolCatalog) (*Program, []problem.FieldError) {
	c := &compiler{def: def, catalog: catalog, allowed: map[string]bool{}, declared: map[string]bool{}}
	p := &Program{def: def, policies: map[string]*expr{}, maxSteps: def.MaxSteps}
	if n := len(def.Steps); n > MaxDefinitionSteps {
		c.bad("steps", fmt.Sprintf("lists %d steps, over the limit of %d: split the agent, or repeat steps with goto", n, MaxDefinitionSteps))
		return nil, c.errs
	}

	c.checkTools()
	c.declareNames()
	names := make([]string, 0, len(c.declared))
	for n := range c.declared {
		names = append(names, n)
	}
	sort.Strings(names)
	var err error
	c.stepEnv, c.polEnv, err = newEnvs(names)
	if err != nil {
		c.bad("steps", err.Error())
		return nil, c.errs
	}
	p.declared = c.declared

	if len(def.Inputs) > 0 && string(def.Inputs) != "null" {
		sch, msg := compileInputs(def.Inputs)
		if msg != "" {
			c.bad("inputs", msg)
		}
		p.inputs = sch
	}
	for _, class := range sortedKeys(def.Policies) {
		p.policies[class] = c.expr(c.polEnv, def.Policies[class].Allow, "policies."+class+".allow", wantBool)
	}
	c.checkAgentLLM()
	p.budgetAsk = c.compileBudgetAsk()
	if def.Instructions != "" {
		p.instructions = c.expr(c.stepEnv, def.Instructions, "instructions", wantString)
	}
	p.steps = c.compileSteps()
	if def.Outcome != "" {
		p.outcome = c.expr(c.stepEnv, def.Outcome, "outcome", wantString)
	}
	if def.Output != "" {
		p.output = c.expr(c.stepEnv, def.Output, "output", wantAny)
	}
	switch {
	case def.MaxSteps == 0:
		p.maxSteps = DefaultMaxSteps
	case def.MaxSteps < 0 || def.MaxSteps > MaxMaxSteps:
		c.bad("max_steps", fmt.Sprintf("must be between 1 and %d", MaxMaxSteps))
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return p, nil
}

func (c *compiler) checkTools() {
	for i, name := range c.def.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		switch {
		case c.allowed[name]:
			c.bad(field, fmt.Sprintf("tool %q is listed twice", name))
		case !c.catalog.Has(name):
			c.bad(field, fmt.Sprintf("no tool named %q is registered", name))
		}
		c.allowed[name] = true
	}
}

// declareNames collects every name a step saves so that any expression,
// earlier or later, may refer to it.
func (c *compiler) declareNames() {
	declare := func(field, name string) {
		if msg := checkName(name); msg != "" {
			c.bad(field, msg)
			return
		}
		c.declared[name] = true
	}
	for i, s := range c.def.Steps {
		f := fmt.Sprintf("steps[%d]", i)
		switch {
		case s.SaveAs != "":
			declare(f+".save_as", s.SaveAs)
		case s.Score != "":
			declare(f+".score", "score")
		case s.Route != nil:
			declare(f+".route", "queue")
		case s.Plan != nil && s.Plan.SaveAs != "":
			declare(f+".plan.save_as", s.Plan.SaveAs)
		}
		for _, k := range sortedKeys(s.Set) {
			declare(f+".set."+k, k)
		}
	}
}

func (c *compiler) compileSteps() []*cstep {
	if len(c.def.Steps) == 0 {
		c.bad("steps", "an agent needs at least one step")
		return nil
	}
	actions := map[string][]int{}
	for i, s := range c.def.Steps {
		actions[s.Action] = append(actions[s.Action], i)
	}
	out := make([]*cstep, len(c.def.Steps))
	for i, s := range c.def.Steps {
		out[i] = c.compileStep(i, s, actions)
	}
	return out
}

func (c *compiler) compileStep(i int, s Step, actions map[string][]int) *cstep {
	f := fmt.Sprintf("steps[%d]", i)
	cs := &cstep{field: f, action: s.Action, saveAs: s.SaveAs}
	switch {
	case s.Action == "":
		c.bad(f+".action", "action is required")
	case s.Action == ActionLimitReached || s.Action == ActionTokenLimitReached:
		c.bad(f+".action", fmt.Sprintf("%q is reserved", s.Action))
	case !IsSlug(s.Action):
		c.bad(f+".action", fmt.Sprintf("%q is not a slug (^[a-z][a-z0-9_-]{0,62}$)", s.Action))
	}
	if s.When != "" {
		cs.when = c.expr(c.stepEnv, s.When, f+".when", wantBool)
	}
	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{KindCall, s.Call != ""}, {KindScore, s.Score != ""}, {KindRoute, s.Route != nil},
		{KindSet, s.Set != nil}, {KindGoto, s.Goto != ""}, {KindPlan, s.Plan != nil}, {KindFinish, s.Finish != nil},
		{KindApprove, s.Approve != nil},
	} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	if len(kinds) != 1 {
		c.bad(f, fmt.Sprintf("a step needs exactly one of call, score, route, set, goto, plan, finish, approve; got %d", len(kinds)))
		return cs
	}
	cs.kind = kinds[0]
	if s.Args != nil && cs.kind != KindCall {
		c.bad(f+".args", "args belong to a call step")
	}
	if s.SaveAs != "" && (cs.kind == KindSet || cs.kind == KindGoto || cs.kind == KindFinish || cs.kind == KindApprove) {
		c.bad(f+".save_as", "a "+cs.kind+" step saves nothing")
	}
	cs.continueDenied = c.continueFlag(f+".on_denied", s.OnDenied, cs.kind)
	cs.continueError = c.continueFlag(f+".on_error", s.OnError, cs.kind)

	switch cs.kind {
	case KindCall:
		cs.target, _ = c.resolveCall(f+".call", s.Call)
		switch a := s.Args.(type) {
		case nil:
			cs.args = compileTree(c.stepEnv, map[string]any{}, f+".args", c.bad)
		case map[string]any:
			cs.args = compileTree(c.stepEnv, a, f+".args", c.bad)
			c.checkArgNames(f+".args", cs.target, a)
		case string:
			cs.args = compileTree(c.stepEnv, a, f+".args", c.bad)
		default:
			c.bad(f+".args", "must be an object, or one CEL expression that gives an object")
		}
	case KindScore:
		cs.score = c.expr(c.stepEnv, s.Score, f+".score", wantNumber)
		cs.saveAs = orDefault(s.SaveAs, "score")
	case KindRoute:
		cs.saveAs = orDefault(s.SaveAs, "queue")
		cs.route = c.compileRoute(f+".route", s.Route)
	case KindSet:
		if len(s.Set) == 0 {
			c.bad(f+".set", "set needs at least one name")
		}
		cs.set = compileTree(c.stepEnv, s.Set, f+".set", c.bad)
	case KindGoto:
		idx := actions[s.Goto]
		switch {
		case len(idx) == 0:
			c.bad(f+".goto", fmt.Sprintf("no step has action %q", s.Goto))
		case len(idx) > 1:
			c.bad(f+".goto", fmt.Sprintf("%d steps have action %q; a goto target must be unique", len(idx), s.Goto))
		default:
			cs.gotoIdx = idx[0]
		}
	case KindPlan:
		cs.plan = c.compilePlan(f+".plan", s.Plan)
		cs.saveAs = c.planSaveAs(f, s)
	case KindApprove:
		cs.approve = c.compileApprove(f+".approve", s.Approve)
	case KindFinish:
		if s.Finish.Literal {
			if !IsSlug(s.Finish.Outcome) {
				c.bad(f+".finish", fmt.Sprintf("%q is not a slug; use {\"outcome\": \"<CEL>\"} for an expression", s.Finish.Outcome))
			}
			cs.finLit = s.Finish.Outcome
		} else {
			cs.finExpr = c.expr(c.stepEnv, s.Finish.Outcome, f+".finish.outcome", wantString)
		}
	}
	return cs
}

func (c *compiler) continueFlag(field, v, kind string) bool {
	switch v {
	case "":
		return false
	case "continue", "end":
		switch {
		case kind == KindApprove && strings.HasSuffix(field, ".on_denied"):
		case kind != KindCall && kind != KindPlan:
			c.bad(field, "only call and plan steps make tool calls (and approve steps may continue when denied)")
		}
		return v == "continue"
	}
	c.bad(field, fmt.Sprintf("must be \"continue\" or \"end\", not %q", v))
	return false
}

// Decisions on timeout.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

func (c *compiler) compileApprove(field string, a *Approve) *capprove {
	ca := &capprove{scope: a.ApproverScope, timeout: DefaultApprovalTimeout, onTimeout: orDefault(a.OnTimeout, DecisionDeny), allowSelf: a.AllowSelf}
	if a.When != "" {
		ca.when = c.expr(c.stepEnv, a.When, field+".when", wantBool)
	}
	if a.Reason != "" {
		ca.reason = c.expr(c.stepEnv, a.Reason, field+".reason", wantString)
	}
	if a.ApproverScope != "" && !auth.ValidScope(a.ApproverScope) {
		c.bad(field+".approver_scope", fmt.Sprintf("%q is not one scope (printable ASCII without spaces, quotes or backslashes, at most 256 characters)", a.ApproverScope))
	}
	if a.Timeout != "" {
		d, err := time.ParseDuration(a.Timeout)
		switch {
		case err != nil:
			c.bad(field+".timeout", fmt.Sprintf("%q is not a duration such as \"30m\" or \"24h\"", a.Timeout))
		case d < MinApprovalTimeout || d > MaxApprovalTimeout:
			c.bad(field+".timeout", fmt.Sprintf("must be from %v to %v (720h)", MinApprovalTimeout, MaxApprovalTimeout))
		default:
			ca.timeout = d
		}
	}
	if ca.onTimeout != DecisionApprove && ca.onTimeout != DecisionDeny {
		c.bad(field+".on_timeout", fmt.Sprintf("must be \"deny\" or \"approve\", not %q", a.OnTimeout))
	}
	return ca
}

// resolveCall checks "<tool>.<operation id>".
func (c *compiler) resolveCall(field, ref string) (target, bool) {
	toolName, opID, ok := strings.Cut(ref, ".")
	if !ok || toolName == "" || opID == "" {
		c.bad(field, fmt.Sprintf("%q is not <tool>.<operation id>", ref))
		return target{}, false
	}
	if !c.allowed[toolName] {
		c.bad(field, fmt.Sprintf("tool %q is not in the agent's tools", toolName))
		return target{}, false
	}
	if !c.catalog.Has(toolName) {
		return target{}, false // reported under tools[]
	}
	op, ok := c.catalog.Operation(toolName, opID)
	if !ok {
		c.bad(field, fmt.Sprintf("tool %q has no operation %q", toolName, opID))
		return target{}, false
	}
	return target{tool: toolName, op: op}, true
}

// checkArgNames refuses argument names the called operation does not take,
// which would otherwise fail only when the step runs.
func (c *compiler) checkArgNames(field string, t target, args map[string]any) {
	if t.op.Arguments == nil {
		return
	}
	for _, k := range sortedKeys(args) {
		if slices.Contains(t.op.Arguments, k) {
			continue
		}
		msg := fmt.Sprintf("%q is not an argument of %s.%s", k, t.tool, t.op.ID)
		for _, n := range t.op.Arguments {
			if strings.EqualFold(n, k) {
				msg += fmt.Sprintf(" (did you mean %q?)", n)
			}
		}
		if len(t.op.Arguments) == 0 {
			msg += "; it takes none"
		} else {
			msg += "; it takes " + strings.Join(t.op.Arguments, ", ")
		}
		c.bad(field+"."+k, msg)
	}
}

func (c *compiler) compileRoute(field string, cases []RouteCase) []croute {
	if len(cases) == 0 {
		c.bad(field, "route needs at least one case")
	}
	out := make([]croute, len(cases))
	for j, rc := range cases {
		f := fmt.Sprintf("%s[%d]", field, j)
		if rc.Queue == "" {
			c.bad(f+".queue", "queue is required")
		}
		out[j].queue = rc.Queue
		switch {
		case rc.When != "":
			out[j].when = c.expr(c.stepEnv, rc.When, f+".when", wantBool)
		case j != len(cases)-1:
			c.bad(f+".when", "only the last case may omit when")
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
