package postgres

import (
	"context"

	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// CatalogGeneration returns the tenant's catalog generation: 0 until its
// agents, versions, tools or rollouts first change, then one more at every
// change (the triggers of migration 0032 count them).
func (db *DB) CatalogGeneration(ctx context.Context, tenant string) (int64, error) {
	var gen int64
	err := db.read(ctx, func(q querier) error {
		var err error
		gen, err = sqlrow.ScanGeneration(q.QueryRow(ctx, `SELECT generation FROM catalog_generations WHERE tenant = $1`, tenant))
		return err
	})
	return gen, err
}
