package workflow

import (
	"fmt"
	"testing"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/tool"
)

// TestOpCacheKeysByRevision checks that an operation cached for one
// revision of a tool is not served for another, nor for another tenant.
func TestOpCacheKeysByRevision(t *testing.T) {
	t.Parallel()
	var c opCache
	t1 := &tool.Tool{ID: "tool_1", Tenant: "acme", Revision: 1}
	op := &tool.Operation{ID: "getThing"}
	c.put(t1, "getThing", op)
	if got := c.get(t1, "getThing"); got != op {
		t.Fatalf("same revision: %v", got)
	}
	for name, other := range map[string]*tool.Tool{
		"next revision": {ID: "tool_1", Tenant: "acme", Revision: 2},
		"other tenant":  {ID: "tool_1", Tenant: "globex", Revision: 1},
	} {
		if got := c.get(other, "getThing"); got != nil {
			t.Errorf("%s: served %v", name, got)
		}
	}
	if got := c.get(t1, "other"); got != nil {
		t.Errorf("other operation: served %v", got)
	}
}

// TestProgramCacheKeysByRevisionsAndIsBounded checks that a program is not
// served for other tool revisions, and that the cache stays bounded.
func TestProgramCacheKeysByRevisionsAndIsBounded(t *testing.T) {
	t.Parallel()
	var c programCache
	p := &agent.Program{}
	c.put("acme/settle@1", "tool_1@1,", p)
	if got := c.get("acme/settle@1", "tool_1@1,"); got != p {
		t.Fatalf("same revisions: %v", got)
	}
	if got := c.get("acme/settle@1", "tool_1@2,"); got != nil {
		t.Errorf("next revision: served %v", got)
	}
	for i := range maxCachedPrograms + 1 {
		c.put(fmt.Sprintf("acme/a%d@1", i), "", p)
	}
	if n := len(c.m); n > maxCachedPrograms {
		t.Errorf("%d programs cached, at most %d", n, maxCachedPrograms)
	}
}
