package sqlite

import (
	"path/filepath"
	"testing"
)

// NewTestDB opens a migrated store on a new file in t.TempDir(), closed when
// t ends. Other packages' tests use it for a real store.
func NewTestDB(t testing.TB, opts ...Option) *DB {
	t.Helper()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "agentplane.db"), opts...)
	if err != nil {
		t.Fatalf("open test sqlite store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close test sqlite store: %v", err)
		}
	})
	return db
}
