package agent

import (
	"github.com/agentplane/agentplane/internal/tool"
)

// Catalog is a ToolCatalog held in memory, built from registered tools
// and the names of the models the tenant may use.
type Catalog struct {
	tools  map[string]*catalogTool
	models map[string]bool
}

type catalogTool struct {
	ops   map[string]OperationInfo
	order []string
}

var _ ToolCatalog = (*Catalog)(nil)

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{tools: map[string]*catalogTool{}, models: map[string]bool{}}
}

// AddModel makes a model name known to the catalog.
func (c *Catalog) AddModel(name string) { c.models[name] = true }

// HasModel implements ToolCatalog.
func (c *Catalog) HasModel(name string) bool { return c.models[name] }

// Add registers a tool and its operations, replacing any tool of that name.
func (c *Catalog) Add(t *tool.Tool, ops []tool.Operation) {
	ct := &catalogTool{ops: make(map[string]OperationInfo, len(ops))}
	for _, op := range ops {
		desc := op.Summary
		if desc == "" {
			desc = op.Description
		} else if op.Description != "" && op.Description != op.Summary {
			desc += "\n" + op.Description
		}
		if _, dup := ct.ops[op.ID]; !dup {
			ct.order = append(ct.order, op.ID)
		}
		ct.ops[op.ID] = OperationInfo{
			ID:          op.ID,
			Kind:        op.Kind,
			PolicyClass: t.PolicyClass,
			Description: desc,
			InputSchema: op.Input,
			Arguments:   op.ArgumentNames(),
		}
	}
	c.tools[t.Name] = ct
}

// Has implements ToolCatalog.
func (c *Catalog) Has(name string) bool {
	_, ok := c.tools[name]
	return ok
}

// Operation implements ToolCatalog.
func (c *Catalog) Operation(toolName, id string) (OperationInfo, bool) {
	t, ok := c.tools[toolName]
	if !ok {
		return OperationInfo{}, false
	}
	op, ok := t.ops[id]
	return op, ok
}

// Operations implements ToolCatalog.
func (c *Catalog) Operations(toolName string) []OperationInfo {
	t, ok := c.tools[toolName]
	if !ok {
		return nil
	}
	out := make([]OperationInfo, 0, len(t.order))
	for _, id := range t.order {
		out = append(out, t.ops[id])
	}
	return out
}
