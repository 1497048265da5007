// Package catalogcache keeps what an invocation reads of its tenant's
// catalog (the agent's version, the version's tools, the agent's active
// rollout) for as long as the tenant's catalog generation is the one it
// was read at. The store bumps the generation in the same transaction as
// any change to agents, versions, tools or rollouts, on every replica's
// behalf, so an entry is never served after a change has committed.
//
// An invocation reads the generation once (Cache.At); the reads made with
// the context At returns are served from the cache while the generation
// holds, one small read in place of three or more. Reads made with any
// other context go to the store.
//
// Invocations arriving together share their generation reads, as writes
// share a commit: one read is made at a time per tenant, and the callers
// arriving while it is made wait for the next, which starts once it is
// done, so each caller still gets a generation read after it arrived.
package catalogcache

import (
	"context"
	"sync"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Generations reads a tenant's catalog generation.
type Generations interface {
	CatalogGeneration(ctx context.Context, tenant string) (int64, error)
}

// DefaultSize is how many reads a cache keeps by default.
const DefaultSize = 4096

// Cache keeps catalog reads by tenant and generation.
type Cache struct {
	gens    Generations
	entries *lru.Cache[key, entry]

	mu sync.Mutex
	// reading are the tenants whose generation is being read.
	reading map[string]*reads
}

// reads are a tenant's generation reads: the one being made, and the one
// the callers arriving meanwhile wait for, made after it.
type reads struct {
	running, next *genRead
}

// genRead is one read of a generation, shared by the callers that arrived
// before it began.
type genRead struct {
	done chan struct{}
	// sharers counts the callers that wait for it besides its maker.
	sharers int
	gen     int64
	err     error
}

// New returns a cache of at most size reads (DefaultSize when size < 1).
func New(gens Generations, size int) *Cache {
	if size < 1 {
		size = DefaultSize
	}
	entries, _ := lru.New[key, entry](size)
	return &Cache{gens: gens, entries: entries, reading: map[string]*reads{}}
}

// key names a read: its kind and arguments.
type key struct {
	kind         byte
	tenant, a, b string
}

// entry is a read's answer (a value, or a not-found error) at gen.
type entry struct {
	gen int64
	v   any
	err error
}

type atKey struct{}

// at is the generation an invocation read.
type at struct {
	c      *Cache
	tenant string
	gen    int64
}

// At returns ctx carrying the tenant's catalog generation, read now: the
// reads made with it come from the cache while the generation holds. When
// the generation cannot be read, ctx is returned as it is, and its reads go
// to the store (which reports its own errors).
func (c *Cache) At(ctx context.Context, tenant string) context.Context {
	gen, err := c.generation(ctx, tenant)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, atKey{}, at{c: c, tenant: tenant, gen: gen})
}

// generation reads the tenant's generation, or takes it from a read that
// began after the call and that another caller made. The caller that
// makes a read makes it with its own ctx: when that ends the read, the
// callers sharing it go to the store too.
func (c *Cache) generation(ctx context.Context, tenant string) (int64, error) {
	c.mu.Lock()
	t := c.reading[tenant]
	if t == nil {
		t = &reads{}
		c.reading[tenant] = t
	}
	if r := t.next; r != nil {
		r.sharers++
		c.mu.Unlock()
		select {
		case <-r.done:
			return r.gen, r.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	r := &genRead{done: make(chan struct{})}
	before := t.running
	if before == nil {
		t.running = r
	} else {
		t.next = r
	}
	c.mu.Unlock()
	if before != nil {
		<-before.done // one read's time: it ends as its store read does
		c.mu.Lock()
		t.running, t.next = r, nil
		c.mu.Unlock()
	}
	r.gen, r.err = c.gens.CatalogGeneration(ctx, tenant)
	c.mu.Lock()
	t.running = nil
	if t.next == nil {
		delete(c.reading, tenant)
	}
	c.mu.Unlock()
	close(r.done)
	return r.gen, r.err
}

// lookup answers the read k from the cache when ctx carries k's tenant's
// generation and the cache holds k at it, else with read, kept when it
// found something or found that nothing is there. Each caller gets its
// own copy of a value (clone).
func lookup[T any](ctx context.Context, c *Cache, k key, read func() (T, error), clone func(T) T) (T, error) {
	a, ok := ctx.Value(atKey{}).(at)
	if !ok || a.c != c || a.tenant != k.tenant {
		return read()
	}
	if e, ok := c.entries.Get(k); ok && e.gen == a.gen {
		if e.err != nil {
			var zero T
			return zero, e.err
		}
		return clone(e.v.(T)), nil
	}
	v, err := read()
	switch {
	case err == nil:
		c.entries.Add(k, entry{gen: a.gen, v: v})
		return clone(v), nil
	case problem.Is(err, problem.NotFound):
		c.entries.Add(k, entry{gen: a.gen, err: err})
	}
	return v, err
}

// shallow copies a struct behind a pointer.
func shallow[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Versions is a version store whose AgentVersion reads go through a cache.
type Versions struct {
	agent.VersionStore
	Cache *Cache
}

// AgentVersion implements agent.VersionStore.
func (v Versions) AgentVersion(ctx context.Context, tenant, name, version string) (*agent.Version, error) {
	return lookup(ctx, v.Cache, key{kind: 'v', tenant: tenant, a: name, b: version}, func() (*agent.Version, error) {
		return v.VersionStore.AgentVersion(ctx, tenant, name, version)
	}, shallow[agent.Version])
}

// Tools is a tool lookup whose ToolByName reads go through a cache.
type Tools struct {
	workflow.ToolLookup
	Cache *Cache
}

// ToolByName implements workflow.ToolLookup.
func (t Tools) ToolByName(ctx context.Context, tenant, name string) (*tool.Tool, error) {
	return lookup(ctx, t.Cache, key{kind: 't', tenant: tenant, a: name}, func() (*tool.Tool, error) {
		return t.ToolLookup.ToolByName(ctx, tenant, name)
	}, shallow[tool.Tool])
}

// Rollouts is a rollout store whose ActiveRollout reads go through a cache.
type Rollouts struct {
	rollout.Store
	Cache *Cache
}

// ActiveRollout implements rollout.Store.
func (r Rollouts) ActiveRollout(ctx context.Context, tenant, agentName string) (*rollout.Rollout, error) {
	return lookup(ctx, r.Cache, key{kind: 'r', tenant: tenant, a: agentName}, func() (*rollout.Rollout, error) {
		return r.Store.ActiveRollout(ctx, tenant, agentName)
	}, shallow[rollout.Rollout])
}
