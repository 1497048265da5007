package sqlrow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// RefreshColumns are the tool_refreshes table's columns but operations, in
// the order of RefreshValues and ScanRefresh.
const RefreshColumns = `tenant, tool_id, n, status, base_revision, tool_revision, diff, spec_sha256,
	base_url, spec_token_url, created_at, applied_at`

// RefreshValues are r's values in RefreshColumns order, then its
// operations' (ops) JSON; times written by at, an unset applied_at as
// unset (NULL for PostgreSQL, "" for SQLite).
func RefreshValues(r *tool.Refresh, ops []tool.Operation, at Times, unset any) ([]any, error) {
	diff, err := EncodeJSON(r.Diff, "refresh diff")
	if err != nil {
		return nil, err
	}
	if ops == nil {
		ops = []tool.Operation{}
	}
	opsJSON, err := EncodeJSON(ops, "refresh operations")
	if err != nil {
		return nil, err
	}
	applied := unset
	if r.AppliedAt != nil {
		applied = at(*r.AppliedAt)
	}
	return []any{r.Tenant, r.ToolID, r.N, r.Status, r.BaseRevision, r.ToolRevision, diff, r.SpecSHA256,
		r.BaseURL, r.SpecTokenURL, at(r.CreatedAt), applied, opsJSON}, nil
}

// ScanRefreshOperations scans a row of RefreshColumns and operations: the
// refresh with the operations it keeps for its apply.
func ScanRefreshOperations(s Scanner) (*tool.Refresh, []tool.Operation, error) {
	var data []byte
	r, err := ScanRefresh(With(s, &data))
	if err != nil {
		return nil, nil, err
	}
	var ops []tool.Operation
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, nil, fmt.Errorf("decode refresh operations: %w", err)
	}
	return r, ops, nil
}

// RefreshNotFound is the problem of a revision n that tool toolID does
// not have.
func RefreshNotFound(toolID string, n int) error {
	return problem.New(problem.NotFound, "tool %s has no revision %d: GET /v1/tools/%s/revisions lists them", toolID, n, toolID)
}

// ScanRefresh scans a row of RefreshColumns.
func ScanRefresh(s Scanner) (*tool.Refresh, error) {
	var (
		r       tool.Refresh
		diff    []byte
		applied time.Time
	)
	err := s.Scan(&r.Tenant, &r.ToolID, &r.N, &r.Status, &r.BaseRevision, &r.ToolRevision, &diff, &r.SpecSHA256,
		&r.BaseURL, &r.SpecTokenURL, Time(&r.CreatedAt), TimeOrZero(&applied))
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan tool refresh: %w", err)
	}
	if err := json.Unmarshal(diff, &r.Diff); err != nil {
		return nil, fmt.Errorf("decode refresh diff: %w", err)
	}
	if !applied.IsZero() {
		r.AppliedAt = &applied
	}
	return &r, nil
}
