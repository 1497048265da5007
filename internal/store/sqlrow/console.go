package sqlrow

import (
	"time"

	"github.com/agentplane/agentplane/internal/auth/session"
)

// GrantColumns are the console_grants table's columns, in the order of
// ScanGrant.
const GrantColumns = `id_hash, kind, tenant, subject, client_id, scopes, session_expires_at,
	verifier, nonce, next, created_at, expires_at, used_at`

// ScanGrant scans a row of GrantColumns; used says whether the grant was
// used already. Errors, a missing row's included, are returned as they are.
func ScanGrant(s Scanner) (g session.Grant, used bool, err error) {
	var usedAt *time.Time
	err = s.Scan(&g.IDHash, &g.Kind, &g.Tenant, &g.Subject, &g.ClientID, JSON(&g.Scopes, "grant scopes"),
		Time(&g.SessionExpiresAt), &g.Verifier, &g.Nonce, &g.Next, Time(&g.CreatedAt), Time(&g.ExpiresAt),
		OptionalTime(&usedAt))
	return g, usedAt != nil, err
}

// SessionColumns are the console_sessions table's columns, in the order of
// ScanSession.
const SessionColumns = `id_hash, tenant, subject, client_id, scopes, created_at, expires_at`

// ScanSession scans a row of SessionColumns. Errors, a missing row's
// included, are returned as they are.
func ScanSession(row Scanner) (s session.Session, err error) {
	err = row.Scan(&s.IDHash, &s.Tenant, &s.Subject, &s.ClientID, JSON(&s.Scopes, "session scopes"),
		Time(&s.CreatedAt), Time(&s.ExpiresAt))
	return s, err
}
