package agent

import (
	"context"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
)

// CallCondition is a CEL bool over one tool call, seeing only `tool`,
// `operation` and `args` (a replay's fault injection decides with it which
// calls a fault applies to).
type CallCondition struct{ e *expr }

// callEnv is the CEL environment of call conditions.
var callEnv = sync.OnceValues(func() (*cel.Env, error) {
	env, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("operation", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Math(),
		ext.Lists(),
	)
	if err != nil {
		return nil, err
	}
	return env.Extend(cel.CustomTypeAdapter(sortedAdapter{env.CELTypeAdapter()}))
})

// CompileCallCondition compiles src, a CEL bool over tool, operation and
// args; the message says what is wrong when it does not compile.
func CompileCallCondition(src string) (*CallCondition, string) {
	env, err := callEnv()
	if err != nil {
		return nil, "cel environment: " + err.Error()
	}
	e, msg := compileExpr(env, src, wantBool)
	if msg != "" {
		return nil, msg
	}
	return &CallCondition{e: e}, ""
}

// Holds evaluates the condition for one call; an evaluation error (a
// missing key, a wrong type) is returned.
func (c *CallCondition) Holds(ctx context.Context, toolName, opID string, args map[string]any) (bool, error) {
	act := &activation{context: map[string]any{}, caller: map[string]any{}, saved: map[string]any{}, declared: map[string]bool{},
		policy: &policyVars{tool: toolName, operation: opID, args: normalize(args)}}
	return c.e.evalBool(ctx, act)
}
