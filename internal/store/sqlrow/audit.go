package sqlrow

import (
	"fmt"

	"github.com/agentplane/agentplane/internal/audit"
)

// AuditColumns are the audit_log table's columns, in the order of ScanAudit.
const AuditColumns = `id, tenant, seq, time, actor_sub, actor_client_id, action, resource_type,
	resource_id, outcome, status, request_id, trace_id, workflow_id, details, prev_hash, hash`

// ScanAudit scans a row of AuditColumns.
func ScanAudit(s Scanner) (audit.Record, error) {
	var (
		r       audit.Record
		details string
	)
	if err := s.Scan(&r.ID, &r.Tenant, &r.Seq, Time(&r.Time), &r.Actor.Sub, &r.Actor.ClientID, &r.Action,
		&r.Resource.Type, &r.Resource.ID, &r.Outcome, &r.Status, &r.RequestID, &r.TraceID,
		&r.WorkflowID, &details, &r.PrevHash, &r.Hash); err != nil {
		return audit.Record{}, fmt.Errorf("scan audit record: %w", err)
	}
	r.Details = []byte(details)
	return r, nil
}
