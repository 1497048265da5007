package agent

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// CostLimit bounds the runtime cost of every expression evaluation; an
// expression over it fails (and so does its step) instead of running long.
const CostLimit = 100_000

// Variables every expression sees, and those only a policy rule sees.
var (
	builtinNames = []string{"goal", "context", "caller", "steps"}
	policyNames  = []string{"tool", "operation", "args"}
)

var (
	identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// celReserved are CEL's reserved words and literals.
	celReserved = map[string]bool{
		"true": true, "false": true, "null": true, "in": true, "as": true, "break": true,
		"const": true, "continue": true, "else": true, "for": true, "function": true,
		"if": true, "import": true, "let": true, "loop": true, "package": true,
		"namespace": true, "return": true, "var": true, "void": true, "while": true,
	}
)

// checkName says what is wrong with a name a step saves, or "".
func checkName(name string) string {
	switch {
	case !identRE.MatchString(name):
		return fmt.Sprintf("%q is not a name: use letters, digits and _ and start with a letter or _", name)
	case celReserved[name]:
		return fmt.Sprintf("%q is a reserved word", name)
	}
	for _, b := range append(builtinNames, policyNames...) {
		if name == b {
			return fmt.Sprintf("%q is a built-in variable", name)
		}
	}
	return ""
}

// newEnvs returns the CEL environment of step expressions and the one of
// policy rules, declaring every saved name as dyn.
func newEnvs(names []string) (stepEnv, policyEnv *cel.Env, err error) {
	dynMap := cel.MapType(cel.StringType, cel.DynType)
	opts := []cel.EnvOption{
		cel.Variable("goal", cel.StringType),
		cel.Variable("context", dynMap),
		cel.Variable("caller", dynMap),
		cel.Variable("steps", dynMap),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Math(),
		ext.Lists(),
	}
	for _, n := range names {
		opts = append(opts, cel.Variable(n, cel.DynType))
	}
	stepEnv, err = cel.NewEnv(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("cel environment: %w", err)
	}
	stepEnv, err = stepEnv.Extend(cel.CustomTypeAdapter(sortedAdapter{stepEnv.CELTypeAdapter()}))
	if err != nil {
		return nil, nil, fmt.Errorf("cel environment: %w", err)
	}
	policyEnv, err = stepEnv.Extend(
		cel.Variable("tool", cel.StringType),
		cel.Variable("operation", cel.StringType),
		cel.Variable("args", dynMap),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("cel policy environment: %w", err)
	}
	return stepEnv, policyEnv, nil
}

// want is the result type an expression must have.
type want int

const (
	wantAny want = iota
	wantBool
	wantNumber
	wantString
)

func (w want) accepts(t *cel.Type) bool {
	if t == nil || t.IsExactType(cel.DynType) {
		return true
	}
	switch w {
	case wantBool:
		return t.IsExactType(cel.BoolType)
	case wantNumber:
		return t.IsExactType(cel.DoubleType) || t.IsExactType(cel.IntType) || t.IsExactType(cel.UintType)
	case wantString:
		return t.IsExactType(cel.StringType)
	}
	return true
}

func (w want) String() string {
	return [...]string{"any value", "bool", "number", "string"}[w]
}

// expr is a compiled CEL expression.
type expr struct {
	src string
	prg cel.Program
}

// compileExpr parses, checks and plans src; the message says what is wrong.
func compileExpr(env *cel.Env, src string, w want) (*expr, string) {
	if strings.TrimSpace(src) == "" {
		return nil, "expression is empty"
	}
	parsed, iss := env.Parse(src)
	if iss.Err() != nil {
		return nil, "syntax error: " + issueText(iss)
	}
	checked, iss := env.Check(parsed)
	if iss.Err() != nil {
		return nil, "type error: " + issueText(iss)
	}
	if !w.accepts(checked.OutputType()) {
		return nil, fmt.Sprintf("type error: expression gives %s, want %s", checked.OutputType(), w)
	}
	if msg := OverCostLimit(env, checked); msg != "" {
		return nil, msg
	}
	prg, err := env.Program(checked,
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(100),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		return nil, "cannot plan expression: " + err.Error()
	}
	return &expr{src: src, prg: prg}, ""
}

// OverCostLimit says why a checked expression is certain to pass
// CostLimit whatever its inputs, so that it would be stopped at every
// evaluation; "" when it may finish under it.
func OverCostLimit(env *cel.Env, checked *cel.Ast) string {
	if est, err := env.EstimateCost(checked, unknownSizes{}); err == nil && est.Min > CostLimit {
		return fmt.Sprintf("expression costs at least %d to evaluate, over the limit of %d: it would be stopped at every run", est.Min, CostLimit)
	}
	return ""
}

// unknownSizes is a cost estimator that knows no sizes: the estimate's
// minimum is then what the expression costs whatever its inputs.
type unknownSizes struct{}

func (unknownSizes) EstimateSize(cost.AstNode) *cost.SizeEstimate { return nil }

func (unknownSizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// issueText renders CEL issues on one line each, with their positions.
func issueText(iss *cel.Issues) string {
	var parts []string
	for _, e := range iss.Errors() {
		parts = append(parts, fmt.Sprintf("%s (line %d, column %d)", e.Message, e.Location.Line(), e.Location.Column()+1))
	}
	return strings.Join(parts, "; ")
}

// eval evaluates the expression against an activation.
func (e *expr) eval(ctx context.Context, act interpreter.Activation) (ref.Val, error) {
	out, _, err := e.prg.ContextEval(ctx, act)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("evaluate %q: %w", e.src, err)
	}
	return out, nil
}

func (e *expr) evalBool(ctx context.Context, act interpreter.Activation) (bool, error) {
	v, err := e.eval(ctx, act)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("evaluate %q: got %s, want bool", e.src, v.Type().TypeName())
	}
	return bool(b), nil
}

func (e *expr) evalString(ctx context.Context, act interpreter.Activation) (string, error) {
	v, err := e.eval(ctx, act)
	if err != nil {
		return "", err
	}
	s, ok := v.(types.String)
	if !ok {
		return "", fmt.Errorf("evaluate %q: got %s, want string", e.src, v.Type().TypeName())
	}
	return string(s), nil
}

func (e *expr) evalNumber(ctx context.Context, act interpreter.Activation) (float64, error) {
	v, err := e.eval(ctx, act)
	if err != nil {
		return 0, err
	}
	var f float64
	switch n := v.(type) {
	case types.Double:
		f = float64(n)
	case types.Int:
		f = float64(n)
	case types.Uint:
		f = float64(n)
	default:
		return 0, fmt.Errorf("evaluate %q: got %s, want number", e.src, v.Type().TypeName())
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("evaluate %q: %v is not a finite number", e.src, f)
	}
	return f, nil
}

func (e *expr) evalJSON(ctx context.Context, act interpreter.Activation) (any, error) {
	v, err := e.eval(ctx, act)
	if err != nil {
		return nil, err
	}
	out, err := toJSONValue(v)
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", e.src, err)
	}
	return out, nil
}

// activation resolves expression variables from a run's state.
type activation struct {
	goal     string
	context  map[string]any
	caller   map[string]any
	saved    map[string]any
	declared map[string]bool
	// policy is set only while a policy rule evaluates.
	policy *policyVars
}

type policyVars struct {
	tool, operation string
	args            map[string]any
}

var _ interpreter.Activation = (*activation)(nil)

// ResolveName implements interpreter.Activation; a declared name not yet
// saved resolves to null.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "goal":
		return a.goal, true
	case "context":
		return a.context, true
	case "caller":
		return a.caller, true
	case "steps":
		return a.saved, true
	}
	if a.policy != nil {
		switch name {
		case "tool":
			return a.policy.tool, true
		case "operation":
			return a.policy.operation, true
		case "args":
			return a.policy.args, true
		}
	}
	if v, ok := a.saved[name]; ok {
		return v, true
	}
	if a.declared[name] {
		return types.NullValue, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }
