package workflow

import (
	"strconv"
	"sync"

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
