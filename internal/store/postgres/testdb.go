package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDatabaseEnv names the variable holding the URL of a PostgreSQL server
// tests may create databases on, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const TestDatabaseEnv = "AGENTPLANE_TEST_DATABASE_URL"

// templateLock is the advisory lock key serialising template creation
// across test binaries.
const templateLock int64 = 0x61676e74746d706c // "agnttmpl"

const templateReady = "agentplane migrated template"

var templates sync.Map // admin URL → template name, once ready

// NewTestDatabase returns the URL of a new, migrated database, dropped when
// t ends. Databases are cloned (CREATE DATABASE … TEMPLATE) from a template
// migrated once and named after the migrations' content, so a clone costs
// milliseconds and the template is reused until the migrations change. It
// skips t when TestDatabaseEnv is unset.
func NewTestDatabase(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(TestDatabaseEnv)
	if admin == "" {
		t.Skip(TestDatabaseEnv + " not set: skipping PostgreSQL store tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", TestDatabaseEnv, redact(err))
	}
	defer conn.Close(context.Background())

	tmpl, err := ensureTemplate(ctx, conn, admin)
	if err != nil {
		t.Fatalf("prepare template database: %v", err)
	}
	// Clones of a ready template can be made concurrently.
	name := "agentplane_test_" + randomHex(8)
	if err := createDatabase(ctx, conn, name, tmpl); err != nil {
		t.Fatalf("clone template database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop test database: %v", redact(err))
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// ensureTemplate returns the name of the migrated template, creating it when
// missing or left half-made by a failed run, under templateLock so test
// binaries running together make it once.
func ensureTemplate(ctx context.Context, conn *pgx.Conn, admin string) (string, error) {
	if name, ok := templates.Load(admin); ok {
		return name.(string), nil
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLock); err != nil {
		return "", fmt.Errorf("take template lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, templateLock)
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "agentplane_tmpl_" + sum
	var comment *string
	err = conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, name).Scan(&comment)
	switch {
	case err == nil && comment != nil && *comment == templateReady:
		templates.Store(admin, name)
		return name, nil
	case err == nil:
		if _, err := conn.Exec(ctx, `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			return "", fmt.Errorf("drop half-made template: %w", err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("look for template: %w", err)
	}
	if err := createDatabase(ctx, conn, name, ""); err != nil {
		return "", err
	}
	u, err := withDatabase(admin, name)
	if err != nil {
		return "", err
	}
	db, err := Open(ctx, u)
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	db.Close()
	if _, err := conn.Exec(ctx, `COMMENT ON DATABASE `+pgx.Identifier{name}.Sanitize()+` IS '`+templateReady+`'`); err != nil {
		return "", fmt.Errorf("mark template ready: %w", err)
	}
	templates.Store(admin, name)
	return name, nil
}

// createDatabase creates name, cloned from tmpl when it is not "". Cloning
// fails while a session is still connected to the template (one just closed
// may linger a moment), so it is retried for a while.
func createDatabase(ctx context.Context, conn *pgx.Conn, name, tmpl string) error {
	q := `CREATE DATABASE ` + pgx.Identifier{name}.Sanitize()
	if tmpl != "" {
		q += ` TEMPLATE ` + pgx.Identifier{tmpl}.Sanitize()
	}
	for {
		_, err := conn.Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55006" { // object_in_use
			if err != nil {
				return fmt.Errorf("create database %s: %w", name, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create database %s: %w", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// migrationsHash names the template after the migrations it holds.
func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// withDatabase returns rawURL naming database name instead of its own.
func withDatabase(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", errors.New("parse " + TestDatabaseEnv + ": invalid URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
