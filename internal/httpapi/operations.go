package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// defaultOpLimit is an operation search's page size when limit is not given.
const defaultOpLimit = 20

// opResult is a search result as the API shows it.
type opResult = tool.Found

type operationPage struct {
	ToolID     string     `json:"tool_id,omitempty"`
	Query      string     `json:"q,omitempty"`
	Operations []opResult `json:"operations"`
	NextCursor *string    `json:"next_cursor"`
}

// opQuery is what an operation search of the API or the console asks for.
type opQuery struct {
	q, kind       string
	limit, offset int
	full          bool
}

// find is the query as the finder takes it.
func (oq opQuery) find() tool.FindQuery {
	return tool.FindQuery{Q: oq.q, Kind: oq.kind, Limit: oq.limit, Offset: oq.offset, Full: oq.full}
}

// check validates what a query asks for.
func (oq opQuery) check() []problem.FieldError {
	return oq.find().Check("q")
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

// finder searches operations through the server's index cache.
func (s *Server) finder() *tool.Finder {
	return &tool.Finder{Tools: s.deps.ToolStore, Indexes: s.indexes}
}

// pageOf is a page of found operations as the API shows it.
func pageOf(oq opQuery, found tool.FoundPage) operationPage {
	pg := operationPage{Query: oq.q, Operations: found.Operations}
	if found.Next > 0 {
		c := strconv.Itoa(found.Next)
		pg.NextCursor = &c
	}
	return pg
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
	found, err := s.finder().SearchTool(r.Context(), t, oq.find())
	if err != nil {
		return err
	}
	pg := pageOf(oq, found)
	pg.ToolID = t.ID
	return frontdoor.WriteJSON(w, http.StatusOK, pg)
}

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
	found, err := s.finder().Search(ctx, tenant, toolName, oq.find())
	if err != nil {
		return operationPage{}, err
	}
	return pageOf(oq, found), nil
}
