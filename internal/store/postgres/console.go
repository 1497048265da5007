package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var _ session.Store = (*DB)(nil)

// consoleKeep is how long used or expired grants are kept before a new
// grant sweeps them, so a reused link is told it was used, not unknown.
const consoleKeep = time.Hour

// CreateConsoleGrant stores g, dropping grants expired over an hour ago.
func (db *DB) CreateConsoleGrant(ctx context.Context, g session.Grant) error {
	scopes, err := json.Marshal(append([]string{}, g.Scopes...))
	if err != nil {
		return fmt.Errorf("encode grant scopes: %w", err)
	}
	return db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_grants WHERE expires_at < $1`, g.CreatedAt.Add(-consoleKeep)); err != nil {
			return fmt.Errorf("sweep console grants: %w", err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_grants (id_hash, kind, tenant, subject, client_id, scopes,
			session_expires_at, verifier, nonce, next, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			g.IDHash, g.Kind, g.Tenant, g.Subject, g.ClientID, string(scopes), g.SessionExpiresAt,
			g.Verifier, g.Nonce, g.Next, g.CreatedAt, g.ExpiresAt)
		if isUnique(err) {
			return problem.New(problem.Conflict, "a console grant with this id exists")
		}
		if err != nil {
			return fmt.Errorf("insert console grant: %w", err)
		}
		return nil
	})
}

// RedeemConsoleGrant marks a grant used and returns it; first is false
// when it had been used already.
func (db *DB) RedeemConsoleGrant(ctx context.Context, kind, idHash string, now time.Time) (session.Grant, bool, error) {
	var (
		g     session.Grant
		first bool
	)
	err := db.write(ctx, func(tx *wtx) error {
		var (
			used bool
			err  error
		)
		g, used, err = sqlrow.ScanGrant(tx.QueryRow(ctx, `SELECT `+sqlrow.GrantColumns+`
			FROM console_grants WHERE id_hash = $1 AND kind = $2 FOR UPDATE`, idHash, kind))
		if sqlrow.IsNoRows(err) {
			return problem.New(problem.NotFound, "no such sign-in link or login")
		}
		if err != nil {
			return fmt.Errorf("load console grant: %w", err)
		}
		if used {
			return nil
		}
		first = true
		if _, err := tx.Exec(ctx, `UPDATE console_grants SET used_at = $1 WHERE id_hash = $2`, now, idHash); err != nil {
			return fmt.Errorf("use console grant: %w", err)
		}
		return nil
	})
	return g, first, err
}

// CreateConsoleSession stores s, dropping expired sessions.
func (db *DB) CreateConsoleSession(ctx context.Context, s session.Session) error {
	scopes, err := json.Marshal(append([]string{}, s.Scopes...))
	if err != nil {
		return fmt.Errorf("encode session scopes: %w", err)
	}
	return db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at < $1`, s.CreatedAt); err != nil {
			return fmt.Errorf("sweep console sessions: %w", err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_sessions (id_hash, tenant, subject, client_id, scopes, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, s.IDHash, s.Tenant, s.Subject, s.ClientID, string(scopes), s.CreatedAt, s.ExpiresAt)
		if isUnique(err) {
			return problem.New(problem.Conflict, "a console session with this id exists")
		}
		if err != nil {
			return fmt.Errorf("insert console session: %w", err)
		}
		return nil
	})
}

// ConsoleSession returns an unexpired session, or problem.NotFound.
func (db *DB) ConsoleSession(ctx context.Context, idHash string, now time.Time) (session.Session, error) {
	var s session.Session
	err := db.read(ctx, func(q querier) error {
		var err error
		s, err = sqlrow.ScanSession(q.QueryRow(ctx, `SELECT `+sqlrow.SessionColumns+`
			FROM console_sessions WHERE id_hash = $1 AND expires_at > $2`, idHash, now))
		if sqlrow.IsNoRows(err) {
			return problem.New(problem.NotFound, "no such session, or it has expired")
		}
		if err != nil {
			return fmt.Errorf("load console session: %w", err)
		}
		return nil
	})
	return s, err
}

// DeleteConsoleSession ends a session.
func (db *DB) DeleteConsoleSession(ctx context.Context, idHash string) error {
	return db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash = $1`, idHash); err != nil {
			return fmt.Errorf("delete console session: %w", err)
		}
		return nil
	})
}
