package postgres

import (
	"context"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/internal/store/migrate"
	"github.com/agentplane/agentplane/internal/store/storetest"
)

// newTestDB opens a store on a fresh clone of the migrated template.
func newTestDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), NewTestDatabase(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return newTestDB(t) }, storetest.Hooks{
		TamperAudit: func(t *testing.T, s storetest.Store, tenant string, seq int64) {
			_, err := s.(*DB).pool.Exec(t.Context(), `UPDATE audit_records SET action = 'tampered' WHERE tenant = $1 AND seq = $2`, tenant, seq)
			if err != nil {
				t.Fatalf("tamper: %v", err)
			}
		},
		UseTool: func(t *testing.T, s storetest.Store, tenant, agent, version, toolName string) {
			_, err := s.(*DB).pool.Exec(t.Context(), `INSERT INTO agent_version_tools (tenant, agent, version, tool_name)
				VALUES ($1, $2, $3, $4)`, tenant, agent, version, toolName)
			if err != nil {
				t.Fatalf("use tool: %v", err)
			}
		},
	})
}

// TestConcurrentOpen opens one database from several replicas at once: the
// advisory lock lets exactly one apply the migrations.
func TestConcurrentOpen(t *testing.T) {
	url := NewTestDatabase(t)
	ctx := t.Context()
	// Start from an empty database, not the migrated clone.
	admin, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	admin.Close()

	var wg sync.WaitGroup
	errs := make([]error, 4)
	dbs := make([]*DB, 4)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = Open(ctx, url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	var n int
	if err := dbs[0].pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Errorf("%d migrations recorded, want %d", n, len(ms))
	}
	if err := dbs[1].Ping(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
	}
}
