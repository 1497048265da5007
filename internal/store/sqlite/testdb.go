package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// NewTestDB opens a migrated store on a new file in t.TempDir(), closed when
// t ends. Other packages' tests use it for a real store.
func NewTestDB(t testing.TB, opts ...Option) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentplane.db")
	if err := WriteTestFile(path); err != nil {
		t.Fatal(err)
	}
	db, err := Open(t.Context(), path, opts...)
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

// template is a database file with every migration applied, made once per
// process: applying the migrations costs a second of CPU under the race
// detector, copying their result a millisecond.
var template struct {
	once sync.Once
	file []byte
	err  error
}

// WriteTestFile writes a new database file at path with every migration
// applied, as Open would leave it, for tests that open the file themselves
// (or hand it to a server process).
func WriteTestFile(path string) error {
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "agentplane-sqlite-template-")
		if err != nil {
			template.err = err
			return
		}
		defer os.RemoveAll(dir)
		src := filepath.Join(dir, "agentplane.db")
		db, err := Open(context.Background(), src)
		if err != nil {
			template.err = err
			return
		}
		// The last connection closed checkpoints the WAL into the file
		// and removes it: the file alone is the whole database.
		if err := db.Close(); err != nil {
			template.err = err
			return
		}
		template.file, template.err = os.ReadFile(src)
	})
	if template.err != nil {
		return fmt.Errorf("migrated template database: %w", template.err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(template.file); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
