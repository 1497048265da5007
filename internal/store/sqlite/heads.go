package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentplane/agentplane/internal/audit"
)

// maxCachedHeads bounds the head cache; it starts over when full.
const maxCachedHeads = 100_000

// chainHead is the last record of a tenant's audit chain.
type chainHead struct {
	seq  int64
	hash string
}

// headCache keeps the audit chains' heads for the writer, so appending a
// record reads nothing. It is the writer's alone and follows its
// transaction: heads set in a savepoint count for the batch only once the
// savepoint is released, and for later batches only once the batch
// commits. Other connections (another process on the same file, such as
// the CLI adding a client) can append too; the writer checks PRAGMA
// data_version at the start of each batch, under the write lock, and
// forgets every head when anyone else has committed.
type headCache struct {
	committed map[string]chainHead
	batch     map[string]chainHead
	sp        map[string]chainHead
	version   int64
	// tail counts the records appended since the tail was last moved
	// (rolled-back ones too: it only schedules the move).
	tail int
}

func newHeadCache() *headCache {
	return &headCache{committed: map[string]chainHead{}, batch: map[string]chainHead{}, sp: map[string]chainHead{}, version: -1}
}

// begin starts a batch in tx, which holds the write lock.
func (c *headCache) begin(ctx context.Context, tx dbtx) error {
	var v int64
	if err := tx.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return fmt.Errorf("read data version: %w", err)
	}
	if v != c.version || len(c.committed) >= maxCachedHeads {
		clear(c.committed)
		c.version = v
	}
	return nil
}

// head returns the tenant's chain head as tx sees it.
func (c *headCache) head(ctx context.Context, tx dbtx, tenant string) (chainHead, error) {
	for _, m := range []map[string]chainHead{c.sp, c.batch, c.committed} {
		if h, ok := m[tenant]; ok {
			return h, nil
		}
	}
	h := chainHead{hash: audit.Genesis}
	err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM (
		SELECT * FROM (SELECT seq, hash FROM audit_records WHERE tenant = ? ORDER BY seq DESC LIMIT 1)
		UNION ALL SELECT * FROM (SELECT seq, hash FROM audit_tail WHERE tenant = ? ORDER BY seq DESC LIMIT 1))
		ORDER BY seq DESC LIMIT 1`, tenant, tenant).Scan(&h.seq, &h.hash)
	if err != nil && err != sql.ErrNoRows {
		return h, fmt.Errorf("read audit head: %w", err)
	}
	return h, nil
}

func (c *headCache) set(tenant string, h chainHead) { c.sp[tenant] = h }

// release keeps the savepoint's heads for the batch; rollback drops them.
func (c *headCache) release() {
	for k, h := range c.sp {
		c.batch[k] = h
	}
	clear(c.sp)
}

func (c *headCache) rollbackSavepoint() { clear(c.sp) }

// commit keeps the batch's heads; rollback drops them (the committed ones
// still hold); forget, when a commit's outcome is unknown, drops every
// head, to be read again.
func (c *headCache) commit() {
	for k, h := range c.batch {
		c.committed[k] = h
	}
	clear(c.batch)
}

func (c *headCache) rollback() {
	clear(c.sp)
	clear(c.batch)
}

func (c *headCache) forget() {
	c.rollback()
	clear(c.committed)
}
