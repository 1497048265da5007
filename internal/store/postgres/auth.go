package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
)

// SigningKeys returns the issuer's keys, newest first.
func (db *DB) SigningKeys(ctx context.Context) ([]auth.SigningKey, error) {
	var ks []auth.SigningKey
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT id, alg, private_jwk, created_at FROM signing_keys ORDER BY seq DESC`)
		if err != nil {
			return fmt.Errorf("query signing keys: %w", err)
		}
		ks, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (auth.SigningKey, error) {
			var k auth.SigningKey
			err := row.Scan(&k.ID, &k.Algorithm, &k.PrivateJWK, &k.CreatedAt)
			k.CreatedAt = k.CreatedAt.UTC()
			return k, err
		})
		if err != nil {
			return fmt.Errorf("query signing keys: %w", err)
		}
		return nil
	})
	return ks, err
}

// AddSigningKey stores k as the newest key; with onlyIfNone, only when there
// is no key yet. The table lock makes replicas starting together agree on
// one first key. It reports whether k was stored.
func (db *DB) AddSigningKey(ctx context.Context, k auth.SigningKey, onlyIfNone bool) (bool, error) {
	if k.CreatedAt.IsZero() {
		k.CreatedAt = db.now()
	}
	stored := false
	err := db.write(ctx, func(tx *wtx) error {
		if onlyIfNone {
			if _, err := tx.Exec(ctx, `LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return fmt.Errorf("lock signing keys: %w", err)
			}
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM signing_keys)`).Scan(&exists); err != nil {
				return fmt.Errorf("count signing keys: %w", err)
			}
			if exists {
				return nil
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO signing_keys (id, alg, private_jwk, created_at) VALUES ($1, $2, $3, $4)`,
			k.ID, k.Algorithm, k.PrivateJWK, k.CreatedAt)
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
	return db.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(ctx, `INSERT INTO oauth_clients (id, tenant, name, secret_hash, scopes, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, c.ID, c.Tenant, c.Name, c.SecretHash, string(scopes), c.CreatedAt)
		if isUnique(err) {
			return problem.New(problem.Conflict, "a client with id %q exists", c.ID)
		}
		if err != nil {
			return fmt.Errorf("insert client: %w", err)
		}
		tx.Audit(rec)
		return nil
	})
}

// Client returns a client by id, or problem.NotFound.
func (db *DB) Client(ctx context.Context, id string) (auth.Client, error) {
	var c auth.Client
	err := db.read(ctx, func(tx querier) error {
		var scopes []byte
		err := tx.QueryRow(ctx, `SELECT id, tenant, name, secret_hash, scopes, created_at
			FROM oauth_clients WHERE id = $1`, id).Scan(&c.ID, &c.Tenant, &c.Name, &c.SecretHash, &scopes, &c.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.New(problem.NotFound, "no client with id %q", id)
		}
		if err != nil {
			return fmt.Errorf("load client: %w", err)
		}
		c.CreatedAt = c.CreatedAt.UTC()
		if err := json.Unmarshal(scopes, &c.Scopes); err != nil {
			return fmt.Errorf("decode client scopes: %w", err)
		}
		return nil
	})
	return c, err
}

// ServerSecret returns the named secret, storing value as it when there is
// none yet; the first writer wins across replicas.
func (db *DB) ServerSecret(ctx context.Context, name string, value []byte) ([]byte, error) {
	var got []byte
	err := db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO server_secrets (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
			return fmt.Errorf("insert server secret: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT value FROM server_secrets WHERE name = $1`, name).Scan(&got); err != nil {
			return fmt.Errorf("load server secret: %w", err)
		}
		return nil
	})
	return got, err
}
