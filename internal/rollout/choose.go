package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// buckets is how finely a key's hash divides the invocations: a percent
// is taken to two decimals.
const buckets = 10_000

var _ workflow.ArmChooser = (*Service)(nil)

// Choose is the arm of the agent's active canary an invocation of its
// default version runs: the target for the rollout's share of sticky keys
// (the sticky expression's value over the request; without one, or when it
// gives nothing, the request's idempotency key, else the workflow's id).
// The choice depends on the stored rollout and the request alone, so every
// replica makes the same. A shadow's invocations run the default, marked so
// their ends are replayed.
func (s *Service) Choose(ctx context.Context, req workflow.StartRequest, workflowID string) (string, *workflow.RolloutArm, error) {
	r, err := s.Store.ActiveRollout(ctx, req.Tenant, req.Agent)
	if problem.Is(err, problem.NotFound) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	arm := &workflow.RolloutArm{ID: r.ID, Arm: workflow.ArmDefault}
	if r.Mode != Canary || !takes(r, s.key(ctx, r, req, workflowID)) {
		return "", arm, nil
	}
	arm.Arm = workflow.ArmCanary
	return r.Target, arm, nil
}

// key is the sticky key of an invocation.
func (s *Service) key(ctx context.Context, r *Rollout, req workflow.StartRequest, workflowID string) string {
	if r.Sticky != "" {
		if k, ok := s.sticky.eval(ctx, r.Sticky, req); ok {
			return "sticky:" + k
		}
	}
	if req.IdempotencyKey != "" {
		return "key:" + req.IdempotencyKey
	}
	return "workflow:" + workflowID
}

// takes reports whether the key falls in the rollout's share: a hash of
// the rollout's id and the key, so each rollout draws its own share.
func takes(r *Rollout, key string) bool {
	return bucket(r.ID, key) < int(r.Percent*buckets/100+0.5)
}

// bucket places a key of a rollout in 0..buckets-1.
func bucket(rolloutID, key string) int {
	sum := sha256.Sum256([]byte(rolloutID + "\n" + key))
	return int(binary.BigEndian.Uint64(sum[:8]) % buckets)
}

// programs are compiled sticky expressions by source: compiled code, not
// state; any replica compiles the same. At most maxPrograms are kept (a
// PUT compiles its sticky whether or not its rollout starts).
type programs struct {
	mu sync.Mutex
	m  map[string]cel.Program
}

// maxPrograms bounds the sticky expressions kept compiled.
const maxPrograms = 1000

var stickyEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("goal", cel.StringType),
		cel.Variable("context", cel.DynType),
		cel.Variable("caller", cel.DynType),
		cel.OptionalTypes(),
		ext.Strings(), ext.Encoders(),
	)
})

// compile compiles a sticky expression; the message says what is wrong.
func (p *programs) compile(src string) (cel.Program, string) {
	p.mu.Lock()
	prg, ok := p.m[src]
	p.mu.Unlock()
	if ok {
		return prg, ""
	}
	if len(src) > 4096 {
		return nil, "is longer than 4096 bytes"
	}
	env, err := stickyEnv()
	if err != nil {
		return nil, err.Error()
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, "is not a valid CEL expression over goal, context and caller: " + iss.Err().Error()
	}
	if msg := agent.OverCostLimit(env, ast); msg != "" {
		return nil, msg
	}
	prg, err = env.Program(ast, cel.CostLimit(agent.CostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, "cannot be planned: " + err.Error()
	}
	p.mu.Lock()
	if p.m == nil || len(p.m) >= maxPrograms {
		p.m = map[string]cel.Program{}
	}
	p.m[src] = prg
	p.mu.Unlock()
	return prg, ""
}

// eval is the sticky key an expression gives for a request, false when it
// gives no value (a missing context field, null, an error).
func (p *programs) eval(ctx context.Context, src string, req workflow.StartRequest) (string, bool) {
	prg, msg := p.compile(src)
	if msg != "" {
		return "", false
	}
	c := req.Context
	if c == nil {
		c = map[string]any{}
	}
	v, _, err := prg.ContextEval(ctx, map[string]any{"goal": req.Goal, "context": c,
		"caller": map[string]any{"sub": req.Caller.Sub, "client_id": req.Caller.ClientID}})
	if err != nil || v == nil || v == types.NullValue {
		return "", false
	}
	return keyOf(v)
}

// keyOf is a CEL value as a sticky key.
func keyOf(v ref.Val) (string, bool) {
	switch x := v.Value().(type) {
	case string:
		return "s:" + x, true
	case []byte:
		return "b:" + string(x), true
	default:
		s := fmt.Sprint(x)
		return strings.ToLower(fmt.Sprintf("%T", x)) + ":" + s, true
	}
}
