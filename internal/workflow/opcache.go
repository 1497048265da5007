package workflow

import (
	"strconv"
	"strings"
	"sync"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/tool"
)

// maxCachedOps bounds the operation cache; it starts over when full.
const maxCachedOps = 4096

// opCache keeps decoded operations by tool id and revision. A tool's
// operations change only with a new revision, so an entry never goes stale:
// a call still reads the tool itself, and with it the current revision.
type opCache struct {
	mu sync.Mutex
	m  map[string]*tool.Operation
}

func opKey(t *tool.Tool, opID string) string {
	return t.Tenant + "/" + t.ID + "@" + strconv.Itoa(t.Revision) + "/" + opID
}

func (c *opCache) get(t *tool.Tool, opID string) *tool.Operation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[opKey(t, opID)]
}

func (c *opCache) put(t *tool.Tool, opID string, op *tool.Operation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedOps {
		c.m = map[string]*tool.Operation{}
	}
	c.m[opKey(t, opID)] = op
}

// maxCachedPrograms bounds the program cache; it starts over when full.
const maxCachedPrograms = 1024

// programCache keeps compiled programs by tenant and name@version, each
// with the revisions of the tools it was compiled against: a program is
// served only while its tools are unchanged, since it holds their policy
// classes, kinds and schemas.
type programCache = revCache[*agent.Program]

// revCache keeps what was compiled from a version and the revisions of its
// tools: a program, or an external version's governance.
type revCache[T any] struct {
	mu sync.Mutex
	m  map[string]cached[T]
}

type cached[T any] struct {
	revs string
	v    T
}

// revisions names the id and revision of each tool, "-" for a missing one.
func revisions(tools []*tool.Tool) string {
	var b strings.Builder
	for _, t := range tools {
		if t == nil {
			b.WriteString("-,")
			continue
		}
		b.WriteString(t.ID + "@" + strconv.Itoa(t.Revision) + ",")
	}
	return b.String()
}

func (c *revCache[T]) get(key, revs string) (v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.revs == revs {
		return e.v
	}
	return v
}

func (c *revCache[T]) put(key, revs string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; c.m == nil || !ok && len(c.m) >= maxCachedPrograms {
		c.m = map[string]cached[T]{}
	}
	c.m[key] = cached[T]{revs: revs, v: v}
}
