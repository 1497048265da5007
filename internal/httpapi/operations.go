package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// Operation search paging: limit ≤ maxOpLimit, default defaultOpLimit.
const (
	defaultOpLimit = 20
	maxOpLimit     = 100
	maxQueryLen    = 200
)

// opResult is a search result as the API shows it: slim, with its score
// when there was a query, and its schemas with view=full.
type opResult struct {
	tool.OperationRef
	Score  *float64        `json:"score,omitempty"`
	Input  json.RawMessage `json:"input_schema,omitempty"`
	Output json.RawMessage `json:"output_schema,omitempty"`
}

type operationPage struct {
	ToolID     string     `json:"tool_id,omitempty"`
	Query      string     `json:"q,omitempty"`
	Operations []opResult `json:"operations"`
	NextCursor *string    `json:"next_cursor"`
}

// opQuery is what an operation search asks for.
type opQuery struct {
	q, kind       string
	limit, offset int
	full          bool
}

func parseOpQuery(r *http.Request) (opQuery, error) {
	v := r.URL.Query()
	oq := opQuery{q: strings.TrimSpace(v.Get("q")), kind: v.Get("kind"), limit: defaultOpLimit}
	if s := v.Get("limit"); s != "" {
		oq.limit, _ = strconv.Atoi(s) // 0 when not a number: check refuses it
	}
	errs := oq.check()
	if s := v.Get("cursor"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			errs = append(errs, problem.FieldError{Field: "cursor", Message: "is not a cursor of this list: pass next_cursor as it was given"})
		}
		oq.offset = n
	}
	switch v.Get("view") {
	case "", "slim":
	case "full":
		oq.full = true
	default:
		errs = append(errs, problem.FieldError{Field: "view", Message: "must be slim or full"})
	}
	if len(errs) > 0 {
		return oq, problem.Validation(errs...)
	}
	return oq, nil
}

// check validates what a query asks for, whether it came from the query
// string or from MCP's search_operations.
func (oq opQuery) check() []problem.FieldError {
	var errs []problem.FieldError
	if len(oq.q) > maxQueryLen {
		errs = append(errs, problem.FieldError{Field: "q", Message: "must be at most 200 characters"})
	}
	if oq.kind != "" && oq.kind != tool.Read && oq.kind != tool.Write {
		errs = append(errs, problem.FieldError{Field: "kind", Message: "must be read or write"})
	}
	if oq.limit < 1 || oq.limit > maxOpLimit {
		errs = append(errs, problem.FieldError{Field: "limit", Message: "must be an integer from 1 to 100"})
	}
	return errs
}

// index is the search index of t's current revision.
func (s *Server) index(ctx context.Context, t *tool.Tool) (*tool.SearchIndex, error) {
	return s.indexes.Index(t, func() ([]tool.Operation, error) {
		return s.deps.ToolStore.Operations(ctx, t.Tenant, t.ID, "")
	})
}

// scoredHit is a hit of one tool among several.
type scoredHit struct {
	tool.Hit
	t *tool.Tool
}

// page cuts one page of hits and shows it, loading schemas for view=full.
func (s *Server) opPage(ctx context.Context, oq opQuery, hits []scoredHit) (operationPage, error) {
	pg := operationPage{Query: oq.q, Operations: []opResult{}}
	if oq.offset > len(hits) {
		oq.offset = len(hits)
	}
	end := min(oq.offset+oq.limit, len(hits))
	if end < len(hits) {
		c := strconv.Itoa(end)
		pg.NextCursor = &c
	}
	full := map[string]map[string]*tool.Operation{} // tool id → op id → operation
	for _, h := range hits[oq.offset:end] {
		res := opResult{OperationRef: h.OperationRef}
		if oq.q != "" {
			sc := h.Score
			res.Score = &sc
		}
		if oq.full {
			ops, ok := full[h.t.ID]
			if !ok {
				all, err := s.deps.ToolStore.Operations(ctx, h.t.Tenant, h.t.ID, "")
				if err != nil {
					return pg, err
				}
				ops = make(map[string]*tool.Operation, len(all))
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

// handleToolOperations searches one tool's operations.
func (s *Server) handleToolOperations(w http.ResponseWriter, r *http.Request) error {
	oq, err := parseOpQuery(r)
	if err != nil {
		return err
	}
	t, err := s.deps.ToolStore.Tool(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	ix, err := s.index(r.Context(), t)
	if err != nil {
		return err
	}
	var hits []scoredHit
	for _, h := range ix.Search(oq.q, oq.kind) {
		hits = append(hits, scoredHit{h, t})
	}
	pg, err := s.opPage(r.Context(), oq, hits)
	if err != nil {
		return err
	}
	pg.ToolID = t.ID
	return frontdoor.WriteJSON(w, http.StatusOK, pg)
}

// maxSearchTools bounds the tools one GET /v1/operations reads.
const maxSearchTools = 1000

// handleSearchOperations searches the operations of every tool of the
// tenant (or of the one named by tool=) the caller may see.
func (s *Server) handleSearchOperations(w http.ResponseWriter, r *http.Request) error {
	oq, err := parseOpQuery(r)
	if err != nil {
		return err
	}
	pg, err := s.searchOperations(r.Context(), frontdoor.Principal(r).Tenant, r.URL.Query().Get("tool"), oq)
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, pg)
}

// searchOperations searches the operations of every tool of the tenant, or
// of the one named toolName when it is not "".
func (s *Server) searchOperations(ctx context.Context, tenant, toolName string, oq opQuery) (operationPage, error) {
	var tools []*tool.Tool
	if toolName != "" {
		t, err := s.deps.ToolStore.ToolByName(ctx, tenant, toolName)
		if err != nil {
			return operationPage{}, err
		}
		tools = append(tools, t)
	} else {
		after := ""
		for len(tools) < maxSearchTools {
			batch, err := s.deps.ToolStore.ListTools(ctx, tenant, tool.ListOptions{Limit: 200, After: after})
			if err != nil {
				return operationPage{}, err
			}
			tools = append(tools, batch...)
			if len(batch) < 200 {
				break
			}
			after = batch[len(batch)-1].ID
		}
	}
	lists := make([][]tool.Hit, 0, len(tools))
	byName := make(map[string]*tool.Tool, len(tools))
	for _, t := range tools {
		ix, err := s.index(ctx, t)
		if err != nil {
			return operationPage{}, err
		}
		lists = append(lists, ix.Search(oq.q, oq.kind))
		byName[t.Name] = t
	}
	merged := tool.MergeHits(lists)
	hits := make([]scoredHit, len(merged))
	for i, h := range merged {
		hits[i] = scoredHit{h, byName[h.Tool]}
	}
	return s.opPage(ctx, oq, hits)
}
