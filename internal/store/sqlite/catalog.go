package sqlite

import (
	"context"

	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// CatalogGeneration returns the tenant's catalog generation: 0 until its
// agents, versions, tools or rollouts first change, then one more at every
// change (the triggers of migration 0032 count them).
func (db *DB) CatalogGeneration(ctx context.Context, tenant string) (int64, error) {
	var gen int64
	err := db.query(ctx, func(q dbtx) error {
		var err error
		gen, err = sqlrow.ScanGeneration(q.QueryRowContext(ctx, `SELECT generation FROM catalog_generations WHERE tenant = ?`, tenant))
		return err
	})
	return gen, err
}
