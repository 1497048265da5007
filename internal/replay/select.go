package replay

import (
	"context"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Selection chooses the workflows of a batch: by filter, newest first, or
// by id, in the order given.
type Selection struct {
	Agent, AgentVersion, Outcome string
	Since, Until                 time.Time
	// Limit bounds a filter's selection (default 1,000, at most MaxBatch).
	Limit int
	IDs   []string
}

// Select resolves a selection of the tenant's finished workflows to ids.
// Ids of workflows the tenant does not have, or that are still running,
// are validation errors naming their index.
func (s *Service) Select(ctx context.Context, tenant string, sel Selection) ([]string, error) {
	if len(sel.IDs) > 0 {
		var errs []problem.FieldError
		seen := make(map[string]bool, len(sel.IDs))
		for i, id := range sel.IDs {
			field := "workflow_ids[" + strconv.Itoa(i) + "]"
			if seen[id] {
				errs = append(errs, problem.FieldError{Field: field, Message: "is listed twice"})
				continue
			}
			seen[id] = true
			wf, err := s.Workflows.Workflow(ctx, tenant, id)
			if problem.Is(err, problem.NotFound) {
				errs = append(errs, problem.FieldError{Field: field, Message: "no workflow " + id + " in this tenant"})
				continue
			}
			if err != nil {
				return nil, err
			}
			if !wf.Done() {
				errs = append(errs, problem.FieldError{Field: field, Message: "workflow " + id + " is still running: replay it once it has finished"})
			}
		}
		if len(errs) > 0 {
			return nil, problem.Validation(errs...)
		}
		return sel.IDs, nil
	}
	limit := sel.Limit
	if limit <= 0 {
		limit = 1000
	}
	var out []string
	f := workflow.ListFilter{Agent: sel.Agent, Outcome: sel.Outcome, Since: sel.Since, Until: sel.Until, Limit: 200}
	for len(out) < limit {
		wfs, err := s.Workflows.ListWorkflows(ctx, tenant, f)
		if err != nil {
			return nil, err
		}
		for _, wf := range wfs {
			if wf.Done() && (sel.AgentVersion == "" || wf.AgentVersion == sel.AgentVersion) && len(out) < limit {
				out = append(out, wf.ID)
			}
		}
		if len(wfs) < f.Limit {
			break
		}
		f.Before = wfs[len(wfs)-1].ID
	}
	if len(out) == 0 {
		return nil, problem.Field("workflows", "selects no finished workflow of this tenant: widen the filter (agent, agent_version, outcome, since, until)")
	}
	return out, nil
}
