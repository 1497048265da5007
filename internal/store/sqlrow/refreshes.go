package sqlrow

import (
	"encoding/json"
	"fmt"
	"time"

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
