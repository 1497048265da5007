package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
)

// SigningKeys returns the issuer's keys, newest first.
func (db *DB) SigningKeys(ctx context.Context) ([]auth.SigningKey, error) {
	var ks []auth.SigningKey
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, alg, private_jwk, created_at FROM signing_keys ORDER BY seq DESC`)
		if err != nil {
			return fmt.Errorf("query signing keys: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				k       auth.SigningKey
				created string
			)
			if err := rows.Scan(&k.ID, &k.Algorithm, &k.PrivateJWK, &created); err != nil {
				return fmt.Errorf("scan signing key: %w", err)
			}
			if k.CreatedAt, err = parseTime(created); err != nil {
				return err
			}
			ks = append(ks, k)
		}
		return rows.Err()
	})
	return ks, err
}

// AddSigningKey stores k as the newest key; with onlyIfNone, only when there
// is no key yet. It reports whether k was stored.
func (db *DB) AddSigningKey(ctx context.Context, k auth.SigningKey, onlyIfNone bool) (bool, error) {
	if k.CreatedAt.IsZero() {
		k.CreatedAt = db.now()
	}
	stored := false
	err := db.write(ctx, func(tx dbtx) error {
		if onlyIfNone {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM signing_keys`).Scan(&n); err != nil {
				return fmt.Errorf("count signing keys: %w", err)
			}
			if n > 0 {
				return nil
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO signing_keys (id, alg, private_jwk, created_at) VALUES (?, ?, ?, ?)`,
			k.ID, k.Algorithm, k.PrivateJWK, fmtTime(k.CreatedAt))
		if isUnique(err) {
			return problem.New(problem.Conflict, "a signing key with id %q exists", k.ID)
		}
		if err != nil {
			return fmt.Errorf("insert signing key: %w", err)
		}
		stored = true
		return nil
	})
	return stored, err
}

// CreateClient stores a new OAuth client, appending rec in the same transaction.
func (db *DB) CreateClient(ctx context.Context, c auth.Client, rec *audit.Record) error {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = db.now()
	}
	scopes, err := json.Marshal(append([]string{}, c.Scopes...))
	if err != nil {
		return fmt.Errorf("encode client scopes: %w", err)
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_clients (id, tenant, name, secret_hash, scopes, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, c.ID, c.Tenant, c.Name, c.SecretHash, string(scopes), fmtTime(c.CreatedAt))
		if isUnique(err) {
			return problem.New(problem.Conflict, "a client with id %q exists", c.ID)
		}
		if err != nil {
			return fmt.Errorf("insert client: %w", err)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Client returns a client by id, or problem.NotFound.
func (db *DB) Client(ctx context.Context, id string) (auth.Client, error) {
	var c auth.Client
	err := db.query(ctx, func(tx dbtx) error {
		var scopes, created string
		err := tx.QueryRowContext(ctx, `SELECT id, tenant, name, secret_hash, scopes, created_at
			FROM oauth_clients WHERE id = ?`, id).Scan(&c.ID, &c.Tenant, &c.Name, &c.SecretHash, &scopes, &created)
		if err == sql.ErrNoRows {
			return problem.New(problem.NotFound, "no client with id %q", id)
		}
		if err != nil {
			return fmt.Errorf("load client: %w", err)
		}
		if err := json.Unmarshal([]byte(scopes), &c.Scopes); err != nil {
			return fmt.Errorf("decode client scopes: %w", err)
		}
		c.CreatedAt, err = parseTime(created)
		return err
	})
	return c, err
}

// ServerSecret returns the named secret, storing value as it when there is
// none yet; the first writer wins.
func (db *DB) ServerSecret(ctx context.Context, name string, value []byte) ([]byte, error) {
	var got []byte
	err := db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO server_secrets (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
			return fmt.Errorf("insert server secret: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT value FROM server_secrets WHERE name = ?`, name).Scan(&got); err != nil {
			return fmt.Errorf("load server secret: %w", err)
		}
		return nil
	})
	return got, err
}
