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
type programCache struct {
	mu sync.Mutex
	m  map[string]cachedProgram
}

type cachedProgram struct {
	revs string
	prog *agent.Program
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

func (c *programCache) get(key, revs string) *agent.Program {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.revs == revs {
		return e.prog
	}
	return nil
}

func (c *programCache) put(key, revs string, p *agent.Program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; c.m == nil || !ok && len(c.m) >= maxCachedPrograms {
		c.m = map[string]cachedProgram{}
	}
	c.m[key] = cachedProgram{revs: revs, prog: p}
}
