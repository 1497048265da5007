package sqlrow

import (
	"encoding/json"
	"fmt"

	"github.com/agentplane/agentplane/internal/tool"
)

// ToolColumns are the tools table's columns (and a tool snapshot's, before
// its operations), in the order of ToolValues and ScanTool.
const ToolColumns = `id, tenant, name, type, spec_url, endpoint_url, auth, policy_class, side_effects,
	idempotency_support, spec_sha256, revision, operation_count, base_url, spec_token_url,
	indexed_at, created_at, updated_at, limits`

// ToolValues are t's values in ToolColumns order, times written by at.
func ToolValues(t *tool.Tool, at Times) ([]any, error) {
	authJSON, err := EncodeJSON(t.Auth, "tool auth")
	if err != nil {
		return nil, err
	}
	effects := t.SideEffects
	if effects == nil {
		effects = []string{}
	}
	effectsJSON, err := EncodeJSON(effects, "side effects")
	if err != nil {
		return nil, err
	}
	limitsJSON, err := t.EncodeLimits()
	if err != nil {
		return nil, err
	}
	return []any{t.ID, t.Tenant, t.Name, t.Type, t.SpecURL, t.EndpointURL, authJSON, t.PolicyClass,
		effectsJSON, t.IdempotencySupport, t.SpecSHA256, t.Revision, t.OperationCount, t.BaseURL,
		t.SpecTokenURL, at(t.IndexedAt), at(t.CreatedAt), at(t.UpdatedAt), string(limitsJSON)}, nil
}

// ScanTool scans a row of ToolColumns; a missing row's error is returned
// as it is, for the caller's not-found message.
func ScanTool(s Scanner) (*tool.Tool, error) {
	var (
		t                     tool.Tool
		authJSON, effectsJSON []byte
		limitsJSON            []byte
	)
	err := s.Scan(&t.ID, &t.Tenant, &t.Name, &t.Type, &t.SpecURL, &t.EndpointURL, &authJSON, &t.PolicyClass,
		&effectsJSON, &t.IdempotencySupport, &t.SpecSHA256, &t.Revision, &t.OperationCount, &t.BaseURL,
		&t.SpecTokenURL, Time(&t.IndexedAt), Time(&t.CreatedAt), Time(&t.UpdatedAt), &limitsJSON)
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan tool: %w", err)
	}
	if err := json.Unmarshal(authJSON, &t.Auth); err != nil {
		return nil, fmt.Errorf("decode tool auth: %w", err)
	}
	if err := t.DecodeLimits(limitsJSON); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(effectsJSON, &t.SideEffects); err != nil {
		return nil, fmt.Errorf("decode side effects: %w", err)
	}
	return &t, nil
}

// ScanOperation scans a tool operation's data column.
func ScanOperation(s Scanner) (tool.Operation, error) {
	var (
		data []byte
		op   tool.Operation
	)
	if err := s.Scan(&data); err != nil {
		return op, fmt.Errorf("scan operation: %w", err)
	}
	if err := json.Unmarshal(data, &op); err != nil {
		return op, fmt.Errorf("decode operation: %w", err)
	}
	return op, nil
}

// OperationColumns are the tool_operations table's columns, in the order
// of OperationValues.
var OperationColumns = []string{"tenant", "tool_id", "op_id", "kind", "summary", "description", "data"}

// OperationValues are op's values (of t) in OperationColumns order.
func OperationValues(t *tool.Tool, op tool.Operation) ([]any, error) {
	data, err := EncodeJSON(op, fmt.Sprintf("operation %q", op.ID))
	if err != nil {
		return nil, err
	}
	return []any{t.Tenant, t.ID, op.ID, op.Kind, op.Summary, op.Description, data}, nil
}
