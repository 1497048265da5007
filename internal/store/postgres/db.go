// Package postgres is agentplane's scale-out store: PostgreSQL through pgx,
// shared by any number of stateless replicas. Concurrency between replicas
// is settled in SQL: row locks on each tenant's audit chain head, INSERT …
// ON CONFLICT for first-writer-wins values, and an advisory lock around
// migrations so replicas starting together do not race. Within a replica,
// writes queued together are committed in one transaction (see write).
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/groupcommit"
	"github.com/agentplane/agentplane/internal/store/migrate"
	"github.com/agentplane/agentplane/internal/tool"
)

var (
	_ audit.Store       = (*DB)(nil)
	_ auth.Store        = (*DB)(nil)
	_ idempotency.Store = (*DB)(nil)
	_ tool.Store        = (*DB)(nil)
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the pg_advisory_lock key held while migrating.
const migrationLock int64 = 0x61676e74706c6e // "agntpln"

// DB is the PostgreSQL store. It satisfies every domain Store.
type DB struct {
	pool *pgxpool.Pool
	now  func() time.Time

	queue *groupcommit.Queue[func(tx *wtx) error]
	// alone counts the writes committed by writeAlone.
	alone atomic.Int64
	// writeTimeout bounds one write transaction.
	writeTimeout time.Duration
	// heads are the tenants whose audit chain head is known to exist.
	heads *knownHeads
	// origin names this handle in change notifications (see WatchChanges).
	origin string
}

type options struct {
	now          func() time.Time
	writeTimeout time.Duration
	writers      int
	maxConns     int32
}

// Option configures Open.
type Option func(*options)

// WithNow sets the clock the store stamps records and entries with.
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// DefaultWriteTimeout bounds one write transaction.
const DefaultWriteTimeout = time.Minute

// WithWriteTimeout sets how long one write transaction (a group-commit
// batch, or a write run alone) may take before it is abandoned.
func WithWriteTimeout(d time.Duration) Option { return func(o *options) { o.writeTimeout = d } }

// WithWriters sets how many write transactions run at once (DefaultWriters
// when n < 1). Each holds a connection of the pool while it commits.
func WithWriters(n int) Option { return func(o *options) { o.writers = n } }

// DefaultMaxConns is the pool's size when neither WithMaxConns nor the
// URL's pool_max_conns sets it: the writers plus room for reads.
const DefaultMaxConns = 16

// WithMaxConns sets the most connections the pool opens (the URL's
// pool_max_conns, when given, wins over the default but not over this).
func WithMaxConns(n int32) Option { return func(o *options) { o.maxConns = n } }

// Open connects to the database at url (postgres://…) and applies the
// migrations.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	o := options{now: time.Now, writeTimeout: DefaultWriteTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.writeTimeout <= 0 {
		o.writeTimeout = DefaultWriteTimeout
	}
	if o.writers < 1 {
		o.writers = DefaultWriters()
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", redact(err))
	}
	switch {
	case o.maxConns > 0:
		cfg.MaxConns = o.maxConns
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	if int(cfg.MaxConns) <= o.writers {
		return nil, fmt.Errorf("a pool of %d connections leaves none for reads beside %d writers: raise the pool size or lower the writers", cfg.MaxConns, o.writers)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", redact(err))
	}
	db := &DB{pool: pool, now: o.now, writeTimeout: o.writeTimeout, heads: newKnownHeads(), origin: newOrigin()}
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	db.queue = groupcommit.New(maxBatch, o.writers, db.commit)
	return db, nil
}

// redact drops a connection string from a parse error (it may hold a password).
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}

// Close stops the writer, waiting for the batch it is committing, and
// closes the pool. Writes made after Close fail with problem.Unavailable.
func (db *DB) Close() error {
	db.queue.Close()
	db.pool.Close()
	return nil
}

// Ping reports whether the database answers, for /readyz.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return problem.Wrap(problem.Unavailable, err, "the database does not answer")
	}
	return nil
}

// migrate applies the migrations holding a session advisory lock, so
// replicas starting together apply each migration once.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	if _, err := migrate.Run(ctx, target{conn.Conn()}, ms); err != nil {
		return fmt.Errorf("migrate postgres: %w", err)
	}
	return nil
}

// querier runs statements: the pool, or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// read runs fn's reads on the pool, each statement in its own implicit
// transaction: one round trip each instead of BEGIN, the statement and
// COMMIT. Every read but Operation(s) is one statement. A database that
// cannot be reached is problem.Unavailable.
func (db *DB) read(_ context.Context, fn func(q querier) error) error {
	err := fn(db.pool)
	if err != nil && unreachable(err) {
		return problem.Wrap(problem.Unavailable, err, "the database is unreachable")
	}
	return err
}

// unreachable reports whether err says the database could not be reached:
// no connection, a broken one, or a closed pool.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// unavailable marks a failure to reach the database as problem.Unavailable.
func unavailable(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return problem.Wrap(problem.Unavailable, err, "the database is unreachable")
}

// isUnique reports whether err is a unique violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// isUniqueOn reports whether err is a violation of the unique constraint
// or index named name.
func isUniqueOn(err error, name string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == name
}

// target runs migrations on the connection holding the advisory lock.
type target struct{ conn *pgx.Conn }

func (t target) Init(ctx context.Context) error {
	_, err := t.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    bigint      NOT NULL PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`)
	return err
}

func (t target) Applied(ctx context.Context) ([]int64, error) {
	rows, err := t.conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

func (t target) Apply(ctx context.Context, m migrate.Migration) error {
	return pgx.BeginFunc(ctx, t.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
		return err
	})
}
