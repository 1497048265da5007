package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements by query text. The driver prepares a
// statement afresh for every Exec otherwise, which under load was a quarter
// of the writer's time.
//
// The readers' cache prepares on the pool (db); a miss runs the query
// unprepared once and prepares it after the reader's transaction ends, when
// the pool may lend the same connection again. The writer's cache prepares
// on the writer's own connection (conn), at once, even inside a
// transaction: its statements then run on that connection without
// database/sql binding a copy of each to a transaction and closing it at
// the commit (docs/performance.md, "The writer's statements on its own
// connection").
type stmtCache struct {
	db   *sql.DB
	conn *sql.Conn
	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want map[string]struct{}
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, want: map[string]struct{}{}}
}

// newConnStmtCache is the cache of statements prepared on conn.
func newConnStmtCache(conn *sql.Conn) *stmtCache {
	return &stmtCache{conn: conn, m: map[string]*sql.Stmt{}}
}

// get returns the prepared statement of q. On a miss it prepares q on the
// cache's connection, or returns nil and notes q as wanted.
func (c *stmtCache) get(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[q]
	if ok {
		return s
	}
	if c.conn != nil {
		s, err := c.conn.PrepareContext(context.Background(), q)
		if err != nil {
			return nil // it runs unprepared, and reports its own error
		}
		c.m[q] = s
		return s
	}
	c.want[q] = struct{}{}
	return nil
}

// prepareWanted prepares the queries noted since the last call; it must run
// while the caller holds no connection of c.db.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	want := c.want
	if len(want) == 0 {
		c.mu.Unlock()
		return
	}
	c.want = map[string]struct{}{}
	c.mu.Unlock()
	for q := range want {
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue // it keeps running unprepared
		}
		c.mu.Lock()
		if _, ok := c.m[q]; ok {
			s.Close()
		} else {
			c.m[q] = s
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.m {
		s.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// dbtx runs queries through the statement cache: inside a transaction
// (tx), on the writer's connection, inside the transaction the writer began
// there (conn), or, when both are nil, straight on db, each statement in its
// own implicit transaction (enough for a read of one statement, and cheaper
// than BEGIN/COMMIT around it).
type dbtx struct {
	tx    *sql.Tx
	conn  *sql.Conn
	db    *sql.DB
	stmts *stmtCache
	// heads is the writer's audit chain heads; nil outside the writer.
	heads *headCache
	// goals is the writer's batch's workflows whose goals are not yet
	// indexed; nil outside the writer, which alone creates workflows.
	goals *goalIndex
	// ctx, when set, replaces the context a statement is given. The
	// writer sets it: a batch's writes share one transaction, and SQLite
	// interrupting a write's statement because its caller went away would
	// roll back the whole transaction, every other caller's writes too.
	ctx context.Context
}

// context returns the context statements run under.
func (t dbtx) context(ctx context.Context) context.Context {
	if t.ctx != nil {
		return t.ctx
	}
	return ctx
}

// stmt returns q's prepared statement, bound to the transaction when there
// is one (the writer's are bound to its connection already), or nil.
func (t dbtx) stmt(ctx context.Context, q string) *sql.Stmt {
	s := t.stmts.get(q)
	if s == nil || t.tx == nil {
		return s
	}
	return t.tx.StmtContext(ctx, s)
}

// runner is what runs an unprepared statement: the transaction, the
// writer's connection or the pool.
func (t dbtx) runner() interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
} {
	switch {
	case t.tx != nil:
		return t.tx
	case t.conn != nil:
		return t.conn
	}
	return t.db
}

// ExecContext runs q prepared when it has been seen before.
func (t dbtx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx = t.context(ctx)
	if s := t.stmt(ctx, q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return t.runner().ExecContext(ctx, q, args...)
}

// QueryContext runs q prepared when it has been seen before.
func (t dbtx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx = t.context(ctx)
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return t.runner().QueryContext(ctx, q, args...)
}

// QueryRowContext runs q prepared when it has been seen before.
func (t dbtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	ctx = t.context(ctx)
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return t.runner().QueryRowContext(ctx, q, args...)
}
