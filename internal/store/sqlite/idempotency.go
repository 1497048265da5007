package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

const idemKeyCond = `tenant = ? AND principal = ? AND method = ? AND path = ? AND key = ?`

func keyArgs(k idempotency.Key) []any { return []any{k.Tenant, k.Principal, k.Method, k.Path, k.Key} }

// BeginIdempotent inserts e as running unless a live entry for e.Key exists.
// An entry that expired, or a running one past its LockedUntil and linked to
// no workflow, is replaced.
// Liveness is judged at e.CreatedAt (the store's clock when it is zero).
func (db *DB) BeginIdempotent(ctx context.Context, e idempotency.Entry) (idempotency.Entry, bool, error) {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = db.now()
	}
	if e.State == "" {
		e.State = idempotency.Running
	}
	header, err := encodeHeader(e.Header)
	if err != nil {
		return idempotency.Entry{}, false, err
	}
	var (
		got     idempotency.Entry
		created bool
	)
	err = db.write(ctx, func(tx dbtx) error {
		old, err := sqlrow.ScanEntry(tx.QueryRowContext(ctx, `SELECT `+sqlrow.EntryColumns+` FROM idempotency_entries WHERE `+idemKeyCond,
			keyArgs(e.Key)...), e.Key)
		if err == nil && old.Live(e.CreatedAt) {
			got, created = old, false
			return nil
		}
		if err != nil && !sqlrow.IsNoRows(err) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO idempotency_entries
			(tenant, principal, method, path, key, fingerprint, state, status, header, body,
			 workflow_id, created_at, expires_at, locked_until)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append(keyArgs(e.Key), e.Fingerprint, e.State, e.Status, header, e.Body, e.WorkflowID,
				sqlrow.FormatTime(e.CreatedAt), sqlrow.FormatTime(e.ExpiresAt), sqlrow.FormatTime(e.LockedUntil))...); err != nil {
			return fmt.Errorf("insert idempotency entry: %w", err)
		}
		got, created = e, true
		return nil
	})
	if err != nil {
		return idempotency.Entry{}, false, err
	}
	return got, created, nil
}

// CompleteIdempotent stores the response of a running entry.
func (db *DB) CompleteIdempotent(ctx context.Context, k idempotency.Key, status int, header http.Header, body []byte) error {
	h, err := encodeHeader(header)
	if err != nil {
		return err
	}
	if body == nil {
		body = []byte{}
	}
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE idempotency_entries SET state = ?, status = ?, header = ?, body = ?
			WHERE `+idemKeyCond+` AND state = ?`,
			append(append([]any{idempotency.Complete, status, h, body}, keyArgs(k)...), idempotency.Running)...)
		return entryUpdated(res, err, k)
	})
}

// ExtendIdempotent moves a running entry's LockedUntil.
func (db *DB) ExtendIdempotent(ctx context.Context, k idempotency.Key, until time.Time) error {
	return db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE idempotency_entries SET locked_until = ? WHERE `+idemKeyCond+` AND state = ?`,
			append(append([]any{sqlrow.FormatTime(until)}, keyArgs(k)...), idempotency.Running)...); err != nil {
			return fmt.Errorf("extend idempotency entry: %w", err)
		}
		return nil
	})
}

// ReleaseIdempotent deletes a running entry whose response is not kept.
func (db *DB) ReleaseIdempotent(ctx context.Context, k idempotency.Key) error {
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_entries WHERE `+idemKeyCond+` AND state = ?`,
			append(keyArgs(k), idempotency.Running)...)
		if err != nil {
			return fmt.Errorf("delete idempotency entry: %w", err)
		}
		return nil
	})
}

// PurgeIdempotency deletes entries that expired before t.
func (db *DB) PurgeIdempotency(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency_entries WHERE expires_at < ?`, sqlrow.FormatTime(t))
		if err != nil {
			return fmt.Errorf("purge idempotency entries: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

func entryUpdated(res sql.Result, err error, k idempotency.Key) error {
	if err != nil {
		return fmt.Errorf("update idempotency entry: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(err, problem.New(problem.NotFound, "no running request with idempotency key %q", k.Key))
	}
	return nil
}

func encodeHeader(h http.Header) (string, error) {
	if h == nil {
		h = http.Header{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode response header: %w", err)
	}
	return string(b), nil
}
