package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// goalIndex holds the workflows a writer's batch has created whose goals
// are not yet in workflow_goals, the FTS5 index of the console's search
// (q=). The batch indexes them in one statement after its writes, at the
// top of its transaction, so they commit or roll back with the workflows.
//
// Indexed one at a time inside each write's savepoint, every goal cost an
// FTS5 flush to disk: FTS5 writes what it holds in memory whenever a
// savepoint opens or is released, so each workflow made a segment of its
// own for the index to merge later (docs/performance.md, "Workflow goals
// indexed once a batch").
type goalIndex struct {
	rowids []int64
}

// add notes the workflow res inserted. A write rolled back to its
// savepoint may leave its rowid here, with no row behind it or another
// workflow's after it: index finds each row that is there once.
func (g *goalIndex) add(res sql.Result) error {
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("read the new workflow's rowid: %w", err)
	}
	g.rowids = append(g.rowids, id)
	return nil
}

// indexGoalsOf indexes the goals of the workflows whose rowids are the
// JSON array ?1.
const indexGoalsOf = `INSERT INTO workflow_goals (rowid, goal)
	SELECT rowid, goal FROM workflows WHERE rowid IN (SELECT value FROM json_each(?1))`

// index adds the noted workflows' goals to workflow_goals in tx.
func (g *goalIndex) index(ctx context.Context, tx dbtx) error {
	if len(g.rowids) == 0 {
		return nil
	}
	ids, err := json.Marshal(g.rowids)
	if err != nil {
		return err
	}
	g.rowids = g.rowids[:0]
	if _, err := tx.ExecContext(ctx, indexGoalsOf, string(ids)); err != nil {
		return fmt.Errorf("index workflow goals: %w", err)
	}
	return nil
}

// reset forgets the noted workflows: a batch begins with none, whatever
// became of the last one.
func (g *goalIndex) reset() { g.rowids = g.rowids[:0] }
