// Package migrate applies a store's versioned SQL migrations: files named
// NNNN_name.sql embedded in the engine's package, applied in version order,
// each in its own transaction, and recorded in a schema_migrations table so
// each runs once. Engines supply the database side through Target.
package migrate

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
)

// Migration is one versioned SQL file.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// Target is the database migrations are applied to.
type Target interface {
	// Init creates the schema_migrations table when it does not exist.
	Init(ctx context.Context) error
	// Applied returns the versions already applied.
	Applied(ctx context.Context) ([]int64, error)
	// Apply runs m.SQL and records m.Version, in one transaction.
	Apply(ctx context.Context, m Migration) error
}

var fileRE = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.sql$`)

// Load reads the migrations in dir of fsys, ordered by version. Every file
// must be named NNNN_name.sql and versions must be unique.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %q: name must be NNNN_name.sql", e.Name())
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: version must be a positive number", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %q and %q share version %d", ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}
	return ms, nil
}

// Run applies the migrations of ms that t has not applied yet, in order. A
// database migrated by a newer binary (a version Run does not know) is
// refused: a migration may drop or reshape what older code reads.
func Run(ctx context.Context, t Target, ms []Migration) (applied int, err error) {
	if err := t.Init(ctx); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	done, err := t.Applied(ctx)
	if err != nil {
		return 0, fmt.Errorf("read applied migrations: %w", err)
	}
	for _, v := range done {
		if !slices.ContainsFunc(ms, func(m Migration) bool { return m.Version == v }) {
			return 0, fmt.Errorf("the database has schema version %d, which this agentplane does not know: run a newer agentplane", v)
		}
	}
	for _, m := range ms {
		if slices.Contains(done, m.Version) {
			continue
		}
		if err := t.Apply(ctx, m); err != nil {
			return applied, fmt.Errorf("apply migration %04d_%s: %w", m.Version, m.Name, err)
		}
		applied++
	}
	return applied, nil
}
