package sqlite

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// RedactionKey returns the tenant's redaction key, storing fresh as it
// when the tenant has none yet; the first writer wins.
func (db *DB) RedactionKey(ctx context.Context, tenant string, fresh []byte) ([]byte, error) {
	var got []byte
	err := db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO redaction_keys (tenant, key, created_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant) DO NOTHING`, tenant, fresh, sqlrow.FormatTime(db.now())); err != nil {
			return fmt.Errorf("insert redaction key: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT key FROM redaction_keys WHERE tenant = ?`, tenant).Scan(&got); err != nil {
			return fmt.Errorf("load redaction key: %w", err)
		}
		return nil
	})
	return got, err
}
