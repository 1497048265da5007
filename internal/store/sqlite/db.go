// Package sqlite is agentplane's embedded store: one SQLite file in the data
// directory (modernc.org/sqlite, pure Go), in WAL mode. SQLite has a single
// writer, so every write goes through one goroutine that commits the writes
// queued while it was busy together (group commit), each isolated in its own
// savepoint; reads use a separate pool of read-only connections.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

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

// DefaultMaxBatch is how many queued writes one commit takes at most.
const DefaultMaxBatch = 256

// DefaultAuditMove is how many audit records wait in the tail before the
// writer moves them to the indexed table in the next batch it commits. A
// writer with nothing to commit moves them sooner, from idleAuditMove
// records on, in a transaction of its own (see moveIdle).
const DefaultAuditMove = 1024

// idleAuditMove is how many audit records in the tail make an idle writer
// move them.
const idleAuditMove = 64

// walCheckpointPages is the WAL's size, in pages, that makes the writer
// checkpoint it (see dsn).
const walCheckpointPages = 10_000

// errClosed answers writes made after Close.
var errClosed = problem.New(problem.Unavailable, "the store is closed")

// DB is the SQLite store. It satisfies every domain Store.
type DB struct {
	wdb       *sql.DB   // one connection, wconn once the store is open
	wconn     *sql.Conn // the writer goroutine's, held for the store's life
	rdb       *sql.DB   // read-only connections
	wstmts    *stmtCache
	rstmts    *stmtCache
	heads     *headCache // the writer's
	goals     *goalIndex // the writer's
	now       func() time.Time
	auditMove int

	queue *groupcommit.Queue[func(tx dbtx) error]
}

type options struct {
	now       func() time.Time
	readConns int
	maxBatch  int
	auditMove int
}

// Option configures Open.
type Option func(*options)

// WithNow sets the clock the store stamps records and entries with.
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithMaxBatch sets how many queued writes one commit takes at most.
func WithMaxBatch(n int) Option { return func(o *options) { o.maxBatch = n } }

// WithAuditMove sets how many audit records wait in the tail before the
// writer moves them to the indexed table.
func WithAuditMove(n int) Option { return func(o *options) { o.auditMove = n } }

// Open opens (creating when needed) the database file at path, creating its
// parent directory, and applies the migrations.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	o := options{now: time.Now, readConns: max(4, runtime.NumCPU()), maxBatch: DefaultMaxBatch, auditMove: DefaultAuditMove}
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" || path == ":memory:" {
		return nil, errors.New("open sqlite: a database file path is required")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	wdb, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	if err := wdb.PingContext(ctx); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		wdb.Close()
		return nil, err
	}
	if _, err := migrate.Run(ctx, target{wdb}, ms); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("migrate sqlite %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(o.readConns)
	rdb.SetMaxIdleConns(o.readConns)
	db := &DB{
		wdb: wdb, rdb: rdb, now: o.now, auditMove: max(1, o.auditMove),
		rstmts: newStmtCache(rdb), heads: newHeadCache(), goals: &goalIndex{},
	}
	if err := wdb.QueryRowContext(ctx, `SELECT count(*) FROM audit_tail`).Scan(&db.heads.tail); err != nil {
		rdb.Close()
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if db.wconn, err = wdb.Conn(ctx); err != nil {
		rdb.Close()
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db.wstmts = newConnStmtCache(db.wconn)
	db.queue = groupcommit.New(o.maxBatch, 1, db.commit, groupcommit.Idle(db.moveIdle))
	return db, nil
}

// dsn is the connection string of path: WAL, synchronous=NORMAL (durable
// across a process crash; the WAL is synced at checkpoints), a busy timeout,
// foreign keys. Writers begin IMMEDIATE so they never upgrade a read lock;
// readers are query-only. The writer checkpoints once the WAL holds
// walCheckpointPages pages rather than SQLite's 1,000: a checkpoint copies
// each page once however many commits rewrote it, and syncs the file twice,
// all while every queued write waits, so fewer, larger ones cost the writer
// less (a WAL of up to ~40 MB; docs/operations.md).
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walCheckpointPages))
	q.Add("_pragma", "foreign_keys(1)")
	// Savepoint journals (one per queued write) stay in memory.
	q.Add("_pragma", "temp_store(MEMORY)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Close stops the writer, waiting for the batch it is committing, and closes
// the database. Writes made after Close fail with problem.Unavailable.
func (db *DB) Close() error {
	db.queue.Close()
	db.wstmts.close()
	db.rstmts.close()
	return errors.Join(db.rdb.Close(), db.wconn.Close(), db.wdb.Close())
}

// Ping reports whether the database answers, for /readyz.
func (db *DB) Ping(ctx context.Context) error {
	select {
	case <-db.queue.Closing():
		return errClosed
	default:
	}
	var one int
	if err := db.rdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return problem.Wrap(problem.Unavailable, err, "the database does not answer")
	}
	return nil
}

// read runs fn in a read transaction on one of the read connections; WAL
// gives it a consistent snapshot while writes go on.
func (db *DB) read(ctx context.Context, fn func(tx dbtx) error) error {
	defer db.rstmts.prepareWanted(ctx)
	tx, err := db.rdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	if err := fn(dbtx{tx: tx, stmts: db.rstmts}); err != nil {
		return err
	}
	return tx.Commit()
}

// query runs fn on the read connections without a transaction around it:
// for reads of a single statement, which SQLite runs on a consistent
// snapshot by itself.
func (db *DB) query(ctx context.Context, fn func(q dbtx) error) error {
	defer db.rstmts.prepareWanted(ctx)
	return fn(dbtx{db: db.rdb, stmts: db.rstmts})
}

// target runs migrations on the write connection.
type target struct {
	db interface {
		BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
		ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	}
}

func (t target) Init(ctx context.Context) error {
	_, err := t.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at TEXT    NOT NULL
	)`)
	return err
}

func (t target) Applied(ctx context.Context) ([]int64, error) {
	rows, err := t.db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var vs []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, rows.Err()
}

func (t target) Apply(ctx context.Context, m migrate.Migration) error {
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Another process opening the same file may have applied it since
	// Applied was read; BEGIN IMMEDIATE has locked it out now.
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&done); err != nil {
		return err
	}
	if done > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UTC().Format(audit.TimeFormat)); err != nil {
		return err
	}
	return tx.Commit()
}
