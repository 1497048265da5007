package sqlrow

import (
	"fmt"

	"github.com/agentplane/agentplane/internal/idempotency"
)

// EntryColumns are the idempotency_entries table's columns past the key,
// in the order of ScanEntry.
const EntryColumns = `fingerprint, state, status, header, body, workflow_id, created_at, expires_at, locked_until`

// ScanEntry scans a row of EntryColumns into the entry of key k; a missing
// row's error is returned as it is.
func ScanEntry(s Scanner, k idempotency.Key) (idempotency.Entry, error) {
	e := idempotency.Entry{Key: k}
	err := s.Scan(&e.Fingerprint, &e.State, &e.Status, JSON(&e.Header, "response header"), &e.Body, &e.WorkflowID,
		Time(&e.CreatedAt), Time(&e.ExpiresAt), Time(&e.LockedUntil))
	if IsNoRows(err) {
		return e, err
	}
	if err != nil {
		return e, fmt.Errorf("scan idempotency entry: %w", err)
	}
	return e, nil
}
