package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/problem"
)

// Invoker starts workflows, or attaches to the workflow an idempotency key
// already made: the one way REST invoke, A2A messages, MCP calls, schedules
// and real replays start workflows (docs/workflows.md).
//
// A key is stored with its workflow, unique in the tenant, in the
// transaction that creates it (Workflow.IdempotencyKey), so a repeat finds
// the workflow whatever became of the first request; a repeat whose request
// differs (another Fingerprint) is refused with ErrKeyReused.
type Invoker struct {
	Runner    *Runner
	Workflows KeyStore
	// Now is the clock keys expire by.
	Now func() time.Time
}

// KeyStore finds and expires the idempotency keys of workflows (Store).
type KeyStore interface {
	WorkflowByKey(ctx context.Context, tenant, key string) (*Workflow, error)
	ExpireKey(ctx context.Context, tenant, key string, before time.Time) error
}

// Invocation asks for a workflow: the start of a new one, keyed when
// IdempotencyKey is set. Tenant is the Caller's when left out.
type Invocation struct {
	StartRequest
	// TTL is how long after its workflow started a key is honoured; past
	// it the key is taken off that workflow for a new one to take. Zero
	// honours it for as long as the workflow is kept.
	TTL time.Duration
}

// Invoked is the workflow of an invocation.
type Invoked struct {
	Workflow *Workflow
	// Repeat reports that the invocation's key had made the workflow
	// already: the invocation attached to it and started nothing.
	Repeat bool
}

// ErrKeyReused is wrapped by the error of an invocation whose idempotency
// key made a workflow for a request with another fingerprint.
var ErrKeyReused = errors.New("idempotency key reused with a different request")

// keyReused is the problem of a key sent again with another request.
func keyReused() error {
	return problem.Wrap(problem.IdempotencyKeyReused, ErrKeyReused,
		"this Idempotency-Key was used with a different request; use a new key for a new request")
}

// Invoke starts the workflow of in, or attaches to the one its key made.
func (iv *Invoker) Invoke(ctx context.Context, in Invocation) (Invoked, error) {
	if in.IdempotencyKey != "" {
		wf, err := iv.Find(ctx, in.tenant(), in.IdempotencyKey, in.RequestHash, in.TTL)
		if err != nil || wf != nil {
			return Invoked{Workflow: wf, Repeat: wf != nil}, err
		}
	}
	return iv.Start(ctx, in)
}

// Find returns the workflow of the tenant the key made, nil if none did or
// if it started more than ttl ago (the key is then taken off it, for a new
// workflow to take). A workflow made for another fingerprint is
// ErrKeyReused.
func (iv *Invoker) Find(ctx context.Context, tenant, key, fingerprint string, ttl time.Duration) (*Workflow, error) {
	wf, err := iv.Workflows.WorkflowByKey(ctx, tenant, key)
	if problem.Is(err, problem.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if expiry := iv.Now().Add(-ttl); ttl > 0 && wf.StartedAt.Before(expiry) {
		return nil, iv.Workflows.ExpireKey(ctx, tenant, key, expiry)
	}
	if wf.RequestHash != fingerprint {
		return nil, keyReused()
	}
	return wf, nil
}

// Start starts the workflow of in without looking its key up first (Find
// has, or a store's claim stands for it). One that loses the race for its
// key to another invocation attaches to that one's workflow.
func (iv *Invoker) Start(ctx context.Context, in Invocation) (Invoked, error) {
	req := in.StartRequest
	req.Tenant = in.tenant()
	wf, err := iv.Runner.Start(ctx, req)
	if errors.Is(err, ErrKeyTaken) {
		wf, err = iv.Attach(ctx, req.Tenant, req.IdempotencyKey, req.RequestHash)
		return Invoked{Workflow: wf, Repeat: err == nil}, err
	}
	return Invoked{Workflow: wf}, err
}

// Attach returns the workflow another request made with the key, whose
// start refused this one's (ErrKeyTaken). A workflow made for another
// fingerprint is ErrKeyReused.
func (iv *Invoker) Attach(ctx context.Context, tenant, key, fingerprint string) (*Workflow, error) {
	wf, err := iv.Workflows.WorkflowByKey(ctx, tenant, key)
	if err != nil {
		return nil, err
	}
	if wf.RequestHash != fingerprint {
		return nil, keyReused()
	}
	return wf, nil
}

func (in Invocation) tenant() string {
	if in.Tenant == "" {
		return in.Caller.Tenant
	}
	return in.Tenant
}

// IdempotencyKey is the stored form of a request's idempotency key, scoped
// as SPEC §5 says: to its principal and concrete path (the tenant is a
// column of its own).
func IdempotencyKey(principal, path, key string) string {
	return principal + "\n" + path + "\n" + key
}

// Fingerprint identifies a request body: the SHA-256 of its canonical
// form (agent.CanonicalJSON) when it is JSON, so spacing, key order and
// how a number is written do not matter but every digit of an integer
// past 2^53 does, else of its bytes. A body of float64s, as json.Marshal
// writes them, has the fingerprint of its RFC 8785 form, as stored before.
func Fingerprint(body []byte) string {
	canon, err := agent.CanonicalJSON(body)
	if err != nil {
		canon = body
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
