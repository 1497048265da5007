package postgres

import (
	"context"
	"fmt"
)

// RedactionKey returns the tenant's redaction key, storing fresh as it
// when the tenant has none yet; the first writer wins across replicas.
func (db *DB) RedactionKey(ctx context.Context, tenant string, fresh []byte) ([]byte, error) {
	var got []byte
	err := db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO redaction_keys (tenant, key, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (tenant) DO NOTHING`, tenant, fresh, db.now()); err != nil {
			return fmt.Errorf("insert redaction key: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT key FROM redaction_keys WHERE tenant = $1`, tenant).Scan(&got); err != nil {
			return fmt.Errorf("load redaction key: %w", err)
		}
		return nil
	})
	return got, err
}
