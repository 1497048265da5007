package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// SigningKeys returns the issuer's keys, newest first.
func (db *DB) SigningKeys(ctx context.Context) ([]auth.SigningKey, error) {
	var ks []auth.SigningKey
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT `+sqlrow.SigningKeyColumns+` FROM signing_keys ORDER BY seq DESC`)
		if err != nil {
			return fmt.Errorf("query signing keys: %w", err)
		}
		ks, err = collect(rows, sqlrow.ScanSigningKey)
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
		var err error
		c, err = sqlrow.ScanClient(tx.QueryRow(ctx, clientQuery+`WHERE c.id = $1`, id))
		return sqlrow.NotFound(err, "no client with id %q", id)
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

// clientQuery selects clients with when they were revoked (NULL when not).
const clientQuery = `SELECT c.id, c.tenant, c.name, c.secret_hash, c.scopes, c.created_at, r.revoked_at
	FROM oauth_clients c LEFT JOIN revoked_clients r ON r.client_id = c.id `

// ListClients returns the clients of a tenant ("" = every tenant),
// ordered by tenant and id.
func (db *DB) ListClients(ctx context.Context, tenant string) ([]auth.Client, error) {
	var cs []auth.Client
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, clientQuery+`WHERE $1 = '' OR c.tenant = $1 ORDER BY c.tenant, c.id`, tenant)
		if err != nil {
			return fmt.Errorf("list clients: %w", err)
		}
		cs, err = collect(rows, sqlrow.ScanClient)
		return err
	})
	return cs, err
}

// RevokeClient adds a client to the revocation list, appending rec in the
// same transaction; problem.NotFound for an unknown client. A client
// revoked already keeps its first revocation, and rec is not appended.
func (db *DB) RevokeClient(ctx context.Context, id string, at time.Time, rec *audit.Record) error {
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO revoked_clients (client_id, tenant, revoked_at)
			SELECT id, tenant, $2 FROM oauth_clients WHERE id = $1 ON CONFLICT (client_id) DO NOTHING`, id, micro(at))
		if err != nil {
			return fmt.Errorf("revoke client: %w", err)
		}
		if tag.RowsAffected() > 0 {
			tx.Audit(rec)
			return nil
		}
		var one int
		err = tx.QueryRow(ctx, `SELECT 1 FROM oauth_clients WHERE id = $1`, id).Scan(&one)
		return sqlrow.NotFound(err, "no client with id %q (agentplane clients list shows them)", id)
	})
}

// RevokedClients returns the ids of every revoked client.
func (db *DB) RevokedClients(ctx context.Context) ([]string, error) {
	var ids []string
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT client_id FROM revoked_clients`)
		if err != nil {
			return fmt.Errorf("load revoked clients: %w", err)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, err
}
