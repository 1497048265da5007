package tool

import (
	"context"
	"encoding/json"

	"github.com/agentplane/agentplane/internal/problem"
)

// Limits of an operation search: its words and the operations of one page.
const (
	MaxFindQuery = 200
	MaxFindLimit = 100
	// maxFindTools bounds the tools one search of a tenant reads.
	maxFindTools = 1000
)

// FindStore is what a Finder reads of the tool store.
type FindStore interface {
	ToolByName(ctx context.Context, tenant, name string) (*Tool, error)
	ListTools(ctx context.Context, tenant string, opt ListOptions) ([]*Tool, error)
	Operations(ctx context.Context, tenant, toolID, q string) ([]Operation, error)
}

// Finder searches the operations of a tenant's tools, through the search
// indexes of their current revisions: the one search of the API's
// GET /v1/operations, the console's and MCP's search_operations.
type Finder struct {
	Tools   FindStore
	Indexes *IndexCache
}

// FindQuery is what an operation search asks for.
type FindQuery struct {
	// Q are the words looked for; "" lists every operation.
	Q             string
	Kind          string
	Limit, Offset int
	// Full shows each operation's input and output schemas.
	Full bool
}

// Check validates what q asks for; qField names Q as the request that
// asks spells it.
func (q FindQuery) Check(qField string) []problem.FieldError {
	var errs []problem.FieldError
	if len(q.Q) > MaxFindQuery {
		errs = append(errs, problem.FieldError{Field: qField, Message: "must be at most 200 characters"})
	}
	if q.Kind != "" && q.Kind != Read && q.Kind != Write {
		errs = append(errs, problem.FieldError{Field: "kind", Message: "must be read or write"})
	}
	if q.Limit < 1 || q.Limit > MaxFindLimit {
		errs = append(errs, problem.FieldError{Field: "limit", Message: "must be an integer from 1 to 100"})
	}
	return errs
}

// Found is an operation a search found, as the API shows it: slim, with its
// score when there was a query, and its schemas when the query was Full.
type Found struct {
	OperationRef
	Score  *float64        `json:"score,omitempty"`
	Input  json.RawMessage `json:"input_schema,omitempty"`
	Output json.RawMessage `json:"output_schema,omitempty"`
}

// FoundPage is one page of a search's results.
type FoundPage struct {
	Operations []Found
	// Next is the offset of the next page; 0 on the last.
	Next int
}

// scoredHit is a hit of one tool among several.
type scoredHit struct {
	Hit
	t *Tool
}

// Search searches the operations of every tool of the tenant, or of the one
// named toolName when it is not "".
func (f *Finder) Search(ctx context.Context, tenant, toolName string, q FindQuery) (FoundPage, error) {
	var tools []*Tool
	if toolName != "" {
		t, err := f.Tools.ToolByName(ctx, tenant, toolName)
		if err != nil {
			return FoundPage{}, err
		}
		tools = append(tools, t)
	} else {
		after := ""
		for len(tools) < maxFindTools {
			batch, err := f.Tools.ListTools(ctx, tenant, ListOptions{Limit: 200, After: after})
			if err != nil {
				return FoundPage{}, err
			}
			tools = append(tools, batch...)
			if len(batch) < 200 {
				break
			}
			after = batch[len(batch)-1].ID
		}
	}
	lists := make([][]Hit, 0, len(tools))
	byName := make(map[string]*Tool, len(tools))
	for _, t := range tools {
		ix, err := f.index(ctx, t)
		if err != nil {
			return FoundPage{}, err
		}
		lists = append(lists, ix.Search(q.Q, q.Kind))
		byName[t.Name] = t
	}
	merged := MergeHits(lists)
	hits := make([]scoredHit, len(merged))
	for i, h := range merged {
		hits[i] = scoredHit{h, byName[h.Tool]}
	}
	return f.page(ctx, q, hits)
}

// SearchTool searches the operations of one tool.
func (f *Finder) SearchTool(ctx context.Context, t *Tool, q FindQuery) (FoundPage, error) {
	ix, err := f.index(ctx, t)
	if err != nil {
		return FoundPage{}, err
	}
	var hits []scoredHit
	for _, h := range ix.Search(q.Q, q.Kind) {
		hits = append(hits, scoredHit{h, t})
	}
	return f.page(ctx, q, hits)
}

// index is the search index of t's current revision.
func (f *Finder) index(ctx context.Context, t *Tool) (*SearchIndex, error) {
	return f.Indexes.Index(t, func() ([]Operation, error) {
		return f.Tools.Operations(ctx, t.Tenant, t.ID, "")
	})
}

// page cuts one page of hits and shows it, loading schemas when Full.
func (f *Finder) page(ctx context.Context, q FindQuery, hits []scoredHit) (FoundPage, error) {
	pg := FoundPage{Operations: []Found{}}
	offset := min(q.Offset, len(hits))
	end := min(offset+q.Limit, len(hits))
	if end < len(hits) {
		pg.Next = end
	}
	full := map[string]map[string]*Operation{} // tool id → op id → operation
	for _, h := range hits[offset:end] {
		res := Found{OperationRef: h.OperationRef}
		if q.Q != "" {
			sc := h.Score
			res.Score = &sc
		}
		if q.Full {
			ops, ok := full[h.t.ID]
			if !ok {
				all, err := f.Tools.Operations(ctx, h.t.Tenant, h.t.ID, "")
				if err != nil {
					return pg, err
				}
				ops = make(map[string]*Operation, len(all))
				for i := range all {
					ops[all[i].ID] = &all[i]
				}
				full[h.t.ID] = ops
			}
			if op := ops[h.ID]; op != nil {
				res.Input, res.Output = op.Input, op.Output
			}
		}
		pg.Operations = append(pg.Operations, res)
	}
	return pg, nil
}
