package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

const idemKeyCond = `tenant = $1 AND principal = $2 AND method = $3 AND path = $4 AND key = $5`

func keyArgs(k idempotency.Key, more ...any) []any {
	return append([]any{k.Tenant, k.Principal, k.Method, k.Path, k.Key}, more...)
}

// BeginIdempotent inserts e as running unless a live entry for e.Key exists.
// An entry that expired, or a running one past its LockedUntil and linked to
// no workflow, is replaced
// in the same transaction, under the row's lock, so exactly one replica wins.
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
	vals := keyArgs(e.Key, e.Fingerprint, e.State, e.Status, header, e.Body, e.WorkflowID, e.CreatedAt, e.ExpiresAt, e.LockedUntil)
	var (
		got     idempotency.Entry
		created bool
	)
	err = db.write(ctx, func(tx *wtx) error {
		// A concurrent release can delete the row between the insert and the
		// select; then the insert is tried again.
		for range 3 {
			tag, err := tx.Exec(ctx, `INSERT INTO idempotency_entries
				(tenant, principal, method, path, key, fingerprint, state, status, header, body,
				 workflow_id, created_at, expires_at, locked_until)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
				ON CONFLICT DO NOTHING`, vals...)
			if err != nil {
				return fmt.Errorf("insert idempotency entry: %w", err)
			}
			if tag.RowsAffected() == 1 {
				got, created = e, true
				return nil
			}
			old, err := sqlrow.ScanEntry(tx.QueryRow(ctx, `SELECT `+sqlrow.EntryColumns+` FROM idempotency_entries WHERE `+idemKeyCond+` FOR UPDATE`,
				keyArgs(e.Key)...), e.Key)
			if sqlrow.IsNoRows(err) {
				continue
			}
			if err != nil {
				return err
			}
			if old.Live(e.CreatedAt) {
				got, created = old, false
				return nil
			}
			if _, err := tx.Exec(ctx, `UPDATE idempotency_entries SET fingerprint = $6, state = $7, status = $8,
				header = $9, body = $10, workflow_id = $11, created_at = $12, expires_at = $13, locked_until = $14
				WHERE `+idemKeyCond, vals...); err != nil {
				return fmt.Errorf("replace idempotency entry: %w", err)
			}
			got, created = e, true
			return nil
		}
		return errors.New("idempotency entry kept vanishing")
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
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE idempotency_entries SET state = $6, status = $7, header = $8, body = $9
			WHERE `+idemKeyCond+` AND state = $10`,
			keyArgs(k, idempotency.Complete, status, h, body, idempotency.Running)...)
		return entryUpdated(tag, err, k)
	})
}

// ExtendIdempotent moves a running entry's LockedUntil.
func (db *DB) ExtendIdempotent(ctx context.Context, k idempotency.Key, until time.Time) error {
	return db.write(ctx, func(tx *wtx) error {
		tx.Queue(wrapErr("extend idempotency entry"), `UPDATE idempotency_entries SET locked_until = $6
			WHERE `+idemKeyCond+` AND state = $7`, keyArgs(k, until, idempotency.Running)...)
		return nil
	})
}

// ReleaseIdempotent deletes a running entry whose response is not kept.
func (db *DB) ReleaseIdempotent(ctx context.Context, k idempotency.Key) error {
	return db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM idempotency_entries WHERE `+idemKeyCond+` AND state = $6`,
			keyArgs(k, idempotency.Running)...); err != nil {
			return fmt.Errorf("delete idempotency entry: %w", err)
		}
		return nil
	})
}

// purgeChunk bounds the rows one purge statement deletes.
const purgeChunk = 10_000

// PurgeIdempotency deletes entries that expired before t. It runs on the
// pool rather than in the write queue, a chunk per statement, so a large
// purge holds up neither the writes batched with it nor its table.
func (db *DB) PurgeIdempotency(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	for {
		tag, err := db.pool.Exec(ctx, `DELETE FROM idempotency_entries WHERE ctid IN (
			SELECT ctid FROM idempotency_entries WHERE expires_at < $1 LIMIT $2)`, t, purgeChunk)
		if err != nil {
			return total, fmt.Errorf("purge idempotency entries: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < purgeChunk {
			return total, nil
		}
	}
}

func entryUpdated(tag pgconn.CommandTag, err error, k idempotency.Key) error {
	if err != nil {
		return fmt.Errorf("update idempotency entry: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return problem.New(problem.NotFound, "no running request with idempotency key %q", k.Key)
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
